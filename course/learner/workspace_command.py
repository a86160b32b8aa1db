"""The command line of `course start` and `course update`: arguments in, what changed printed.

:func:`main` reads the arguments, calls :func:`course.learner.workspace.start`,
:func:`~course.learner.workspace.update` or :func:`~course.learner.workspace.adopt` (where
every write and every rule of an update lives) and prints the
:class:`~course.learner.workspace.Change` list they return, one line a lesson (its kind, new,
updated, kept, offered, ..., then the lesson), after a line that names the folder.

A :class:`~course.learner.manifest.WorkspaceError` (a read-only folder, a damaged manifest)
becomes one line on stderr that says what to do, and exit status 1; nothing here raises.
:func:`command` says how to type ``course`` in the learner's shell, with the path and how to
activate its environment when that folder is not on ``PATH``.

Example:
    >>> import contextlib, io, tempfile
    >>> with tempfile.TemporaryDirectory() as d, contextlib.redirect_stderr(io.StringIO()) as err:
    ...     main(["update", d, "--source", d])
    1
    >>> err.getvalue().startswith("course update: ")
    True
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from course.learner.manifest import WorkspaceError, load_manifest, shell_quoted
from course.learner.workspace import DEFAULT_DIR, Change, adopt, start, update

__all__ = ["command", "main"]


def command(name: str = "course") -> tuple[str, str]:
    """How to type ``course`` (or ``jupyter``) in a shell, and a note when it needs a path.

    The command lives beside this Python, and that folder is on PATH only while its
    environment is activated; otherwise we name the full path and how to activate.

    Returns:
        ``(what to type, note)``: ``("course", "")`` when it is on PATH.
    """
    bin_dir = Path(sys.executable).parent
    on_path = any(
        Path(p).resolve() == bin_dir.resolve() for p in os.environ.get("PATH", "").split(os.pathsep) if p
    )
    if on_path:
        return name, ""
    activate = bin_dir / "activate"
    how = (
        f"source {shell_quoted(activate)}"
        if activate.is_file()
        else f'export PATH={shell_quoted(bin_dir)}:"$PATH"'
    )
    return shell_quoted(bin_dir / name), (
        f"({bin_dir} is not on your PATH; after `{how}`, plain `course ...` and `jupyter lab ...` work too)"
    )


def main(argv: list[str] | None = None) -> int:
    """``course start [DIR] [--source S]`` / ``course update [DIR] [--source S] [--restore NAME] [--adopt]``."""
    parser = argparse.ArgumentParser(prog="course", description=start.__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    for verb, help_ in (
        ("start", "copy the learner notebooks into a folder you own"),
        ("update", "bring in new lessons without overwriting your work"),
    ):
        p = verbs.add_parser(verb, help=help_, description=help_)
        p.add_argument("dir", nargs="?", default=DEFAULT_DIR, help=f"your folder (default: {DEFAULT_DIR})")
        p.add_argument("--source", help="the folder of lesson notebooks to copy from")
        if verb == "update":
            p.add_argument(
                "--restore",
                action="append",
                default=[],
                metavar="NAME",
                help="bring back a lesson you deleted (repeatable)",
            )
            p.add_argument(
                "--adopt",
                action="store_true",
                help="rebuild a lost or damaged manifest from your notebooks (keeps every edit)",
            )
    args = parser.parse_args(argv)
    root = Path(args.dir)
    try:
        if args.verb == "start":
            changes = start(root, args.source)
            _print_start(root, changes)
            return 0
        if args.adopt:
            changes = adopt(root, args.source)
        else:
            changes = update(root, args.source, args.restore)
        manifest = load_manifest(root)
    except WorkspaceError as exc:
        print(f"course {args.verb}: {exc}", file=sys.stderr)
        return 1
    others = set(manifest["lessons"]) - {c.lesson for c in changes}
    print(f"course update {root} (lessons from {manifest['source']})")
    print("\n".join(c.line() for c in changes) or "  everything is up to date")
    if changes:
        print(f"the other {len(others)} lesson(s) are up to date.")
    return 0


def _print_start(root: Path, changes: list[Change]) -> None:
    adopted = [c for c in changes if c.kind == "adopted"]
    if adopted:
        print(
            f"{root} already held notebooks but no manifest: adopted {len(adopted)} lesson(s), "
            "every edit kept"
        )
        print("\n".join(c.line() for c in changes))
    else:
        print(f"copied {len(changes)} lessons into {root}")
        print("\n".join(f"  {c.lesson}" for c in changes))
    course, note = command()
    print(
        f"They are yours to edit: `{course} update {shell_quoted(root)}` brings in new lessons "
        "and never overwrites your edits."
    )
    print(f"open them in JupyterLab with:\n  {course} lab {shell_quoted(root)}")
    if note:
        print(note)
