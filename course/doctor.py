"""`course doctor [DIR]`: is this environment ready for the course, and what to do if not.

It looks at five things and prints one line each, with the fix under anything wrong::

    [ok  ] torch: 2.13.0, CPU build, is supported (<2.16,>=2.13)
    [FIX ] workspace: autograd-course does not exist
            -> course start autograd-course (or name your folder: course doctor PATH)
    [ok  ] kernel: python3 ran the first code cell of 00_warmup.ipynb and built a widget

- the install: torch in the supported range, CUDA (optional), the widgets extension, the
  lesson notebooks the install carries;
- the learner's folder ``DIR`` (default ``autograd-course``): it exists, it is a course
  folder, every lesson is in it, and no unedited copy is older than the install's;
- a real kernel: the kernel the lessons name (``python3``) starts, runs the first code
  cell of the first lesson (torch and ``course`` imported there) and builds a widget.

So "all good" means a learner can open the first lesson and run it.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    """One line of the doctor's report: what we looked at, what we saw, what to do."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = "ok  " if self.ok else "FIX "
        text = f"[{mark}] {self.name}: {self.detail}"
        if not self.ok and self.fix:
            text += f"\n        -> {self.fix}"
        return text


def check_torch() -> Finding:
    from course._torch_version import SUPPORTED_TORCH, install_hint, torch_supported

    if importlib.util.find_spec("torch") is None:
        return Finding("torch", False, "not installed", install_hint())
    import torch

    if torch_supported():
        return Finding(
            "torch", True, f"{torch.__version__}, {torch_build()} build, is supported ({SUPPORTED_TORCH})"
        )
    return Finding(
        "torch",
        False,
        f"{torch.__version__} ({torch_build()} build) is outside the supported range {SUPPORTED_TORCH}",
        f"{install_hint()} (lessons 6-7 use private AOTAutograd APIs that move between releases)",
    )


def torch_build() -> str:
    """Which build of torch is installed: ``"CPU"`` or ``"CUDA 13.0"`` (its CUDA version).

    A CUDA build runs on a machine without a GPU too; ``check_cuda`` says whether one is there.
    """
    import torch

    return f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"


def check_cuda() -> Finding:
    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return Finding("cuda", True, f"available: {name}")
    # Not a problem: every lesson runs on the CPU. Lesson 04 says what a GPU would show.
    return Finding(
        "cuda",
        True,
        "not available; every lesson runs on the CPU, and lesson 04 labels which figures need a GPU",
    )


def check_widgets_extension() -> Finding:
    """ipywidgets renders in JupyterLab 4 through the jupyterlab_widgets prebuilt extension."""
    if importlib.util.find_spec("ipywidgets") is None:
        return Finding("ipywidgets", False, "not installed", "pip install 'ipywidgets>=8'")
    if importlib.util.find_spec("jupyterlab_widgets") is None:
        return Finding(
            "jupyterlab widgets extension",
            False,
            "jupyterlab_widgets is not installed, so widgets show as text",
            "pip install 'jupyterlab_widgets>=3'",
        )
    try:
        out = subprocess.run(
            [sys.executable, "-m", "jupyter", "labextension", "list"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        listing = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # drop colours
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding(
            "jupyterlab widgets extension", False, f"could not ask jupyter: {exc}", "pip install jupyterlab"
        )
    found = "@jupyter-widgets/jupyterlab-manager" in listing
    if found and "enabled" in listing.split("@jupyter-widgets/jupyterlab-manager", 1)[1][:200]:
        return Finding("jupyterlab widgets extension", True, "@jupyter-widgets/jupyterlab-manager enabled")
    if found:
        return Finding(
            "jupyterlab widgets extension",
            False,
            "installed but disabled",
            "jupyter labextension enable @jupyter-widgets/jupyterlab-manager",
        )
    return Finding(
        "jupyterlab widgets extension",
        False,
        "not found by `jupyter labextension list`",
        "pip install --force-reinstall 'jupyterlab_widgets>=3', then restart JupyterLab",
    )


def check_lessons() -> Finding:
    """The learner notebooks this install carries (in the wheel, or a checkout's notebooks/)."""
    from course.learner import copies, workspace

    try:
        folder = workspace.find_source()
    except workspace.WorkspaceError as exc:
        return Finding("lessons", False, "no lesson notebooks found", str(exc).splitlines()[-1])
    count = len(copies.lesson_files(folder))
    return Finding("lessons", True, f"{count} lesson notebooks in {folder}")


def check_workspace(root: Path) -> list[Finding]:
    """The learner's folder: it exists, is a course folder, holds every lesson, none stale.

    Returns:
        One finding per problem (each with its fix), or one ``ok`` finding.
    """
    from course.learner import workspace

    not_a_folder = _not_a_course_folder(root)
    if not_a_folder:
        return [not_a_folder]
    try:
        where = dict(workspace.locate(root))
    except workspace.WorkspaceError as exc:
        return [Finding("workspace", False, str(exc).splitlines()[0], str(exc).splitlines()[-1])]
    manifest = json.loads((root / workspace.MANIFEST).read_text())["lessons"]
    problems = _missing_lessons(root, manifest) + [
        finding
        for lesson, path in sorted(where.items())
        if (finding := _stale_lesson(root, lesson, path, manifest[lesson])) is not None
    ]
    return problems or [Finding("workspace", True, f"{root}: {len(where)} lessons, none missing or stale")]


def _not_a_course_folder(root: Path) -> Finding | None:
    """A finding when ``root`` is missing, a file, or a folder without the course's manifest."""
    from course.learner import workspace

    q = _quoted(root)
    if not root.exists():
        return Finding(
            "workspace",
            False,
            f"{root} does not exist",
            f"course start {q} (or name your folder: course doctor PATH)",
        )
    if not root.is_dir():
        return Finding(
            "workspace",
            False,
            f"{root} is a file, not a folder",
            "name your course folder: course doctor PATH",
        )
    if not (root / workspace.MANIFEST).is_file():
        has_notebooks = any(root.glob("*.ipynb"))
        return Finding(
            "workspace",
            False,
            f"{root} is not a course folder (no {workspace.MANIFEST})",
            f"course update {q} --adopt (keeps your notebooks)" if has_notebooks else f"course start {q}",
        )
    return None


def _missing_lessons(root: Path, manifest: dict) -> list[Finding]:
    """One finding naming the lessons that the source ``course update`` reads has and the
    folder's manifest does not."""
    from course.learner import workspace
    from course.lessons import LESSONS

    missing = [
        lesson.notebook
        for lesson in LESSONS
        if lesson.notebook not in manifest and workspace.pristine(root, lesson.notebook) is not None
    ]
    if not missing:
        return []
    what = f"{len(missing)} lesson(s) not in {root}: {', '.join(missing)}"
    return [Finding("workspace", False, what, f"course update {_quoted(root)}")]


def _stale_lesson(root: Path, lesson: str, path: Path | None, entry: dict) -> Finding | None:
    """A finding when the lesson was deleted, or is an older version than the course ships
    (edited or not); None when it is the newest version or was retired from the course."""
    from course.learner import workspace

    q = _quoted(root)
    if path is None:
        return Finding(
            "workspace", False, f"{lesson} was deleted from {root}", f"course update {q} --restore {lesson}"
        )
    upstream = workspace.pristine(root, lesson)
    if upstream is None or workspace.cells_hash(upstream) == entry["shipped"]:
        return None  # retired from the course, or the newest version
    if workspace.cells_hash(path) == entry["shipped"]:
        what = f"{path.name} is an older version of the lesson (you have not edited it)"
        return Finding("workspace", False, what, f"course update {q} replaces it")
    if entry.get("offered", {}).get("hash") != workspace.cells_hash(upstream):
        what = f"{path.name} is an older version, edited by you"
        return Finding(
            "workspace", False, what, f"course update {q} keeps yours and saves the new one beside it"
        )
    return None


def _quoted(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


#: What the kernel runs after the lesson's first code cell: an ipywidgets import and a
#: widget built from the course's own Stepper (its comm opens even with no browser attached).
WIDGET_CELL = """\
import sys
import ipywidgets
from course.widgets import Frame, Stepper
stepper = Stepper([Frame(title="doctor", text="one frame")])
print("widget", type(stepper).__name__, "ipywidgets", ipywidgets.__version__, "python", sys.executable)
"""


def first_lesson(root: Path) -> Path | None:
    """The learner's copy of the first lesson in ``root``, else the install's, else None."""
    from course.learner import workspace
    from course.lessons import LESSONS

    name = LESSONS[0].notebook
    try:
        if (root / workspace.MANIFEST).is_file():
            mine = dict(workspace.locate(root)).get(name)
            if mine is not None:
                return mine
        return workspace.find_source() / name
    except workspace.WorkspaceError:
        return None


def check_kernel(notebook: Path | None, timeout: int = 120) -> Finding:
    """Run the first code cell of ``notebook`` and :data:`WIDGET_CELL` in the kernel it names."""
    import nbformat

    if notebook is None or not notebook.is_file():
        return Finding(
            "kernel", False, "no lesson notebook to run", "reinstall the course, then course start"
        )
    nb = nbformat.read(notebook, as_version=4)
    first = next((c for c in nb.cells if c.cell_type == "code"), None)
    kernel = nb.metadata.get("kernelspec", {}).get("name", "python3")
    cells = ([nbformat.v4.new_code_cell(first.source)] if first is not None else []) + [
        nbformat.v4.new_code_cell(WIDGET_CELL)
    ]
    probe = nbformat.v4.new_notebook(cells=cells, metadata=nb.metadata)
    began = time.monotonic()
    try:
        from nbclient import NotebookClient

        client = NotebookClient(
            probe, timeout=timeout, kernel_name=kernel, resources={"metadata": {"path": str(notebook.parent)}}
        )
        # the kernel's own log lines (not the cells' output) would only clutter the report
        client.execute(stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    except Exception as exc:  # a missing kernel, a cell that raised, a timeout: all reported
        return _kernel_failed(kernel, notebook, exc)
    seconds = time.monotonic() - began
    said = "".join(o.get("text", "") for o in probe.cells[-1].outputs)
    python = said.split(" python ", 1)[-1].strip() or "?"
    return Finding(
        "kernel",
        True,
        f"{kernel} ({python}) ran the first code cell of {notebook.name} "
        f"and built a widget in {seconds:.1f} s",
    )


def _kernel_failed(kernel: str, notebook: Path, exc: Exception) -> Finding:
    text = str(exc).strip().splitlines()
    last = next((line for line in reversed(text) if line.strip()), type(exc).__name__)
    register = f"{_quoted(Path(sys.executable))} -m ipykernel install --user --name {kernel}"
    if type(exc).__name__ == "NoSuchKernel":
        return Finding(
            "kernel", False, f"no kernel named {kernel!r} (the one {notebook.name} asks for)", register
        )
    if "ModuleNotFoundError" in last or "No module named" in last:
        return Finding(
            "kernel",
            False,
            f"the {kernel} kernel runs another Python: {last}",
            f"{register} (so the kernel is this environment's Python)",
        )
    if type(exc).__name__ in {"CellTimeoutError", "TimeoutError", "DeadKernelError"}:
        return Finding(
            "kernel",
            False,
            f"the {kernel} kernel did not finish: {last}",
            "close other notebooks (memory), then run course doctor again",
        )
    return Finding(
        "kernel",
        False,
        f"the first cells of {notebook.name} failed in {kernel}: {last}",
        "course update DIR, then course doctor again; if it persists, tell the instructor",
    )


def findings(root: Path | None = None, kernel: bool = True) -> list[Finding]:
    """Every check; ``root`` is the learner's folder (None: the install only)."""
    found = [check_torch(), check_cuda(), check_widgets_extension(), check_lessons()]
    if root is not None:
        found += check_workspace(root)
    if kernel:
        found.append(check_kernel(first_lesson(root or Path("."))))
    return found


def main(argv: list[str] | None = None) -> int:
    import argparse

    from course.learner import workspace

    parser = argparse.ArgumentParser(prog="course doctor", description=__doc__.splitlines()[0])
    parser.add_argument(
        "dir",
        nargs="?",
        default=workspace.DEFAULT_DIR,
        help=f"your course folder (default: {workspace.DEFAULT_DIR})",
    )
    parser.add_argument("--no-kernel", action="store_true", help="skip running the first lesson in a kernel")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    results = findings(Path(args.dir), kernel=not args.no_kernel)
    if args.json:
        print(json.dumps([f.__dict__ for f in results], indent=2))
    else:
        import course

        print(f"course {course.__version__} on Python {sys.version.split()[0]}")
        for f in results:
            print(f.line())
        problems = sum(not f.ok for f in results)
        print("all good" if not problems else f"{problems} problem(s): follow the -> lines above")
    return 0 if all(f.ok for f in results) else 1
