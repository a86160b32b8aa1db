"""Are solution regions correctly replaced, and is notebooks/ what solutions/ generates?"""

import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course import checks
from course.house import assign
from course.house.assign import AssignError, clear_solutions, learner_copy
from course.lessons import check_files

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = assign.lesson_paths(ROOT / "solutions")


def _nb(*cells, kernelspec=True):
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}}
    return new_notebook(cells=list(cells), metadata=meta if kernelspec else {})


def _no_lookup(name):
    return None


def test_the_committed_learner_copies_are_up_to_date(capsys):
    assert assign.main(["--check", "--root", str(ROOT)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_a_lesson_stores_what_the_kernel_reports_of_its_language(solution):
    """Both forms store what ipykernel reports of its language (less its version), which
    JupyterLab writes into a notebook it opens (course/house/assign.py, LANGUAGE_INFO)."""
    for path in (solution, ROOT / "notebooks" / solution.name):
        stored = nbformat.read(path, as_version=4).metadata.get("language_info")
        assert stored == assign.LANGUAGE_INFO, (
            f"{path.relative_to(ROOT)}: language_info is {stored}, not what the kernel reports. "
            f"Fix: course assign --execute {solution.name[:2]} (it stores assign.LANGUAGE_INFO)"
        )


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_is_every_reference_solution_written_once_in_its_notebook(solution):
    """The answer keys take each solution from the copy ``course assign`` makes of the
    notebook's region, and define no second one of their own."""
    import ast
    import importlib

    from course import checks

    lesson = int(solution.name[:2])
    copied = importlib.import_module(f"course.checks.solutions.lesson{lesson:02d}")
    own = {
        n.name: keys.name
        for keys in check_files(lesson)
        for n in ast.parse(keys.read_text()).body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    }
    checks.load_all()
    for ex in checks.all_exercises(lesson):
        assert ex.name not in own, (
            f"{own.get(ex.name)} defines {ex.name} again: import it from {copied.__name__}"
        )
        assert ex.solution is getattr(copied, ex.name), f"{ex.id}: the solution is not the notebook's"


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_every_registered_exercise_has_a_stub_in_its_lesson(solution):
    lesson = int(solution.name[:2])
    text = (ROOT / "notebooks" / solution.name).read_text()
    for ex in checks.all_exercises(lesson):
        raising = f'NotImplementedError(\\"exercise {ex.id}\\")'
        placeholder = f"{ex.name} = ...  # exercise {ex.id}:"
        assert raising in text or placeholder in text, ex.id  # an answer may have several parts
        if ex.kind == "predict":
            assert placeholder in text, ex.id  # a prediction stub never stops "Run All"
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text


def test_a_region_becomes_a_size_hint_and_a_stub_at_its_indentation():
    src = (
        "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    # a comment\n\n"
        "    a = x\n    return a\n    ### END SOLUTION\n"
    )
    out = clear_solutions(src, lambda name: "3.2" if name == "f" else None, where="nb, cell 0")
    assert out == (
        "def f(x):\n    y = 1\n    # YOUR CODE HERE (about 2 lines)\n"
        '    raise NotImplementedError("exercise 3.2")\n'
    )


def test_the_exercise_id_comes_from_the_marker_the_registry_or_the_next_check_call():
    explicit = "### BEGIN SOLUTION 7.3\nx = 1\n### END SOLUTION"
    assert "exercise 7.3" in clear_solutions(explicit, _no_lookup, "nb")
    nb = _nb(
        new_code_cell("### BEGIN SOLUTION\npredicted_a_grad = 8.0\n### END SOLUTION"),  # registered name
        new_code_cell("### BEGIN SOLUTION\nunregistered = 1\n### END SOLUTION"),
        new_code_cell('check("0.9")'),
    )
    out = learner_copy(nb, Path("00_demo.ipynb"))
    assert "predicted_a_grad = ...  # exercise 0.2:" in out.cells[0].source
    assert "unregistered = ...  # exercise 0.9:" in out.cells[1].source


@pytest.mark.parametrize(
    "source, cell_type, problem",
    [
        ("x = 1\n### BEGIN SOLUTION 1.1\ny = 2", "code", "line 2: ### BEGIN SOLUTION is never closed"),
        ("### BEGIN SOLUTION 1.1\n### BEGIN SOLUTION 1.2\n### END SOLUTION", "code", "line 2: nested"),
        ("x = 1\n### END SOLUTION", "code", "line 2: ### END SOLUTION without"),
        (
            "text\n### BEGIN SOLUTION\n### END SOLUTION",
            "markdown",
            "line 2: solution markers belong in code cells",
        ),
        ("### BEGIN SOLUTION\nmystery = 1\n### END SOLUTION", "code", "line 1: cannot tell which exercise"),
    ],
    ids=["unclosed", "nested", "stray-end", "markdown", "no-id"],
)
def test_malformed_markers_fail_naming_notebook_cell_and_line(source, cell_type, problem):
    cell = new_code_cell(source) if cell_type == "code" else new_markdown_cell(source)
    nb = _nb(new_code_cell("import torch"), cell)
    with pytest.raises(AssignError) as e:
        learner_copy(nb, Path("solutions/07_demo.ipynb"))
    assert str(e.value).startswith(f"solutions/07_demo.ipynb, cell 1 ({cell_type}), {problem}")


def test_outputs_are_cleared_unless_kept_and_top_level_stubs_are_tagged():
    shown = new_code_cell(
        "print(1)", execution_count=1, outputs=[nbformat.v4.new_output("stream", text="1\n")]
    )
    kept = new_code_cell(
        "print(2)",
        execution_count=2,
        outputs=[nbformat.v4.new_output("stream", text="2\n")],
        metadata={"tags": ["keep_output"]},
    )
    stub_top = new_code_cell("### BEGIN SOLUTION 9.1\nx = 1\n### END SOLUTION")
    stub_def = new_code_cell("def f():\n    ### BEGIN SOLUTION 9.2\n    return 1\n    ### END SOLUTION")
    top_def = new_code_cell("### BEGIN SOLUTION 9.3\ndef g():\n    return 1\n### END SOLUTION")
    out = learner_copy(_nb(shown, kept, stub_top, stub_def, top_def, kernelspec=False), Path("09_x.ipynb"))
    assert out.cells[0].outputs == [] and out.cells[0].execution_count is None
    assert out.cells[1].outputs[0].text == "2\n" and out.cells[1].execution_count == 2
    assert "tags" not in out.cells[2].metadata  # x = ... runs: "Run All" goes on
    assert "tags" not in out.cells[3].metadata  # defining f does not raise; calling it does
    assert out.cells[4].metadata["tags"] == ["raises-exception"]  # a top-level def keeps the raise
    assert 'raise NotImplementedError("exercise 9.3")' in out.cells[4].source
    assert out.metadata["kernelspec"] == {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }


def test_the_solution_notebook_is_left_untouched_in_memory():
    nb = _nb(new_code_cell("### BEGIN SOLUTION 9.1\nx = 1\n### END SOLUTION"))
    learner_copy(nb, Path("09_x.ipynb"))
    assert "BEGIN SOLUTION" in nb.cells[0].source


def test_check_mode_reports_a_stale_learner_copy(tmp_path, capsys):
    (tmp_path / "solutions").mkdir()
    shutil.copy(SOLUTIONS[0], tmp_path / "solutions" / SOLUTIONS[0].name)
    assert assign.main(["--check", "--root", str(tmp_path)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert assign.main(["--root", str(tmp_path)]) == 0
    assert assign.main(["--check", "--root", str(tmp_path)]) == 0
    generated = tmp_path / "notebooks" / SOLUTIONS[0].name
    assert generated.read_text() == (ROOT / "notebooks" / SOLUTIONS[0].name).read_text()


def test_check_mode_with_a_lesson_filter_judges_only_those_lessons(tmp_path, capsys):
    (tmp_path / "solutions").mkdir()
    for src in SOLUTIONS[:2]:
        shutil.copy(src, tmp_path / "solutions" / src.name)
    assert assign.main(["--root", str(tmp_path)]) == 0
    (tmp_path / "notebooks" / "99_orphan.ipynb").write_text("{}")
    prefix = SOLUTIONS[0].name[:2]
    assert assign.main(["--check", "--root", str(tmp_path), prefix]) == 0
    assert "no solution" not in capsys.readouterr().err
    assert assign.main(["--check", "--root", str(tmp_path)]) == 1  # unfiltered, the orphan counts
    assert "no solution for" in capsys.readouterr().err


def test_a_region_in_a_nested_function_belongs_to_the_registered_name_around_it():
    src = (
        "class SaveOnCPU:\n    def __init__(self):\n        def pack(t):\n"
        "            ### BEGIN SOLUTION\n            return t.cpu()\n            ### END SOLUTION\n"
    )
    seen = []

    def lookup(name):
        seen.append(name)
        return "4.1" if name == "SaveOnCPU" else None

    out = clear_solutions(src, lookup, "nb")
    assert seen == ["pack", "__init__", "SaveOnCPU"]
    assert '            raise NotImplementedError("exercise 4.1")' in out


def test_a_top_level_region_names_what_the_learner_must_define():
    src = "### BEGIN SOLUTION\npredicted_a_grad = 8.0\n### END SOLUTION\ncheck('0.2')"
    out = clear_solutions(src, lambda name: "0.2" if name == "predicted_a_grad" else None, "nb")
    assert out.splitlines()[0] == "# YOUR CODE HERE (about 1 line; define predicted_a_grad)"
    assert out.splitlines()[1] == "predicted_a_grad = ...  # exercise 0.2: write your answer in place of ..."
    namespace = {}
    exec(out.replace("check('0.2')", ""), namespace)  # the stub runs, and holds the placeholder
    assert namespace["predicted_a_grad"] is checks.PLACEHOLDER
    nested = clear_solutions(
        "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n", lambda name: "0.1", "nb"
    )
    assert "define" not in nested  # inside a def, the def's own line already names it


def test_a_solution_reading_a_package_gets_its_plain_import_not_a_submodules():
    """``import torch`` then ``import torch._functorch.aot_autograd`` both bind ``torch``: the
    copied module imports what the solution reads, ``import torch``, whichever came last."""
    from course.house.solutions import solution_statements

    solution = "def f(x):\n    ### BEGIN SOLUTION\n    return torch.mul(x, 2)\n    ### END SOLUTION"
    for imports in ("import torch\nimport torch.fx.passes", "import torch.fx.passes\nimport torch"):
        module = solution_statements([imports, solution], where="demo.ipynb")
        assert module.splitlines()[0] == "import torch", module
    alone = solution_statements(["import torch.fx.passes", solution], where="demo.ipynb")
    assert alone.splitlines()[0] == "import torch.fx.passes"  # it binds torch too: still runs
