"""`course hub-start [DIR]`: the server-start hook of a JupyterHub whose homes are persistent.

On a Zero-to-JupyterHub deployment each learner's home is a persistent volume mounted over
the image's ``/home/jovyan``: whatever the image put in its home is hidden, and the home
keeps the learner's work from one server start to the next. So the course lives in the
image's Python (``pip install`` of the wheel, outside any home), and this hook, run at every
server start (``singleuser.lifecycleHooks.postStart``), brings the lessons into the home::

    $ course hub-start                  # first start: ~/autograd-course is made
    course hub-start: started /home/jovyan/autograd-course (10 new)
    $ course hub-start                  # a later start, on a newer image
    course hub-start: updated /home/jovyan/autograd-course (1 updated, 1 offered)

The first start is ``course start``; every later one is ``course update`` (an edited
notebook is never overwritten: the new version is saved beside it). The lessons come from
the installed package, so a home never holds ``solutions/``. Each run appends what it did
to ``DIR/.course/hub-start.log``.

NOTE [A start hook never fails]
    Kubernetes kills a container whose postStart hook exits non-zero, so a learner whose
    folder cannot be updated (a full volume, a damaged manifest) would get no server at
    all. The hook therefore always exits 0; what went wrong is printed and logged, with
    the fix, and ``course doctor`` reports it in the learner's terminal.

Differences from nbgitpuller (the usual hub recipe): nbgitpuller merges a git repository
into the home with git's rules; we copy the installed release's learner notebooks, lesson
by lesson, with ``course update``'s rules, and need no network at start.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections import Counter
from pathlib import Path

from course.learner import workspace

__all__ = ["default_dir", "main", "sync"]


def default_dir() -> Path:
    """``~/autograd-course`` in the home the server runs with (the persistent volume)."""
    return Path.home() / workspace.DEFAULT_DIR


def sync(root: Path) -> str:
    """Start ``root`` the first time, update it after; return one line saying what happened.

    Raises:
        workspace.WorkspaceError: as ``course start`` / ``course update`` (the message says
            what to do).
    """
    if (root / workspace.MANIFEST).is_file():
        verb, changes = "updated", workspace.update(root)
    else:
        verb, changes = "started", workspace.start(root)
    counts = Counter(change.kind for change in changes)
    said = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "everything up to date"
    offered = [change.detail for change in changes if change.kind == "offered"]
    return f"{verb} {root} ({said})" + "".join(f"\n  {detail}" for detail in offered)


def _log(root: Path, text: str) -> None:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    try:
        log = root / workspace.MANIFEST.parent / "hub-start.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as f:
            f.write(f"{stamp} {' | '.join(line.strip() for line in text.splitlines())}\n")  # one line a start
    except OSError:
        pass  # a read-only or full volume: the message on stderr is all we can leave


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course hub-start", description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", help="the course folder (default: ~/autograd-course)")
    args = parser.parse_args(argv)
    root = Path(args.dir).expanduser() if args.dir else default_dir()
    try:
        said = sync(root)
    except Exception as exc:  # NOTE [A start hook never fails]
        said = (
            f"could not bring the lessons into {root}: {exc}\n"
            f"The server starts anyway; in its terminal, `course doctor {root}` says what to do."
        )
        print(f"course hub-start: {said}", file=sys.stderr)
        _log(root, said)
        return 0
    print(f"course hub-start: {said}")
    _log(root, said)
    return 0
