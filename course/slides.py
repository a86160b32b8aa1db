"""`course slides NN`: a lesson's key cells as a reveal.js slideshow, with no notebook edited.

The lessons carry no slideshow metadata (they are the learners' notebooks). Each lesson's
entry in ``course/lessons.py`` names the headings of the cells worth showing a room
(``key_cells``, gathered in :data:`KEY_CELLS`), and we build a
*copy* of the lesson with Jupyter's standard ``slideshow`` cell metadata on it::

    $ course slides 01
    wrote slides/01_autograd_graph.slides.ipynb (11 slides: open it with a presentation extension)
    wrote slides/01_autograd_graph.slides.html (reveal.js: open it in a browser)

The copy's metadata is what nbconvert's slides exporter reads (and what JupyterLab
presentation extensions such as RISE read); the HTML comes from nbconvert.

NOTE [Which cells become slides]
    1. The lesson's title cell is the first slide, its "Recap" heading the last.
    2. Each of the lesson's ``key_cells`` (course/lessons.py; the start of a markdown cell's
       first line, ``#``s left out) must name exactly one cell; it becomes a slide. A lesson
       names at least one (house rule "key cells for the slides").
    3. The code cell right after it is shown with it (a fragment: the demonstration and its
       stored output), unless it is an exercise's cell (a solution region, a stub or a
       ``check(...)``): the room sees the spec, never the answer.  # OK: "## Exercise 1.1"
    4. Every other cell is skipped.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from course.house.rules import offence
from course.lessons import LESSONS, get

__all__ = ["KEY_CELLS", "SlidesError", "build", "key_cells", "main", "slideshow_copy"]

ROOT = Path(__file__).resolve().parents[1]

#: The headings worth showing a room, per lesson, in order (NOTE [Which cells become slides]):
#: each lesson's ``key_cells`` in course/lessons.py, where a new lesson names them.
KEY_CELLS: dict[int, tuple[str, ...]] = {lesson.number: lesson.key_cells for lesson in LESSONS}

_EXERCISE_CODE = ("### BEGIN SOLUTION", "YOUR CODE HERE", "raise NotImplementedError", "check(")


class SlidesError(Exception):
    """A lesson names no key cells, or a key names no heading or several: its message says
    which lesson's ``key_cells`` to mend."""


def _heading(cell) -> str:
    lines = cell.source.splitlines() if cell.cell_type == "markdown" else []
    return lines[0].lstrip("#").strip() if lines and lines[0].startswith("#") else ""


def key_cells(nb, number: int) -> list[int]:
    """Indices of the cells that start a slide, in order (title, keys, recap).

    Raises:
        SlidesError: a key names no heading of ``nb``, or several.
    """
    keys = KEY_CELLS.get(number, ())
    if not keys:
        raise SlidesError(
            offence(
                "key-cells",
                "course/lessons.py",
                f"lesson {number:02d} names no key cells",
                lesson=f"{number:02d}",
            )
        )
    starts = [0]
    for key in keys:
        found = [i for i, cell in enumerate(nb.cells) if _heading(cell).startswith(key)]
        if len(found) != 1:
            raise SlidesError(
                offence(
                    "key-cells",
                    "course/lessons.py",
                    f"lesson {number:02d}'s key {key!r} names {len(found)} headings of its notebook, not one",
                    lesson=f"{number:02d}",
                )
            )
        starts.append(found[0])
    recap = [i for i, cell in enumerate(nb.cells) if _heading(cell) == "Recap"]
    return starts + recap[-1:]


def slideshow_copy(nb, number: int):
    """A copy of ``nb`` with ``metadata.slideshow`` on every cell (NOTE [Which cells become slides])."""
    shown = copy.deepcopy(nb)
    starts = set(key_cells(shown, number))
    for cell in shown.cells:
        cell.metadata["slideshow"] = {"slide_type": "skip"}
    for i in sorted(starts):
        shown.cells[i].metadata["slideshow"] = {"slide_type": "slide"}
        after = shown.cells[i + 1] if i + 1 < len(shown.cells) else None
        if (
            after is not None
            and after.cell_type == "code"
            and i + 1 not in starts
            and not any(mark in after.source for mark in _EXERCISE_CODE)
        ):
            after.metadata["slideshow"] = {"slide_type": "fragment"}
    return shown


def _lesson_notebook(number: int) -> Path:
    """The solution notebook of a checkout (stored outputs), else the install's learner copy."""
    from course.learner import workspace

    lesson = get(number)
    solved = ROOT / "solutions" / lesson.notebook
    return solved if solved.is_file() else workspace.find_source() / lesson.notebook


def build(number: int, out: Path, source: Path | None = None, reveal_prefix: str | None = None) -> list[Path]:
    """Write ``NN_slug.slides.ipynb`` and ``NN_slug.slides.html`` into ``out``; return both paths."""
    import nbformat
    from nbconvert import SlidesExporter

    lesson = get(number)
    nb = nbformat.read(source or _lesson_notebook(number), as_version=4)
    shown = slideshow_copy(nb, number)
    out.mkdir(parents=True, exist_ok=True)
    copy_path, html_path = out / f"{lesson.slug}.slides.ipynb", out / f"{lesson.slug}.slides.html"
    nbformat.write(shown, copy_path)
    exporter = SlidesExporter()
    if reveal_prefix:
        exporter.reveal_url_prefix = reveal_prefix
    html, _ = exporter.from_notebook_node(shown)
    html_path.write_text(html)
    return [copy_path, html_path]


def main(argv: list[str] | None = None) -> int:
    import nbformat

    parser = argparse.ArgumentParser(prog="course slides", description=__doc__.splitlines()[0])
    parser.add_argument("lesson", help="the lesson's number (01) or 'all'")
    parser.add_argument("--out", default="slides", help="the folder to write into (default: slides)")
    parser.add_argument(
        "--source",
        help="the notebook to build from (default: the lesson's solution, else the installed learner copy)",
    )
    parser.add_argument("--reveal-prefix", help="where reveal.js is served from (default: nbconvert's CDN)")
    args = parser.parse_args(argv)
    numbers = [lesson.number for lesson in LESSONS] if args.lesson == "all" else [int(args.lesson)]
    try:
        for number in numbers:
            copy_path, html_path = build(
                number, Path(args.out), Path(args.source) if args.source else None, args.reveal_prefix
            )
            count = sum(
                cell.metadata["slideshow"]["slide_type"] == "slide"
                for cell in nbformat.read(copy_path, as_version=4).cells
            )
            print(f"wrote {copy_path} ({count} slides: open it with a presentation extension)")
            print(f"wrote {html_path} (reveal.js: open it in a browser)")
    except (SlidesError, KeyError, ValueError) as exc:
        print(f"course slides: {exc}", file=sys.stderr)
        return 1
    return 0
