"""The finders of the house rules that read the package: registrations, docstrings, generated docs.

Like :mod:`course.house.notebooks` (which reads the notebooks), each finder returns a list of
:func:`course.house.rules.offence` lines, empty when its rule holds::

    >>> too_few_examples("course.autograd.graph", 11, 11)
    []
    >>> print(provenance_offences("offload/demo.py", "What is whose: all of it is ours.")[0])
    course/offload/demo.py: the paragraph is headed 'What is whose:' (house rule "one provenance
    heading"). Fix: head the paragraph "What is ours and what is torch's:" and say it once per
    module; a facade points to the module it re-exports instead.

    # OK:  What is ours and what is torch's: the graph is torch's C++; the reprs are ours.
    # BAD: What is whose: ...                  (another heading for the same paragraph)
    # BAD: the same paragraph again in a facade (course/joint.py): it points to course.aot.joint

What is ours and what is torch's: all of it is ours (torch has no lessons).
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from course.house.rules import PROVENANCE_HEADING, offence
from course.lessons import exercise_file, exercise_module, registrations_in

__all__ = [
    "FACADES",
    "FUNCTION_LINES",
    "MIRRORS",
    "MODULE_LINES",
    "NOTES_SECTIONS",
    "exercise_module_offences",
    "notes_offences",
    "provenance_offences",
    "size_offences",
    "solution_lines_in_hint",
    "stale_generated_docs",
    "too_few_examples",
    "wrong_answer_not_told_apart",
    "wrong_answers_not_written_out",
]

#: The public faces kept at their paths (docs/DESIGN): they re-export, and point to the module
#: that says what is ours, rather than say it again.
FACADES = ("autograd_graph.py", "descriptors.py", "fx_utils.py", "joint.py", "checkpoint.py")


def _registration_file(ex) -> str:
    """The module that registers ``ex`` (``course/checks/lessonNN/exN_M_name.py``)."""
    return exercise_file(ex.id)


def _code_lines(fn) -> list[str]:
    """The statements of ``fn``'s body worth recognising (no def line, docstring or comment)."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return []
    lines = [line.split("  #")[0].strip() for line in source.splitlines()[1:]]
    return [line for line in lines if len(line) >= 12 and not line.startswith(("#", '"', "'"))]


def solution_lines_in_hint(ex) -> list[str]:
    """Rule ``hint``: the exercise's fallback hint shows no line of its reference solution."""
    shown = [line for line in _code_lines(ex.solution) if line in ex.hint]
    if not shown:
        return []
    what = f"exercise {ex.id}'s fallback hint shows the solution's line {shown[0]!r}"
    return [offence("hint", _registration_file(ex), what, id=ex.id)]


def wrong_answers_not_written_out(ex) -> list[str]:
    """Rule ``written-out``: every known wrong answer that is code is a named top-level function
    or class (a lambda or a function a factory built has ``<lambda>`` / ``<locals>`` in its
    qualified name), so the catalogue can name it and a reader finds its mistake in its body."""
    found = []
    for k, w in enumerate(ex.wrong):
        name = getattr(w.answer, "__qualname__", None) if callable(w.answer) else None
        if name is not None and ("<lambda>" in name or "<locals>" in name):
            what = f"exercise {ex.id}'s {_wrong_label(ex, k)} is {name}"
            found.append(
                offence("written-out", _registration_file(ex), what, id=ex.id, answer=f"wrong answer {k}")
            )
    return found


def _wrong_label(ex, k: int) -> str:
    return f"wrong answer {k} ({' '.join(ex.wrong[k].hint.split())[:50]!r})"


def wrong_answer_not_told_apart(ex, k: int, verdict: dict | None = None) -> list[str]:
    """Rule ``distinct-wrong``: the k-th known wrong answer fails with its own hint.

    ``verdict`` is what the grader reported for it (``status`` and ``hint``); without one the
    answer is judged here, as a notebook's ``check`` judges it. An answer that passes, or
    gets another answer's hint, behaves like that other on every case."""
    if verdict is None:
        from course.checks import grade_answer

        result = grade_answer(ex, ex.wrong[k].answer)
        verdict = {"status": result.status, "hint": result.hint}
    if verdict["status"] != "passed" and verdict["hint"] == ex.wrong[k].hint:
        return []
    if verdict["status"] == "passed":
        other, what = "the solution", "is accepted: it passes every case"
    else:
        twins = [j for j, w in enumerate(ex.wrong) if j != k and w.hint == verdict["hint"]]
        other = _wrong_label(ex, twins[0]) if twins else "the answers the fallback hint is for"
        what = f"gets the hint of {other}: the two give the same results on every case"
    where = f"{_registration_file(ex)}, exercise {ex.id}"
    return [
        offence(
            "distinct-wrong", where, f"{_wrong_label(ex, k)} {what}", this=f"wrong answer {k}", other=other
        )
    ]


def too_few_examples(module: str, attempted: int, minimum: int) -> list[str]:
    """Rule ``doctest-minimum``: a module keeps at least ``minimum`` docstring examples."""
    if attempted >= minimum:
        return []
    path = module.replace(".", "/") + ".py"
    what = f"its docstrings hold {attempted} examples, at least {minimum} expected (MIN_EXAMPLES)"
    return [offence("doctest-minimum", path, what, module=module)]


#: The ways a paragraph has been headed that says what is ours and what is torch's.
_PROVENANCE = re.compile(
    r"(?:^|(?<=[.;] ))(What is (?:ours|torch's|whose|the course's)\b[^:\n]*:|Provenance\b[^:\n]*:"
    r"|Ours and torch's:|Whose is what:)",
    re.MULTILINE,
)


def provenance_offences(relpath: str, docstring: str) -> list[str]:
    """Rule ``provenance``: the module docstring of course/``relpath`` heads its "what is ours,
    what is torch's" paragraph :data:`~course.house.rules.PROVENANCE_HEADING`, once; a facade
    (:data:`FACADES`) has none."""
    headings = [m.group(1) for m in _PROVENANCE.finditer(docstring or "")]
    where = f"course/{relpath}"
    found = [
        offence("provenance", where, f"the paragraph is headed {h!r}")
        for h in headings
        if h != PROVENANCE_HEADING
    ]
    if relpath in FACADES and headings:
        found.append(offence("provenance", where, "a facade says again what its module says"))
    elif len(headings) > 1:
        found.append(offence("provenance", where, f"the paragraph is said {len(headings)} times"))
    return found


def missing_forms(lesson, root: Path, exercises: int) -> list[str]:
    """Rule ``lesson-forms``: a registered lesson has its solution notebook (the source), its
    learner copy made from it, at least one registered exercise (``exercises`` is how many),
    and every file its entry says it ``reads``."""
    number = f"{lesson.number:02d}"
    solution, copy = f"solutions/{lesson.notebook}", f"notebooks/{lesson.notebook}"
    wants = [
        (
            solution,
            not (root / solution).exists(),
            f"write {solution}, the lesson's source (docs/authoring.md, step 2)",
        ),
        (copy, not (root / copy).exists(), f"run `course assign {number}` and commit {copy}"),
        (
            f"course/checks/lesson{number}/",
            exercises == 0,
            f"register each of the lesson's exercises in its own module of course/checks/lesson{number}/ "
            f"(ex{lesson.number}_1_NAME.py, ...; docs/authoring.md, step 4)",
        ),
    ] + [
        (path, not (root / path).exists(), f"write {path} or drop it from the lesson's reads=")
        for path in lesson.reads
    ]
    return [
        offence(
            "lesson-forms", where, f"lesson {lesson.number} is registered but this is missing", fix_what=fix
        )
        for where, missing, fix in wants
        if missing
    ]


def exercise_module_offences(package: Path, root: Path) -> list[str]:
    """Rule ``one-exercise-module``: in a lesson's package of checks (``course/checks/lessonNN/``)
    each exercise module registers exactly one exercise, the one its name says
    (:func:`course.lessons.exercise_module`), and the package's other modules (``__init__``,
    ``_shared``) register none. A lesson whose checks are still one module is not judged."""
    found = []
    for path in sorted(package.glob("*.py")):
        where = path.relative_to(root).as_posix()
        registered = registrations_in(path)
        misplaced = [m for m in (exercise_module(i, n) for i, n in registered if i and n) if m != path.stem]
        folder = package.relative_to(root).as_posix()
        if not path.stem.startswith("ex"):
            what = f"it registers {len(registered)} exercise(s); only an exercise module registers one"
        elif len(registered) != 1 or misplaced:
            ids = ", ".join(str(i) for i, _ in registered) or "none"
            what = f"it registers {len(registered)} exercise(s) ({ids}); its name says one, {path.stem}"
        else:
            continue
        module = misplaced[0] if misplaced else path.stem
        if registered or path.stem.startswith("ex"):
            found.append(offence("one-exercise-module", where, what, module=module, folder=folder))
    return found


def index_offences(package: str, docstring: str, modules: list[str]) -> list[str]:
    """Rule ``package-index``: the docstring of ``package`` (``course.grading``, say) names each
    of its ``modules`` as ``:mod:`package.module```, so its index is the map of the folder.

    A family of modules named alike (``lesson00`` ... ``lesson09``) may be named once by its
    pattern with ``NN`` for the digits (``:mod:`course.content.lessonNN```)."""
    folder = package.removeprefix("course.").replace(".", "/")
    named = set(re.findall(r":mod:`~?([\w.]+)`", docstring or ""))

    def is_named(module: str) -> bool:
        family = re.sub(r"\d+$", "NN", module)  # lesson03 -> lessonNN
        return f"{package}.{module}" in named or f"{package}.{family}" in named

    return [
        offence(
            "package-index",
            f"course/{folder}/__init__.py",
            f"its index does not name {package}.{module}",
            module=f"{package}.{module}",
            package=package,
            folder=folder,
        )
        for module in modules
        if not is_named(module)
    ]


def stale_generated_docs(files: dict[Path, str], root: Path) -> list[str]:
    """Rule ``generated-docs``: each generated file (``{path: what it should hold}``, from
    :func:`course.guide.generated`) holds that text."""
    stale = [path for path, text in files.items() if not path.exists() or path.read_text() != text]
    return [
        offence(
            "generated-docs",
            str(p.relative_to(root)),
            "it is not what `python -m course.guide` generates now",
            path=p.relative_to(root),
        )
        for p in stale
    ]


#: The headings of a lesson's instructor notes, in order (rule ``instructor-notes``); the last
#: holds the block ``python -m course.guide`` fills from the checks.
NOTES_SECTIONS = (
    "## Demonstrate",
    "## Pause here",
    "## Where learners get stuck",
    "## Explaining the common wrong answers",
    "## Wrong answers the checks recognise",
)


#: The line ``python -m course.guide`` writes under each heading of a new lesson's notes.
NOTES_PLACEHOLDER = "(to write: see docs/authoring.md, step 8)"


def notes_stub(title: str) -> str:
    """A new lesson's instructor notes: its title, the lesson-time block, each heading of
    :data:`NOTES_SECTIONS` with a placeholder line, and the block the guide fills under the last."""
    sections = [f"{heading}\n\n{NOTES_PLACEHOLDER}\n" for heading in NOTES_SECTIONS[:-1]]
    last = f"{NOTES_SECTIONS[-1]}\n\n<!-- wrong-answers -->\n<!-- /wrong-answers -->\n"
    time = "<!-- lesson-time -->\n<!-- /lesson-time -->\n"  # the guide fills both blocks
    return f"# {title}: instructor notes\n\n{time}\n" + "\n".join([*sections, last])


def notes_offences(path: Path, root: Path) -> list[str]:
    """Rule ``instructor-notes``: the lesson's notes page exists, has every heading of
    :data:`NOTES_SECTIONS` in order and the block the guide fills.

    >>> notes_offences(Path("docs/instructor-notes/00_warmup.md"), Path(__file__).parents[2])
    []
    """
    where = str(path)
    full = root / path
    text = full.read_text() if full.is_file() else None
    block = "<!-- wrong-answers -->\n" in (text or "") and "<!-- /wrong-answers -->" in (text or "")
    found = [s for s in NOTES_SECTIONS if s in (text or "")]
    if text is None:
        what = "the lesson has no instructor notes"
    elif NOTES_PLACEHOLDER in text:
        what = "a section still holds the placeholder line the guide wrote"
    elif found != list(NOTES_SECTIONS) or [text.index(s) for s in found] != sorted(
        text.index(s) for s in found
    ):
        what = f"its headings are {found}, not all of them in order"
    elif not block:
        what = "it has no <!-- wrong-answers --> ... <!-- /wrong-answers --> block"
    else:
        return []
    sections = ", ".join(f'"{s[3:]}"' for s in NOTES_SECTIONS)
    return [offence("instructor-notes", where, what, path=where, sections=sections)]


#: The largest module and function the house keeps (lines, docstrings included).
MODULE_LINES, FUNCTION_LINES = 520, 80
#: What may be longer because the torch code it mirrors is as long (issue 45): path or
#: ``path:function`` -> the torch counterpart and its length.
MIRRORS = {
    "course/aot/descriptors.py": "torch/_functorch/_aot_autograd/descriptors.py, 782 lines in 2.13",
    "course/autograd/checkpoint.py": "torch/utils/checkpoint.py, about 1,600 lines",
    "course/autograd/hooks.py:register_multi_grad_hook": "torch.autograd.graph's, 129 lines in 2.13",
    "course/autograd/checkpoint.py:checkpoint": "torch.utils.checkpoint.checkpoint, about 150 lines",
}


def size_offences(path: Path, root: Path) -> list[str]:
    """Rule ``small-pieces``: the module at ``path`` is at most :data:`MODULE_LINES` long and
    each of its functions at most :data:`FUNCTION_LINES`, unless :data:`MIRRORS` names it.

    >>> size_offences(Path("course/house/rules.py"), Path(__file__).parents[2])
    []
    """
    rel = path.as_posix()
    text = (root / path).read_text()
    found = []
    lines = len(text.splitlines())
    if lines > MODULE_LINES and rel not in MIRRORS:
        found.append((rel, f"{lines} lines (the house keeps modules to about {MODULE_LINES - 20})", rel))
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > FUNCTION_LINES and f"{rel}:{node.name}" not in MIRRORS:
                where = f"{rel}:{node.lineno}"
                found.append((where, f"{node.name} is {length} lines (at most {FUNCTION_LINES})", node.name))
    return [offence("small-pieces", where, what, piece=name) for where, what, name in found]
