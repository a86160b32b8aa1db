"""`course lab [DIR]`: open your copy of the course in JupyterLab, in one command.

The first time, it copies the lessons into DIR (``course start``); after that it brings in
new lessons without touching your edits (``course update``). Then it runs JupyterLab on DIR
with this Python, so the kernel and the widgets extension are the ones `course doctor` checks.
Arguments after ``--`` go to JupyterLab (``course lab -- --no-browser --port 8899``).

Jupyter refuses to run as root unless told; when we are root (a container, a cloud VM),
we pass ``--allow-root`` and say so.

JupyterLab 4 opens by asking "get notified about official Jupyter news?" and leaves the
question on screen until it is answered. A course needs no news feed, so ``course lab`` gives
that setting the default "no" for the JupyterLab it starts (:data:`NO_NEWS`, in the course
folder's ``.course/jupyter/``); a learner who wants the news turns it on in Settings, and their
choice wins over ours.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from course.grading.files import write_atomically
from course.learner import workspace, workspace_command

# NOTE [Turning off the news question]
#   1. The question is JupyterLab's announcements plugin asking for the setting `fetchNews` of
#      `@jupyterlab/apputils-extension:notification`: it asks while the value is "none" (the
#      default), and "false" means no news and no question.
#   2. A setting's default can be changed without touching the learner's own settings: the
#      settings server merges `labconfig/default_setting_overrides.json` from every folder on
#      Jupyter's config path into the defaults (jupyterlab_server/settings_utils.py,
#      `_get_overrides`). Settings the learner saves still override those defaults.
#   3. So we write that file in the course folder and put its folder on JUPYTER_CONFIG_PATH
#      for the JupyterLab we start: nothing outside the course folder changes, and the
#      learner's own config folder (~/.jupyter), which Jupyter reads first, still wins.
#   Not by `--LabApp.news_url=None`: that stops the fetching, not the question.
NO_NEWS = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false"}}
LAB_CONFIG = Path(".course") / "jupyter"  # in the course folder: Jupyter config of our own


def write_lab_config(root: Path) -> Path:
    """Write the course's JupyterLab defaults (:data:`NO_NEWS`) under ``root`` and return the
    config folder to put on JUPYTER_CONFIG_PATH.

    Example:
        >>> import tempfile
        >>> folder = write_lab_config(Path(tempfile.mkdtemp()))
        >>> folder.relative_to(folder.parents[1]).as_posix()
        '.course/jupyter'
        >>> json.loads((folder / "labconfig" / "default_setting_overrides.json").read_text()) == NO_NEWS
        True
    """
    folder = (root / LAB_CONFIG).resolve()
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    write_atomically(
        folder / "labconfig" / "default_setting_overrides.json", json.dumps(NO_NEWS, indent=2) + "\n"
    )
    return folder


def lab_environment(config: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with ``config`` put first on JUPYTER_CONFIG_PATH (the folders Jupyter reads
    after the user's own), the folders already there kept after it.

    Example:
        >>> lab_environment(Path("/c"), {"JUPYTER_CONFIG_PATH": "/etc/site"})["JUPYTER_CONFIG_PATH"].split(os.pathsep)
        ['/c', '/etc/site']
        >>> lab_environment(Path("/c"), {})["JUPYTER_CONFIG_PATH"]
        '/c'
    """
    path = [str(config), *filter(None, environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep))]
    return {**environ, "JUPYTER_CONFIG_PATH": os.pathsep.join(path)}


def jupyter_command(root: Path, extra: list[str], *, is_root: bool) -> list[str]:
    """The command that opens ``root`` in JupyterLab with this Python.

    Example:
        >>> jupyter_command(Path("autograd-course"), ["--no-browser"], is_root=False)[1:]
        ['-m', 'jupyter', 'lab', 'autograd-course', '--no-browser']
    """
    cmd = [sys.executable, "-m", "jupyter", "lab", str(root), *extra]
    return cmd + ["--allow-root"] if is_root and "--allow-root" not in extra else cmd


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="course lab", description=__doc__.splitlines()[0])
    parser.add_argument(
        "dir",
        nargs="?",
        default=workspace.DEFAULT_DIR,
        help=f"your folder (default: {workspace.DEFAULT_DIR})",
    )
    parser.add_argument("--source", help="the folder of lesson notebooks to copy from")
    args = parser.parse_args(argv)
    root = Path(args.dir)
    verb = "update" if (root / workspace.MANIFEST).exists() else "start"
    rc = workspace_command.main([verb, str(root)] + (["--source", args.source] if args.source else []))
    if rc:
        return rc
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if is_root:
        print("running as root, so JupyterLab gets --allow-root", file=sys.stderr)
    cmd = jupyter_command(root, extra, is_root=is_root)
    os.environ.update(lab_environment(write_lab_config(root), os.environ))  # execv passes it on
    print(
        f"+ JUPYTER_CONFIG_PATH={shlex.quote(os.environ['JUPYTER_CONFIG_PATH'])} {shlex.join(cmd)}",
        file=sys.stderr,
    )  # what runs, interpreter and the course's Jupyter defaults included
    sys.stdout.flush()
    os.execv(cmd[0], cmd)  # replaces this process: Ctrl-C stops JupyterLab as usual
    return 0  # pragma: no cover
