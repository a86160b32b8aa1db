"""`course doctor`: is this environment ready for the course, and what to do if not."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from dataclasses import dataclass


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
        return Finding("torch", True, f"{torch.__version__}, {torch_build()} build, is supported ({SUPPORTED_TORCH})")
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
            capture_output=True, text=True, timeout=60,
        )
        listing = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)  # drop colours
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Finding("jupyterlab widgets extension", False, f"could not ask jupyter: {exc}",
                       "pip install jupyterlab")
    found = "@jupyter-widgets/jupyterlab-manager" in listing
    if found and "enabled" in listing.split("@jupyter-widgets/jupyterlab-manager", 1)[1][:200]:
        return Finding("jupyterlab widgets extension", True, "@jupyter-widgets/jupyterlab-manager enabled")
    if found:
        return Finding("jupyterlab widgets extension", False, "installed but disabled",
                       "jupyter labextension enable @jupyter-widgets/jupyterlab-manager")
    return Finding("jupyterlab widgets extension", False, "not found by `jupyter labextension list`",
                   "pip install --force-reinstall 'jupyterlab_widgets>=3', then restart JupyterLab")


def check_lessons() -> Finding:
    """The learner notebooks this install carries (in the wheel, or a checkout's notebooks/)."""
    from course.grading import workspace

    try:
        folder = workspace.find_source()
    except workspace.WorkspaceError as exc:
        return Finding("lessons", False, "no lesson notebooks found", str(exc).splitlines()[-1])
    count = sum(1 for p in folder.iterdir() if workspace.LESSON_RE.match(p.name))
    return Finding("lessons", True, f"{count} lesson notebooks in {folder}")


def findings() -> list[Finding]:
    return [check_torch(), check_cuda(), check_widgets_extension(), check_lessons()]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="course doctor", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    results = findings()
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
