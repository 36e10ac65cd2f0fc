"""Figures and fonts: a character that no installed font has is said once per
figure, on one line, instead of one matplotlib warning per character; a Chinese
label is drawn by an installed CJK font (Debian's fonts-wqy-microhei, which .ci/run
installs), also one installed after matplotlib listed the system's fonts."""

from __future__ import annotations

import warnings

import pytest

from nmt.inspection.plotting import FALLBACK_FONTS, installed_fonts, pyplot, save_figure
from tests.conftest import skip_or_fail

# a code point of Supplementary Private Use Area-A: no font has it
NO_FONT_HAS = "\U000f0001"
CHINESE = "埃里克森是一名"


@pytest.fixture
def cjk_font() -> tuple[str, str]:
    """The first installed CJK family of FALLBACK_FONTS and its file."""
    from matplotlib import font_manager

    cjk = [f for f in FALLBACK_FONTS if "CJK" in f or "Hei" in f or "Han" in f]
    found = installed_fonts(tuple(cjk))
    if not found:
        message = f"no CJK font here (one of {', '.join(cjk)}; .ci/run installs fonts-wqy-microhei)"
        skip_or_fail(message)
    assert found[0] in pyplot().rcParams["font.family"]
    return found[0], next(f.fname for f in font_manager.fontManager.ttflist if f.name == found[0])


def draw(text: str, path) -> None:
    fig, ax = pyplot().subplots(figsize=(3, 2))
    ax.set_xticks(range(len(text)), list(text))
    save_figure(fig, path)


def test_characters_without_a_glyph_are_one_line_naming_the_figure(tmp_path, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        draw(NO_FONT_HAS * 3 + "ab", tmp_path / "boxes.png")
    assert not [w for w in caught if "Glyph" in str(w.message)]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert f"{tmp_path / 'boxes.png'}: 1 character(s) have no glyph" in lines[0]
    assert "U+F0001" in lines[0] and (tmp_path / "boxes.png").stat().st_size > 0


def test_chinese_labels_are_drawn_by_an_installed_cjk_font(cjk_font, tmp_path, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        draw(CHINESE, tmp_path / "zh.png")
    assert not [w for w in caught if "Glyph" in str(w.message)]
    assert capsys.readouterr().err == ""


def test_a_font_installed_after_matplotlib_listed_the_fonts_is_found(cjk_font, monkeypatch):
    from matplotlib import font_manager

    family, path = cjk_font
    manager = font_manager.fontManager
    monkeypatch.setattr(manager, "ttflist", [f for f in manager.ttflist if f.fname != path])
    assert family not in {f.name for f in manager.ttflist}
    assert family in installed_fonts(FALLBACK_FONTS)
