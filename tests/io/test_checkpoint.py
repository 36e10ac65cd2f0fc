from __future__ import annotations

import io
import os
import pickle

import pytest
import torch

from nmt.errors import NmtError
from nmt.io import checkpoint, files


def test_save_load_round_trip(tmp_path):
    path = tmp_path / "c.pt"
    checkpoint.save(path, {"model": {"w": torch.ones(3)}, "vocab": b"\x00bytes"})
    out = checkpoint.load(path)
    assert torch.equal(out["model"]["w"], torch.ones(3)) and out["vocab"] == b"\x00bytes"
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temp file left


def test_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "c.pt"
    checkpoint.save(path, {"x": 1})

    def explode(f):
        f.write(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(NmtError, match="No space left"):
        files.atomic_write(path, explode)
    assert checkpoint.load(path)["x"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


class Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_pickle_with_code_is_refused_not_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    torch.save({"format": "nmt-checkpoint", "version": 1, "x": Evil()}, path)
    with pytest.raises(NmtError, match="refused to load"):
        checkpoint.load(path)
    assert not (tmp_path / "pwned").exists()


def test_raw_pickle_is_refused(tmp_path):
    path = tmp_path / "raw.pt"
    path.write_bytes(pickle.dumps(Evil(), protocol=2))
    with pytest.raises(NmtError):
        checkpoint.load(path)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", "truncated"])
def test_garbage_and_truncated(tmp_path, content):
    path = tmp_path / "bad.pt"
    if content == "truncated":
        buf = io.BytesIO()
        torch.save({"format": "nmt-checkpoint", "version": 1, "w": torch.ones(1000)}, buf)
        content = buf.getvalue()[: len(buf.getvalue()) // 2]
    path.write_bytes(content)
    with pytest.raises(NmtError, match=r"bad\.pt"):
        checkpoint.load(path)


def test_foreign_and_future_checkpoints(tmp_path):
    torch.save({"state_dict": {}}, tmp_path / "foreign.pt")
    with pytest.raises(NmtError, match="not an nmt checkpoint"):
        checkpoint.load(tmp_path / "foreign.pt")
    torch.save({"format": "nmt-checkpoint", "version": 99}, tmp_path / "future.pt")
    with pytest.raises(NmtError, match="version 99"):
        checkpoint.load(tmp_path / "future.pt")
