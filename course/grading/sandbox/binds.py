"""What learner code sees in the sandbox: an allow-list of read-only binds, nothing else of the host.

NOTE [An allow-list, not a deny-list]
The sandbox's root is an empty tmpfs; only these are bound in, read-only, at their own paths:

1. the system's programs and libraries: ``/usr`` (and ``/lib``, ``/lib64``, ``/bin``,
   ``/sbin`` as they are: links into ``/usr`` or folders), and from ``/etc`` only what the
   dynamic loader and the clock read (``ld.so.cache``, ``ld.so.conf*``, ``localtime``,
   ``alternatives``);
2. the grader's Python: ``sys.prefix`` and ``sys.base_prefix`` (the venv and the standard
   library), the executable as named and as its link resolves, and every site-packages
   folder on ``sys.path`` outside them (a ``.pth`` or ``--system-site-packages`` adds one);
3. the ``course`` package (its own folder, not the checkout around it);
4. the private copy of the notebooks, at ``/run/sandbox/in``.

Everything else is absent: the home folder, the key file wherever it lives, the roster,
classmates' copies and reports (whatever ``TMPDIR`` is), socket folders (``/run``, ``/tmp``
and ``/dev/shm`` are the sandbox's own size-capped tmpfs), ``/etc/shadow``::

    allowed_paths()    # ['/root/.pyenv/versions/3.11.7', '/work/course/.venv', '/work/course/course']
    # OK:  /work/course/course/grading/grade.py        (the package)
    # BAD: /work/course/roster/ada/00_warmup.ipynb      (beside the package: not bound)

A folder bwrap makes to hold a bind is made ``0755`` (bwrap run as root makes them ``0700``,
which the sandbox's unprivileged uid could not cross).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["SANDBOX_DIR", "allowed_paths", "mount_args"]

SANDBOX_DIR = "/run/sandbox"  # the working folder; the notebooks are in SANDBOX_DIR/in
_SYSTEM = ("/usr",)
_SYSTEM_LINKS = ("/lib", "/lib64", "/lib32", "/bin", "/sbin")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _course_package() -> str:
    import course

    return str(Path(course.__file__).resolve().parent)


def allowed_paths() -> list[str]:
    """The grader's Python and the course package (NOTE [An allow-list, not a deny-list],
    items 2 and 3), as named and resolved; none inside another, none of the system's."""
    prefixes = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    site = [
        p
        for p in sys.path
        if os.path.isabs(p) and os.path.isdir(p) and Path(p).name in ("site-packages", "dist-packages")
    ]
    paths: set[str] = set()
    for p in (*prefixes, sys.executable, *site, _course_package()):
        paths |= {os.path.abspath(p), os.path.realpath(p)}
    paths = {p for p in paths if os.path.exists(p) and not any(_inside(p, s) for s in _SYSTEM)}
    return sorted(p for p in paths if not any(q != p and _inside(p, q) for q in paths))


def mount_args(inputs: Path, tmp_bytes: int) -> list[str]:
    """bubblewrap's mount arguments: the empty root's tmpfs folders, then the allow-list,
    parents before children, every folder made to hold a bind readable (``0755``)."""
    out: list[str] = []
    for path in _SYSTEM:
        out += ["--ro-bind", path, path]
    for path in _SYSTEM_LINKS:
        if os.path.islink(path):
            out += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            out += ["--ro-bind", path, path]
    out += ["--proc", "/proc", "--dev", "/dev", "--perms", "0755", "--dir", "/etc"]
    for path in _ETC:
        if os.path.exists(path):
            out += ["--ro-bind", path, path]
    for where in ("/tmp", "/dev/shm", "/run", SANDBOX_DIR):
        perms = {"/run": "0755", SANDBOX_DIR: "0777"}.get(where, "1777")  # 0777: a secret is unlinked
        out += ["--size", str(tmp_bytes), "--perms", perms, "--tmpfs", where]
    made = {"/", "/etc", "/tmp", "/dev", "/dev/shm", "/run", SANDBOX_DIR}
    for path in allowed_paths():
        for parent in reversed(Path(path).parents):
            if str(parent) not in made and not any(_inside(str(parent), s) for s in _SYSTEM):
                out += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        out += ["--ro-bind", os.path.realpath(path), path]
    return out + ["--ro-bind", str(inputs), f"{SANDBOX_DIR}/in"]
