"""``nmt data fetch`` against a local HTTP mirror on 127.0.0.1."""

from __future__ import annotations

import functools
import gzip
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from nmt.data.fetch import MULTI30K_SHA256, fetch
from nmt.errors import NmtError


@pytest.fixture
def serve():
    """Serve a directory over HTTP on 127.0.0.1 for the duration of a test."""
    servers = []

    def start(directory: Path) -> str:
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
        handler.log_message = lambda *a: None
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # A short poll: shutdown() waits up to one poll interval (0.5 s by default).
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_fetch_from_a_local_mirror(multi30k, serve, tmp_path):
    out = tmp_path / "out"
    written = fetch("multi30k", out, ["de-en"], serve(multi30k), log=lambda m: None)
    assert sorted(p.name for p in written) == sorted(MULTI30K_SHA256)
    assert gzip.decompress((out / "val.en.gz").read_bytes()).count(b"\n") == 1014


@pytest.mark.parametrize("damage", ["truncate", "flip", "deflate"])
def test_a_corrupt_file_is_rejected_and_nothing_written(multi30k, serve, tmp_path, damage):
    mirror = tmp_path / "mirror"
    shutil.copytree(multi30k, mirror)
    victim = mirror / "test_2016_flickr.en.gz"
    data = victim.read_bytes()
    if damage == "truncate":
        victim.write_bytes(data[: len(data) // 2])
    elif damage == "deflate":  # a corrupt deflate stream: zlib.error, not OSError
        victim.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    else:
        text = bytearray(gzip.decompress(data))
        text[100] ^= 1
        victim.write_bytes(gzip.compress(bytes(text)))
    out = tmp_path / "out"
    with pytest.raises(NmtError, match=r"test_2016_flickr\.en\.gz.*nothing written"):
        fetch("multi30k", out, ["de-en"], serve(mirror), log=lambda m: None)
    assert not out.exists() or not any(out.iterdir())


def test_unreachable_mirror_and_unknown_language(tmp_path):
    with pytest.raises(NmtError, match="download failed"):
        fetch("multi30k", tmp_path, ["de-en"], "http://127.0.0.1:9/", log=lambda m: None)
    with pytest.raises(NmtError, match="available languages: de, en"):
        fetch("multi30k", tmp_path, ["fr-en"], str(tmp_path), log=lambda m: None)
    for half in ("de", "de-de", "de-en-fr"):
        with pytest.raises(NmtError, match="not a language pair"):
            fetch("multi30k", tmp_path, [half], str(tmp_path), log=lambda m: None)
    assert not any(tmp_path.iterdir())


def test_files_already_there_are_kept_if_verified_and_never_replaced(multi30k, serve, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(multi30k / "val.en.gz", out / "val.en.gz")
    said = []
    written = fetch("multi30k", out, ["de-en"], serve(multi30k), log=said.append)
    assert sorted(p.name for p in written) == sorted(MULTI30K_SHA256)
    assert "val.en.gz: already there, verified" in said
    mine = gzip.compress(b"my own corpus\n")
    (out / "train.de.gz").write_bytes(mine)
    with pytest.raises(NmtError, match=r"train\.de\.gz: exists and is not the verified file"):
        fetch("multi30k", out, ["de-en"], serve(multi30k), log=lambda m: None)
    assert (out / "train.de.gz").read_bytes() == mine
