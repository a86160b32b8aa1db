"""Does `course slides NN` build a slideshow of the lesson's key cells, from a copy, without
ever showing an exercise's answer, and does every lesson's key list still name its headings?"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
import pytest

from course import cli, slides
from course.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[1]


def _solution(lesson):
    return nbformat.read(ROOT / "solutions" / lesson.notebook, as_version=4)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_every_key_names_one_heading_of_the_lesson(lesson):
    nb = _solution(lesson)
    starts = slides.key_cells(nb, lesson.number)
    assert starts[0] == 0 and len(starts) >= len(lesson.key_cells) + 1
    for i, key in zip(starts[1:], lesson.key_cells):
        assert nb.cells[i].cell_type == "markdown" and nb.cells[i].source.lstrip("#").lstrip().startswith(key)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_the_copy_shows_no_exercise_cell_and_leaves_the_lesson_alone(lesson):
    nb = _solution(lesson)
    shown = slides.slideshow_copy(nb, lesson.number)
    assert all("slideshow" not in cell.metadata for cell in nb.cells)  # the lesson itself is untouched
    for cell in shown.cells:
        visible = cell.metadata["slideshow"]["slide_type"] != "skip"
        if visible and cell.cell_type == "code":
            assert "### BEGIN SOLUTION" not in cell.source and "check(" not in cell.source, cell.source[:200]
    assert sum(c.metadata["slideshow"]["slide_type"] == "slide" for c in shown.cells) == len(
        slides.key_cells(nb, lesson.number)
    )


def test_a_renamed_heading_is_reported_with_the_list_to_update():
    lesson = LESSONS[1]
    nb = _solution(lesson)
    key = lesson.key_cells[0]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace(key, "Something else")
    with pytest.raises(slides.SlidesError) as raised:
        slides.key_cells(nb, lesson.number)
    message = str(raised.value)
    assert message.startswith(f"course/lessons.py: lesson {lesson.number:02d}'s key {key!r} names 0 headings")
    assert '(house rule "key cells for the slides")' in message and "key_cells=(...)" in message


def test_a_lesson_without_key_cells_is_told_where_to_name_them(monkeypatch):
    lesson = LESSONS[1]
    monkeypatch.setitem(slides.KEY_CELLS, lesson.number, ())
    with pytest.raises(
        slides.SlidesError, match=r"names no key cells \(house rule \"key cells for the slides\"\)"
    ):
        slides.key_cells(_solution(lesson), lesson.number)


def test_the_slides_build_as_reveal_js_html_with_the_key_cells_only(tmp_path, capsys):
    lesson = LESSONS[3]  # saved tensors: some headings are keys, some are not
    assert cli.main(["slides", f"{lesson.number:02d}", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    copy_path, html_path = tmp_path / f"{lesson.slug}.slides.ipynb", tmp_path / f"{lesson.slug}.slides.html"
    assert f"wrote {copy_path} (" in out and f"wrote {html_path} (" in out
    page = html.unescape(html_path.read_text())
    assert "reveal.js" in page and "Reveal.initialize" in page
    shown, checked = nbformat.read(copy_path, as_version=4), set()
    for cell in shown.cells:
        kind = cell.metadata["slideshow"]["slide_type"]
        first = cell.source.splitlines()[0] if cell.source else ""
        if cell.cell_type == "markdown" and first.startswith("#"):
            text = first.lstrip("#").strip()
            if re.fullmatch(r"[\w ,.:'-]+", text):  # headings that render as plain text (no `code`)
                assert (text in page) == (kind != "skip"), (text, kind)
                checked.add(kind)
    assert checked == {"slide", "skip"}  # both a shown and a skipped heading were looked for
    assert "### BEGIN SOLUTION" not in page


def test_an_offline_deck_loads_its_scripts_from_beside_it(tmp_path, capsys):
    """--offline: reveal.js, require.js, jQuery and MathJax are copied from installed packages
    (the ``slides`` extra), and the page names no network address for any of them."""
    pytest.importorskip("pyreveal")
    pytest.importorskip("nbclassic")
    lesson = LESSONS[1]
    assert cli.main(["slides", f"{lesson.number:02d}", "--out", str(tmp_path), "--offline"]) == 0
    assert f"offline, with {tmp_path / slides.ASSETS}" in capsys.readouterr().out
    page = (tmp_path / f"{lesson.slug}.slides.html").read_text()
    loaded = re.findall(r'<script src="([^"]+)"|<link href="([^"]+)"|"([^"]+\.js)",?\n', page)
    loaded = {a or b or c for a, b, c in loaded}
    assert {f"{slides.ASSETS}/require.js", f"{slides.ASSETS}/jquery.min.js"} <= loaded
    assert f"{slides.ASSETS}/reveal.js/dist/reveal.js" in loaded and len(loaded) >= 6
    for url in loaded:
        assert not url.startswith(("http:", "https:", "//")), url
        assert (tmp_path / url.split("?")[0]).is_file(), url  # every one of them is there
    assert slides.FIT_CSS in page  # a tall slide scrolls, a wide output scrolls sideways


def test_offline_without_the_packages_says_which_extra_to_install(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "pyreveal" else real(name))
    assert cli.main(["slides", "01", "--out", str(tmp_path), "--offline"]) == 1
    said = capsys.readouterr().err
    assert "pyreveal" in said and "pip install 'autograd-course[slides]'" in said
