"""`course lab [DIR]`: open your copy of the course in JupyterLab, in one command.

The first time, it copies the lessons into DIR (``course start``); after that it brings in
new lessons without touching your edits (``course update``). Then it runs JupyterLab on DIR
with this Python, so the kernel and the widgets extension are the ones `course doctor` checks.
Arguments after ``--`` go to JupyterLab (``course lab -- --no-browser --port 8899``).

Jupyter refuses to run as root unless told; when we are root (a container, a cloud VM),
we pass ``--allow-root`` and say so.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from course.grading import workspace


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
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="course lab", description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", default=workspace.DEFAULT_DIR,
                        help=f"your folder (default: {workspace.DEFAULT_DIR})")
    parser.add_argument("--source", help="the folder of lesson notebooks to copy from")
    args = parser.parse_args(argv)
    root = Path(args.dir)
    verb = "update" if (root / workspace.MANIFEST).exists() else "start"
    rc = workspace.main([verb, str(root)] + (["--source", args.source] if args.source else []))
    if rc:
        return rc
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if is_root:
        print("running as root, so JupyterLab gets --allow-root", file=sys.stderr)
    cmd = jupyter_command(root, extra, is_root=is_root)
    print("+ " + shlex.join(cmd), file=sys.stderr)  # what runs, interpreter included
    sys.stdout.flush()
    os.execv(cmd[0], cmd)  # replaces this process: Ctrl-C stops JupyterLab as usual
    return 0  # pragma: no cover
