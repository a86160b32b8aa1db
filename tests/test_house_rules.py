"""Does every house rule, broken on purpose, fail with a message that names the rule, the file
and the fix?

Each rule of ``course.house.rules.RULES`` has a proof here: a deliberately broken input (a
notebook in a temporary folder, a module's source, a made-up exercise) fed to the check that
enforces the rule. The message must name the rule, the file (and cell or line where there is
one) and the fix. A rule without a proof, or whose message names no fix, fails here. Also: the
provenance rule over the whole package, and docs/authoring.md walking through the rules in the
order an author meets them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course.checks import Exercise, case, wrong
from course.house import assign
from course.house import notebooks as house_notebooks
from course.house import sources as house_sources
from course.house.rules import PROVENANCE_HEADING, RULES
from course.lessons import Lesson

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course"


def _notebook(root: Path, relpath: str, *cells) -> Path:
    """Write a notebook of ``cells`` at ``root / relpath``; return ``relpath`` as a Path."""
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}}
    nbformat.write(new_notebook(cells=list(cells), metadata=meta), path)
    return Path(relpath)


def _prediction(solution, name="predicted_order"):
    return Exercise(
        id="97.1",
        name=name,
        title="t",
        kind="predict",
        solution=solution,
        oracle=lambda: solution,
        wrong=[wrong("a wrong value", "a hint")],
    )


# --- one proof per rule: (the offences it reports, the file they must name, words of the fix) --


def _lesson_forms(tmp: Path):
    _notebook(tmp, "notebooks/09_demo.ipynb", new_code_cell("x = 1"))
    lesson = Lesson(9, "09_demo", "Demo", (40, 50), ("learn",), (), ())
    offences = house_sources.missing_forms(lesson, tmp, exercises=1)
    assert len(offences) == 1, offences  # the learner copy is there; only the source is missing
    return offences, "solutions/09_demo.ipynb", "write solutions/09_demo.ipynb, the lesson's source"


def _top_level(tmp: Path):
    path = _notebook(
        tmp,
        "solutions/09_demo.ipynb",
        new_code_cell("import torch\nwith torch.no_grad():\n    def double(x):\n        return 2 * x"),
        new_code_cell("if True:\n    SCALE = 3\n\ndef triple(x):\n    return SCALE * x"),
    )
    offences = house_notebooks.not_at_top_level(path, ["double", "triple"], root=tmp)
    assert len(offences) == 2, offences
    assert "cell 2, line 2: triple reads SCALE" in offences[1]  # the helper, where it is bound
    return offences[:1], "solutions/09_demo.ipynb, cell 1, line 3", "move double to the top level of its cell"


def _prediction_literal(tmp: Path):
    path = _notebook(
        tmp,
        "notebooks/09_demo.ipynb",
        new_code_cell("predicted_order = ...  # exercise 9.1"),
        new_code_cell("order = run()\nassert order == ['mul', 'add']"),
    )
    offences = house_notebooks.predictions_written_down(path, [_prediction(["mul", "add"])], root=tmp)
    return offences, "notebooks/09_demo.ipynb, cell 2, line 2", "compute the answer again in that cell"


def _deterministic(tmp: Path):
    cell = new_code_cell("print(y.grad_fn)", execution_count=1)
    cell.outputs = [new_output("stream", text="<MulBackward0 object at 0x7f3a12b4c5d0>\n")]
    ignored = new_code_cell("# NBVAL_IGNORE_OUTPUT\nprint(y.grad_fn)", execution_count=2)
    ignored.outputs = [new_output("stream", text="<MulBackward0 object at 0x7f3a12b4c5d0>\n")]
    path = _notebook(tmp, "solutions/09_demo.ipynb", ignored, cell)
    offences = house_notebooks.unstable_outputs(path, root=tmp)
    return offences, "solutions/09_demo.ipynb, cell 2", "print what is the same on every run"


def _minutes(tmp: Path):
    lesson = Lesson(9, "09_demo", "Demo", (40, 50), ("learn",), (), ())
    path = _notebook(tmp, "solutions/09_demo.ipynb", new_markdown_cell("# Demo\n\nAbout 30 minutes."))
    offences = house_notebooks.minutes_disagree(path, lesson, root=tmp)
    return offences, "solutions/09_demo.ipynb, cell 1", 'write "About 40-50 minutes" in the opening cell'


def _plus_one(x):  # a wrong answer written out: the convention
    return x + 1


def _made_by(offset):  # a variant factory: the mistake hides in its argument
    def shifted(x):
        return x + offset

    return shifted


def _written_out(tmp: Path):
    ex = Exercise(
        id="97.1",
        name="double",
        title="t",
        solution=lambda x: 2 * x,
        cases=[case(3.0)],
        wrong=[
            wrong(_plus_one, "add, don't multiply?"),
            wrong(lambda x: x * x, "squared"),
            wrong(_made_by(2), "shifted by two"),
        ],
    )
    offences = house_sources.wrong_answers_not_written_out(ex)
    assert (
        len(offences) == 2 and "wrong answer 1" in offences[0] and "_made_by.<locals>.shifted" in offences[1]
    )
    return offences, "course/checks/lesson97.py", "write wrong answer 1 out as a named top-level function"


def _one_exercise_module(tmp: Path):
    package = tmp / "course" / "checks" / "lesson97"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Lesson 97."""\n')
    register = 'exercise("97.{m}", name="{name}", title="t", solution=None)\n'
    (package / "ex97_1_double.py").write_text(  # a second exercise moved in beside the first
        register.format(m=1, name="double") + register.format(m=2, name="SquareTwice")
    )
    (package / "ex97_3_halve.py").write_text(register.format(m=3, name="halve"))  # one, as named: right
    offences = house_sources.exercise_module_offences(package, tmp)
    assert len(offences) == 1 and "registers 2 exercise(s) (97.1, 97.2)" in offences[0], offences
    return offences, "course/checks/lesson97/ex97_1_double.py", "give each exercise its own module"


def _distinct_wrong(tmp: Path):
    ex = Exercise(
        id="97.2",
        name="absolute",
        title="t",
        solution=lambda x: abs(x),
        cases=[case(-2.0)],  # one negative case: x and x * 1 look alike on it, and -x looks right
        wrong=[
            wrong(lambda x: x, "a negative number stays negative"),
            wrong(lambda x: x * 1, "times one"),
            wrong(lambda x: -x, "a positive number turns negative"),
        ],
    )
    twin = house_sources.wrong_answer_not_told_apart(ex, 1)
    accepted = house_sources.wrong_answer_not_told_apart(ex, 2)
    assert "gets the hint of wrong answer 0" in twin[0] and "is accepted" in accepted[0], (twin, accepted)
    assert house_sources.wrong_answer_not_told_apart(ex, 0) == []  # it fails with its own hint
    assert house_sources.wrong_answer_not_told_apart(ex, 1, {"status": "failed", "hint": "times one"}) == []
    return twin, "course/checks/lesson97.py, exercise 97.2", "add a case on which wrong answer 1 and"


def _sum_of_squares(x):
    total = (x * x).sum()
    return total


def _hint(tmp: Path):
    ex = Exercise(
        id="97.3",
        name="sum_of_squares",
        title="t",
        solution=_sum_of_squares,
        cases=[case(2.0)],
        wrong=[wrong(lambda x: x, "square it")],
        hint="write total = (x * x).sum() and return it",
    )
    return (
        house_sources.solution_lines_in_hint(ex),
        "course/checks/lesson97.py",
        "rewrite exercise 97.3's hint=",
    )


def _own_words(tmp: Path):
    from test_own_words import torch_sentences_in, torch_text

    source = '"""The world token which is threaded through side-effectful operations"""\n'
    offences = torch_sentences_in("aot/demo.py", source, torch_text())
    return offences, "course/aot/demo.py:1", "say it in our own words"


def _doctest_minimum(tmp: Path):
    offences = house_sources.too_few_examples("course.autograd.graph", 3, 11)
    return offences, "course/autograd/graph.py", "restore the examples in course.autograd.graph's docstrings"


def _provenance(tmp: Path):
    offences = house_sources.provenance_offences(
        "offload/demo.py", "An offloader.\n\nWhat is whose: all ours.\n"
    )
    facade = house_sources.provenance_offences(
        "joint.py", f"A facade.\n\n{PROVENANCE_HEADING} torch's C++.\n"
    )
    assert "a facade says again" in facade[0], facade
    return offences, "course/offload/demo.py", f'head the paragraph "{PROVENANCE_HEADING}"'


def _probe(tmp: Path, module: str, source: str):
    """A module of the package for the structure checks, at a temporary path (removed after)."""
    import test_structure

    path = tmp / (module.rsplit(".", 1)[1] + ".py")
    path.write_text(source)
    test_structure.MODULES[module] = path
    return test_structure


def _no_cycles(tmp: Path):
    from test_structure import cycle_offences

    offences = cycle_offences({"course.a": {"course.b"}, "course.b": {"course.a"}, "course": {"course.a"}})
    return offences, "course/a.py", "move what the modules of the cycle share"


def _private_names(tmp: Path):
    structure = _probe(tmp, "course.probe_private", "from course.grading.worker import _run_definitions\n")
    try:
        offences = structure.private_import_offences(["course.probe_private"])
    finally:
        del structure.MODULES["course.probe_private"]
    return offences, "course/probe_private.py:1", "make _run_definitions public"


def _layering(tmp: Path):
    structure = _probe(tmp, "course.autograd.probe_layer", "def f():\n    from course.checks import get\n")
    try:
        offences = structure.layer_offences("course.autograd.probe", ("course.checks",))
    finally:
        del structure.MODULES["course.autograd.probe_layer"]
    return (
        offences,
        "course/autograd/probe_layer.py:2",
        "move what course.autograd.probe needs from course.checks",
    )


def _package_index(tmp: Path):
    docstring = "The reference.\n\n- :mod:`course.autograd.graph`: the graph;\n"
    offences = house_sources.index_offences("course.autograd", docstring, ["graph", "hooks"])
    assert (
        house_sources.index_offences("course.content", ":mod:`course.content.lessonNN`", ["lesson03"]) == []
    )
    return offences, "course/autograd/__init__.py", "add a line for course.autograd.hooks"


def _small_pieces(tmp: Path):
    body = "\n".join(f"    x{i} = {i}" for i in range(90))
    (tmp / "course").mkdir(exist_ok=True)
    (tmp / "course" / "long.py").write_text(f"def long():\n{body}\n")
    offences = house_sources.size_offences(Path("course/long.py"), tmp)
    return offences, "course/long.py:1", "split long by concept"


def _learner_copy(tmp: Path, capsys):
    _notebook(tmp, "solutions/09_demo.ipynb", new_code_cell("x = 1"))
    _notebook(tmp, "notebooks/09_demo.ipynb", new_code_cell("x = 2"))
    assert assign.main(["--check", "--root", str(tmp)]) == 1
    offences = capsys.readouterr().err.splitlines()
    return offences, "notebooks/09_demo.ipynb", "run `course assign 09`"


def _solutions_once(tmp: Path, capsys):
    region = "def double(x):\n    ### BEGIN SOLUTION 9.1\n    return 2 * x\n    ### END SOLUTION"
    _notebook(tmp, "solutions/09_demo.ipynb", new_code_cell(region))
    (tmp / "course" / "checks").mkdir(parents=True)
    assert assign.main(["--root", str(tmp)]) == 0  # writes the learner copy and the solutions' copy
    copy = tmp / "course" / "checks" / "solutions" / "lesson09.py"
    assert "def double(x):\n    return 2 * x\n" in copy.read_text()
    copy.write_text(copy.read_text().replace("2 * x", "x + x"))  # edited by hand: the second copy
    capsys.readouterr()
    assert assign.main(["--check", "--root", str(tmp)]) == 1
    offences = capsys.readouterr().err.splitlines()
    return offences, "course/checks/solutions/lesson09.py", "edit the solution region in solutions/09_*.ipynb"


def _generated_docs(tmp: Path):
    doc = tmp / "docs" / "exercises.md"
    doc.parent.mkdir()
    doc.write_text("the table as it was\n")
    offences = house_sources.stale_generated_docs({doc: "the table as it is now\n"}, tmp)
    return offences, "docs/exercises.md", "run `python -m course.guide` and commit docs/exercises.md"


def _instructor_notes(tmp: Path):
    notes = tmp / "docs" / "instructor-notes"
    notes.mkdir(parents=True)
    (notes / "10_demo.md").write_text("# Lesson 10\n\n## Demonstrate\n\n## Pause here\n")
    offences = house_sources.notes_offences(Path("docs/instructor-notes/10_demo.md"), tmp)
    missing = house_sources.notes_offences(Path("docs/instructor-notes/11_demo.md"), tmp)
    assert missing and "the lesson has no instructor notes" in missing[0]
    return (
        offences,
        "docs/instructor-notes/10_demo.md",
        "run `python -m course.guide`: it writes docs/instructor-notes/10_demo.md with the headings",
    )


def test_the_guide_writes_a_new_lessons_notes_with_every_heading_and_they_fail_until_written(tmp_path):
    notes = tmp_path / "docs" / "instructor-notes"
    notes.mkdir(parents=True)
    (notes / "10_demo.md").write_text(house_sources.notes_stub("Lesson 10, Demo"))
    (offence,) = house_sources.notes_offences(Path("docs/instructor-notes/10_demo.md"), tmp_path)
    assert "still holds the placeholder line" in offence, offence
    text = (notes / "10_demo.md").read_text().replace(house_sources.NOTES_PLACEHOLDER, "Show the graph.")
    (notes / "10_demo.md").write_text(text)
    assert house_sources.notes_offences(Path("docs/instructor-notes/10_demo.md"), tmp_path) == []
    for block in ("wrong-answers", "lesson-time"):  # the two blocks `python -m course.guide` fills
        assert f"<!-- {block} -->\n<!-- /{block} -->" in text, block


def _key_cells(tmp: Path):
    from course import slides

    nb = new_notebook(cells=[new_markdown_cell("# Demo"), new_markdown_cell("## Recap")])
    offences = []
    for keys in ((), ("A heading the notebook lacks",)):
        saved = slides.KEY_CELLS.get(97)
        slides.KEY_CELLS[97] = keys
        try:
            slides.key_cells(nb, 97)
        except slides.SlidesError as e:
            offences.append(str(e))
        finally:
            slides.KEY_CELLS.pop(97) if saved is None else slides.KEY_CELLS.__setitem__(97, saved)
    assert len(offences) == 2 and "names 0 headings" in offences[1], offences
    return offences, "course/lessons.py", "give lesson 97's Lesson entry in course/lessons.py key_cells=(...)"


PROOFS = {
    "lesson-forms": _lesson_forms,
    "top-level": _top_level,
    "prediction-literal": _prediction_literal,
    "deterministic": _deterministic,
    "minutes": _minutes,
    "written-out": _written_out,
    "one-exercise-module": _one_exercise_module,
    "distinct-wrong": _distinct_wrong,
    "hint": _hint,
    "own-words": _own_words,
    "doctest-minimum": _doctest_minimum,
    "provenance": _provenance,
    "no-cycles": _no_cycles,
    "private-names": _private_names,
    "layering": _layering,
    "package-index": _package_index,
    "small-pieces": _small_pieces,
    "learner-copy": _learner_copy,
    "solutions-once": _solutions_once,
    "generated-docs": _generated_docs,
    "instructor-notes": _instructor_notes,
    "key-cells": _key_cells,
}


@pytest.mark.parametrize("key", list(RULES))
def test_a_broken_rule_fails_naming_the_rule_the_file_and_the_fix(key, tmp_path, capsys):
    proof = PROOFS[key]  # a rule without a proof fails here
    offences, where, fix = (
        proof(tmp_path, capsys) if key in ("learner-copy", "solutions-once") else proof(tmp_path)
    )
    assert offences, f"{key}: the broken input was not reported"
    message = offences[0]
    assert f'(house rule "{RULES[key].name}")' in message, message
    assert message.startswith(f"{where}: "), message
    assert f". Fix: {fix}" in message and message.endswith("."), message


def test_every_rule_has_a_name_an_enforcing_test_and_a_fix_sentence():
    for key, rule in RULES.items():
        assert rule.name and rule.fix and not rule.fix.endswith("."), key
        assert (ROOT / rule.enforced_by).is_file(), f"{key}: {rule.enforced_by} does not exist"


def test_a_rule_that_holds_reports_nothing(tmp_path):
    """The finders are not merely loud: a correct notebook or module gives no offence."""
    path = _notebook(
        tmp_path,
        "solutions/09_demo.ipynb",
        new_markdown_cell("# Demo\n\nAbout 40-50 minutes."),
        new_code_cell("SCALE = 3\n\ndef triple(x):\n    return SCALE * x"),
    )
    lesson = Lesson(9, "09_demo", "Demo", (40, 50), ("learn",), (), ())
    assert house_notebooks.not_at_top_level(path, ["triple"], root=tmp_path) == []
    assert house_notebooks.minutes_disagree(path, lesson, root=tmp_path) == []
    assert house_notebooks.unstable_outputs(path, root=tmp_path) == []
    assert house_notebooks.predictions_written_down(path, [_prediction(["mul", "add"])], root=tmp_path) == []
    assert (
        house_sources.provenance_offences("aot/demo.py", f"A module.\n\n{PROVENANCE_HEADING} ours.\n") == []
    )
    assert house_sources.too_few_examples("course.autograd.graph", 11, 11) == []
    assert house_sources.notes_offences(Path("docs/instructor-notes/00_warmup.md"), ROOT) == []


# --- the provenance paragraph, over the package ---------------------------------------------


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_heads_its_provenance_paragraph_one_way_once(path):
    """ "What is ours and what is torch's:" once per module that says it; a facade points to the
    module it re-exports."""
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    offences = house_sources.provenance_offences(path.relative_to(PACKAGE).as_posix(), docstring)
    assert offences == [], "\n".join(offences)


def test_the_reference_layer_says_what_is_ours():
    """The rule would hold trivially if every paragraph were deleted: the packages keep theirs."""
    for name in ("__init__.py", "autograd/__init__.py", "aot/__init__.py"):
        assert PROVENANCE_HEADING in ast.get_docstring(ast.parse((PACKAGE / name).read_text())), name


# --- docs/authoring.md walks through the rules --------------------------------------------------


def test_the_authoring_guide_walks_through_every_rule_in_order():
    text = (ROOT / "docs" / "authoring.md").read_text()
    start = text.index("## Adding a lesson, end to end")
    walk = text[start:]
    places = [walk.find(f'"{rule.name}"') for rule in RULES.values()]
    missing = [rule.name for rule, at in zip(RULES.values(), places) if at < 0]
    assert not missing, f"docs/authoring.md does not walk through {missing}"
    assert places == sorted(places), "docs/authoring.md names the rules in another order than RULES"
