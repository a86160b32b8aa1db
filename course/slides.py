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

__all__ = [
    "ASSETS",
    "KEY_CELLS",
    "SlidesError",
    "build",
    "key_cells",
    "main",
    "offline_assets",
    "slideshow_copy",
]

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


# A demonstration fits its slide: a slide taller than the screen scrolls (the template's own
# scroll handler runs only on a slide change, not on the first slide), and a line of code or
# output wider than the slide scrolls sideways instead of running off the screen.
FIT_CSS = (
    ".reveal .slides section{max-height:100%;overflow-y:auto}"
    ".reveal .jp-Cell,.reveal .jp-OutputArea,.reveal .jp-InputArea{max-width:100%;min-width:0}"
    ".reveal pre,.reveal .jp-OutputArea-output,.reveal .jp-InputArea-editor{max-width:100%;overflow-x:auto}"
)
ASSETS = "slides-assets"  # beside the decks: what an --offline deck loads, copied from installed packages
_MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"  # the configuration nbclassic's MathJax ships


def offline_assets(out: Path) -> dict[str, str]:
    """Copy what a deck's page loads into ``out/ASSETS`` from installed packages (reveal.js from
    ``pyreveal``; require.js, jQuery and MathJax from ``nbclassic``: the ``slides`` extra) and
    return the exporter's settings that point at them, relative to ``out``.

    Raises:
        SlidesError: a package is not installed (the message says which extra installs it).
    """
    import shutil
    from importlib.util import find_spec

    found = {name: find_spec(name) for name in ("pyreveal", "nbclassic")}
    missing = [name for name, spec in found.items() if spec is None or not spec.submodule_search_locations]
    if missing:
        raise SlidesError(
            f"--offline copies reveal.js, require.js, jQuery and MathJax from {' and '.join(missing)}, "
            "which is not installed: pip install 'autograd-course[slides]'"
        )
    reveal = Path(found["pyreveal"].submodule_search_locations[0]) / "revealjs" / "dist"
    components = Path(found["nbclassic"].submodule_search_locations[0]) / "static" / "components"
    assets = out / ASSETS
    copies = {  # nbconvert's reveal template asks for reveal.js 4's layout: dist/ and plugin/notes/
        reveal / "reveal.js": assets / "reveal.js" / "dist" / "reveal.js",
        reveal / "reveal.css": assets / "reveal.js" / "dist" / "reveal.css",
        reveal / "theme" / "simple.css": assets / "reveal.js" / "dist" / "theme" / "simple.css",
        reveal / "plugin" / "notes.js": assets / "reveal.js" / "plugin" / "notes" / "notes.js",
        components / "requirejs" / "require.js": assets / "require.js",
        components / "jquery" / "jquery.min.js": assets / "jquery.min.js",
        components / "MathJax": assets / "MathJax",
    }
    for source, target in copies.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, target)
    return {
        "reveal_url_prefix": f"{ASSETS}/reveal.js",
        "require_js_url": f"{ASSETS}/require.js",
        "jquery_url": f"{ASSETS}/jquery.min.js",
        "mathjax_url": f"{ASSETS}/MathJax/MathJax.js?config={_MATHJAX_CONFIG}",
    }


def build(
    number: int,
    out: Path,
    source: Path | None = None,
    reveal_prefix: str | None = None,
    offline: bool = False,
) -> list[Path]:
    """Write ``NN_slug.slides.ipynb`` and ``NN_slug.slides.html`` into ``out``; return both paths.
    ``offline``: the page loads nothing from the network (:func:`offline_assets`)."""
    import nbformat
    from nbconvert import SlidesExporter

    lesson = get(number)
    nb = nbformat.read(source or _lesson_notebook(number), as_version=4)
    shown = slideshow_copy(nb, number)
    out.mkdir(parents=True, exist_ok=True)
    copy_path, html_path = out / f"{lesson.slug}.slides.ipynb", out / f"{lesson.slug}.slides.html"
    nbformat.write(shown, copy_path)
    exporter = SlidesExporter(reveal_scroll=True)  # a slide taller than the screen scrolls
    if reveal_prefix:
        exporter.reveal_url_prefix = reveal_prefix
    if offline:
        for name, value in offline_assets(out).items():
            setattr(exporter, name, value)
    html, _ = exporter.from_notebook_node(shown)
    html = html.replace("</head>", f"<style>{FIT_CSS}</style></head>", 1)
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
    parser.add_argument(
        "--offline",
        action="store_true",
        help=f"a deck that loads nothing from the network (its scripts copied into OUT/{ASSETS})",
    )
    args = parser.parse_args(argv)
    numbers = [lesson.number for lesson in LESSONS] if args.lesson == "all" else [int(args.lesson)]
    try:
        for number in numbers:
            copy_path, html_path = build(
                number,
                Path(args.out),
                Path(args.source) if args.source else None,
                args.reveal_prefix,
                args.offline,
            )
            count = sum(
                cell.metadata["slideshow"]["slide_type"] == "slide"
                for cell in nbformat.read(copy_path, as_version=4).cells
            )
            print(f"wrote {copy_path} ({count} slides: open it with a presentation extension)")
            where = f"; offline, with {Path(args.out) / ASSETS}" if args.offline else ""
            print(f"wrote {html_path} (reveal.js: open it in a browser{where})")
    except (SlidesError, KeyError, ValueError) as exc:
        print(f"course slides: {exc}", file=sys.stderr)
        return 1
    return 0
