"""Notebook validation inside the plain ``python -m pytest`` run (nbval, two modes at once).

nbval offers ``--nbval`` (run every cell, compare every output with the stored one) and
``--nbval-lax`` (run every cell, compare only cells marked to be compared), one mode per
pytest run. The course needs both in ONE run, so this conftest collects the notebooks
itself, with nbval's own collector, choosing the mode by folder:

- ``solutions/*.ipynb``: strict. Outputs are stored there and must come out the same,
  after the substitutions of ``nbval_sanitize.cfg`` (addresses, timings, paths).
- ``notebooks/*.ipynb``: lax. The learner copies have no outputs to compare; they must run
  top to bottom. Their stubs raise ``NotImplementedError`` only in cells tagged
  ``raises-exception`` (``course assign`` adds the tag), which nbval accepts.

Kernels are ipykernel in the running Python (nbval's ``--nbval-current-env``), never some
``python3`` kernelspec found elsewhere. With pytest-xdist (``-n auto``, the README's
command), a scheduler of ours keeps each notebook's cells together (they share a kernel and
must run on one worker, in order), keeps together the tests of a module that has a
module-scoped fixture (it would otherwise be built once per worker: grading every lesson,
say), and hands every other test out on its own, so one long test module cannot leave a
core idle.
Fixture notebooks under ``tests/data`` are never collected as notebooks. Every notebook cell
carries the ``notebook`` marker (``-m "not notebook"`` skips them).

Lesson markers come from the lesson registry (``course.lessons``), never typed by hand: one
``lessonNN`` marker per lesson, given to that lesson's notebooks (``solutions/NN_*.ipynb``,
``notebooks/NN_*.ipynb``) and to its own test file (``tests/test_lessonNN.py``), so
``pytest -m lesson03`` selects all of lesson 3. A module that tests the reference code a lesson
reads (``tests/test_hooks.py``, say) names its lesson with ``pytestmark`` as well.

Passing ``--nbval`` or ``--nbval-lax`` yourself hands collection back to nbval (one mode
for everything), with the sanitizer still applied.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

try:  # Hypothesis: no test may fail because a busy machine is slow (deadlines, slow draws)
    from hypothesis import HealthCheck, settings

    settings.register_profile("course", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("course")
except ImportError:  # the plain install has no Hypothesis; its tests are not collected then
    pass
SANITIZE = ROOT / "nbval_sanitize.cfg"
STRICT_DIRS = (ROOT / "solutions",)
LAX_DIRS = (ROOT / "notebooks",)
#: Markers whose tests run only when ``-m`` names them: minutes of machinery that CI runs as
#: steps of their own (.ci/run), left out of the README's test command.
OPT_IN = ("stress", "guides", "e2e")
#: What carries ``e2e`` (given here, from the path, never typed in a test): the learner copies'
#: Run All (lax nbval of notebooks/, the cells strict nbval runs on solutions/ in the default run,
#: with stubs) and the slow tests of the machinery that runs whole commands end to end (the
#: grader and its catalogue run, the classroom's commands, the learner's folder, the wheel, the
#: hub). They prove machinery, not the lessons, and take most of the suite's minutes.
E2E_FOLDERS = ("notebooks/",)
E2E_SLOW_MODULES = re.compile(
    r"tests/test_(grading\w*|catalogue_grade|gradebook|homework|room|credit|hub|wheel|cli|doctor|progress|workspace)\.py$"
)


def is_end_to_end(path: str, slow: bool) -> bool:
    """Whether the test at ``path`` (its node id's file part) carries the ``e2e`` marker.

    >>> is_end_to_end("notebooks/03_saved_tensors.ipynb", slow=False)
    True
    >>> is_end_to_end("tests/test_gradebook.py", slow=True), is_end_to_end("tests/test_gradebook.py", slow=False)
    (True, False)
    >>> is_end_to_end("tests/test_mutants.py", slow=True)  # judges the checks, not machinery
    False
    """
    return path.startswith(E2E_FOLDERS) or (slow and bool(E2E_SLOW_MODULES.match(path)))


def _nbval_flag(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "nbval", False) or getattr(config.option, "nbval_lax", False))


def lesson_markers() -> dict[str, str]:
    """``{"lesson03": "Saved tensors", ...}``: one marker per lesson of the registry."""
    from course.lessons import LESSONS  # torch-free

    return {f"lesson{lesson.number:02d}": lesson.title for lesson in LESSONS}


def lesson_of_path(path: str) -> str | None:
    """The lesson marker a collected path belongs to, from its file name alone."""
    name = path.rsplit("/", 1)[-1]
    found = re.fullmatch(r"test_lesson(\d\d)\.py", name) or re.fullmatch(r"(\d\d)_\w+\.ipynb", name)
    return f"lesson{found.group(1)}" if found else None


def pytest_configure(config: pytest.Config) -> None:
    for marker, title in lesson_markers().items():
        config.addinivalue_line("markers", f"{marker}: lesson {marker[-2:]}, {title.lower()}")
    opt = config.option
    if hasattr(opt, "nbval_sanitize_with") and not opt.nbval_sanitize_with:
        opt.nbval_sanitize_with = str(SANITIZE)
    if hasattr(opt, "nbval_current_env") and not getattr(opt, "nbval_kernel_name", None):
        opt.nbval_current_env = True


def _modules_with_shared_fixtures() -> set[str]:
    shared = re.compile(r"@pytest\.fixture\([^)]*scope=[\"']module")
    return {f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*.py") if shared.search(p.read_text())}


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``-n N``: notebooks as units, every other test on its own (see the module docstring)."""
    if getattr(config.option, "dist", "no") != "load":
        return None  # an explicit --dist keeps xdist's own scheduler
    from xdist.scheduler import LoadScopeScheduling

    together = _modules_with_shared_fixtures()
    # Our collection order (longest work first, see pytest_collection_modifyitems) is the
    # order units are handed out; xdist's reordering (biggest unit first) would undo it.
    config.option.loadscopereorder = False

    class NotebooksTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") or path in together else nodeid

    return NotebooksTogether(config, log)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if ".ipynb_checkpoints" in collection_path.parts:
        return True
    if collection_path.suffix == ".ipynb" and (ROOT / "tests") in collection_path.parents:
        return True  # fixtures for the grader and the browser test, not lessons
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if file_path.suffix != ".ipynb" or _nbval_flag(parent.config):
        return None
    strict = any(d in file_path.parents for d in STRICT_DIRS)
    if not strict and not any(d in file_path.parents for d in LAX_DIRS):
        return None
    from nbval.plugin import IPyNbFile

    notebook = IPyNbFile.from_parent(parent, path=file_path)
    notebook.compare_outputs = strict  # nbval reads this per file when it collects the cells
    return notebook


def _work_rank(item: pytest.Item, together: set[str]) -> int:
    """0: long work (a ``slow`` test, a module sharing a costly fixture); 1: a notebook; 2: the rest.

    Handing the long work out first lets the many short tests fill the workers' gaps at the end
    (longest-first scheduling); otherwise a 40 s test drawn last leaves a core idle for 40 s.
    A notebook, and a module sharing a fixture, keep one rank for all their items, so they stay
    one contiguous run on their worker.
    """
    path = item.nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        return 1
    if path in together or item.get_closest_marker("slow") is not None:
        return 0
    return 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # an item of another opt-in marker (stress, guides) stays in its own step
        other = any(item.get_closest_marker(marker) for marker in OPT_IN if marker != "e2e")
        if not other and is_end_to_end(
            item.nodeid.split("::", 1)[0], item.get_closest_marker("slow") is not None
        ):
            item.add_marker(pytest.mark.e2e)
    for marker in OPT_IN:  # opt-in: `-m stress`, `-m guides`, `-m e2e` (CI runs each as a step)
        if marker not in (config.option.markexpr or ""):
            left_out = [item for item in items if item.get_closest_marker(marker)]
            if left_out:
                config.hook.pytest_deselected(items=left_out)
                items[:] = [item for item in items if not item.get_closest_marker(marker)]
    known = lesson_markers()
    for item in items:
        if type(item).__name__ == "IPyNbCell":
            item.add_marker(pytest.mark.notebook)
        marker = lesson_of_path(item.nodeid.split("::", 1)[0])
        if marker in known and item.get_closest_marker(marker) is None:
            item.add_marker(getattr(pytest.mark, marker))
    if hasattr(config, "workerinput"):  # an xdist worker: hand the longest work out first
        together = _modules_with_shared_fixtures()
        items.sort(key=lambda item: _work_rank(item, together))  # stable: each file keeps its order
