"""How much one sandbox may take: memory, processes, file size; and whose processes they are.

Three means, the strongest the machine offers first (:func:`prepare`)::

    limits = Limits(memory_bytes=4 << 30, processes=512)
    holder = prepare(limits)        # a cgroup (v2, else v1) when we may make one: root on Linux
    holder.describe()               # "cgroup v1: memory 4096 MiB, 512 processes"
    preexec = holder.preexec        # joins the cgroup, sets the rlimits, in the child before exec
    ...
    holder.close()                  # ends what is left in the cgroup and removes it

- **a cgroup** (root, with a writable cgroup file system): ``memory.max`` and ``pids.max``
  bind every process of the sandbox together, whatever its uid;
- **rlimits** always: ``RLIMIT_NPROC`` (it binds a uid that is not root: as root the sandbox
  runs its learner code under a uid of its own, :func:`sandbox_uid`, so one learner's fork
  bomb never counts against a classmate's), ``RLIMIT_FSIZE``, no core dumps; and, where
  there is no cgroup, ``RLIMIT_AS`` per process (torch on the CPU peaks near 0.7 GiB).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupHolder", "Limits", "prepare", "sandbox_uid"]

_CGROUP = Path("/sys/fs/cgroup")
_UIDS = itertools.count()


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use (memory and processes of all its processes together)."""

    memory_bytes: int = 4 << 30
    processes: int = 512
    tmp_bytes: int = 256 << 20  # each of /tmp, /dev/shm and the working folder
    file_bytes: int = 1 << 30


def sandbox_uid() -> int:
    """A uid of its own for each sandbox this process starts (root only uses it): no user has
    it, and no two sandboxes of one grader share it (their process limits stay apart)."""
    return 3_000_000 + (os.getpid() % 50_000) * 64 + next(_UIDS) % 64


class CgroupHolder:
    """A cgroup made for one sandbox (``paths`` empty: none could be made), and the rlimits."""

    def __init__(self, limits: Limits, paths: list[Path], version: str):
        self.limits, self.paths, self.version = limits, paths, version
        # RLIMIT_NPROC counts every process of the uid: as root the sandbox has a uid of its
        # own; otherwise it shares ours, so the limit is what we run now plus the sandbox's.
        self.nproc = limits.processes if os.geteuid() == 0 else limits.processes + _own_processes()

    def describe(self) -> str:
        mib = self.limits.memory_bytes >> 20
        if self.paths:
            return f"cgroup {self.version}: memory {mib} MiB, {self.limits.processes} processes"
        return f"rlimits: {mib} MiB per process, {self.limits.processes} processes"

    def preexec(self) -> None:
        """In the child, before exec: join the cgroup, set the rlimits (inherited by bwrap and,
        through it, by every process of the sandbox)."""
        import resource

        joined = bool(self.paths)
        for path in self.paths:
            try:
                with open(path / "cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))
            except OSError:  # a cgroup we may make but not join: the rlimits below bound memory
                joined = False
        n, size = self.nproc, self.limits.file_bytes
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if not joined:
            memory = self.limits.memory_bytes
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    def close(self) -> None:
        """End every process left in the cgroup, then remove it."""
        for path in self.paths:
            for _ in range(100):
                try:
                    pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.02)
            with contextlib.suppress(OSError):
                path.rmdir()


def _own_processes() -> int:
    import psutil

    uid, count = os.getuid(), 0  # RLIMIT_NPROC counts threads
    for p in psutil.process_iter(["uids", "num_threads"]):
        if p.info["uids"] and p.info["uids"].real == uid:
            count += p.info["num_threads"] or 1
    return count


def _v2(name: str, limits: Limits) -> list[Path]:
    controllers = (_CGROUP / "cgroup.subtree_control").read_text().split()
    if not {"memory", "pids"} <= set(controllers):
        return []
    path = _CGROUP / name
    path.mkdir()
    try:
        (path / "memory.max").write_text(str(limits.memory_bytes))
        (path / "pids.max").write_text(str(limits.processes))
    except OSError:
        path.rmdir()
        raise
    with contextlib.suppress(OSError):
        (path / "memory.swap.max").write_text("0")
    return [path]


def _v1(name: str, limits: Limits) -> list[Path]:
    made = []
    try:
        for controller, file, value in (
            ("memory", "memory.limit_in_bytes", limits.memory_bytes),
            ("pids", "pids.max", limits.processes),
        ):
            path = _CGROUP / controller / name
            path.mkdir()
            made.append(path)
            (path / file).write_text(str(value))
    except OSError:
        for path in made:
            with contextlib.suppress(OSError):
                path.rmdir()
        raise
    return made


def prepare(limits: Limits) -> CgroupHolder:
    """A cgroup for one sandbox where this process may make one (v2 with the memory and pids
    controllers, else v1's memory and pids hierarchies); rlimits alone otherwise."""
    if os.geteuid() == 0 and _CGROUP.is_dir():
        name = f"course-sandbox-{secrets.token_hex(6)}"
        for version, make in (("v2", _v2), ("v1", _v1)):
            try:
                paths = make(name, limits)
            except OSError:
                continue
            if paths:
                return CgroupHolder(limits, paths, version)
    return CgroupHolder(limits, [], "")
