"""Every process learner code starts, found and ended before a report is written (psutil).

The grader becomes a *child subreaper* (Linux): a process that learner code starts and
detaches (a double fork, ``start_new_session=True``) is then adopted by the grader instead of
init, so it stays among the grader's descendants, where :func:`descendants` finds it::

    become_subreaper()          # True on Linux; False elsewhere (detached processes escape)
    keep = set(descendants())   # what ran before grading is not ours to end
    ...                         # learner code runs, forks, detaches, hops PIDs
    end_processes(keep)         # ["pid 4242: python -c ...", ...]; nothing of theirs is left

The process table comes from psutil, so this works where there is no ``/proc`` (macOS,
Windows); only the subreaper is Linux's alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

import psutil

__all__ = ["become_subreaper", "command_seconds", "descendants", "end_processes"]

_PR_SET_CHILD_SUBREAPER = 36
_GONE = (
    psutil.NoSuchProcess,
    psutil.AccessDenied,
    psutil.ZombieProcess,
    ProcessLookupError,
    PermissionError,
    OSError,
)


def become_subreaper() -> bool:
    """Make this process adopt every orphaned descendant (Linux ``prctl``); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(pid: int | None = None) -> list[int]:
    """Every living (not zombie) process below ``pid`` (default: this process)."""
    try:
        children = psutil.Process(os.getpid() if pid is None else pid).children(recursive=True)
    except _GONE:
        return []
    found = []
    for child in children:
        with contextlib.suppress(*_GONE):
            if child.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                found.append(child.pid)
    return sorted(found)


def _describe(pid: int) -> str:
    """The command line of ``pid``, printable characters only (learner code chose it)."""
    try:
        text = " ".join(psutil.Process(pid).cmdline())
    except _GONE:
        return "?"
    return "".join(c for c in text if c.isprintable())[:120] or "?"


def end_processes(keep: set[int] = frozenset()) -> list[str]:
    """Kill every descendant of this process except ``keep`` (and theirs), and reap them.

    First every one is stopped, round after round until three rounds running find no process
    that is not stopped yet: a stopped process cannot fork, so a process that keeps forking
    under new PIDs is caught. Reading the whole process table takes longer than a hop on a
    busy machine, so rounds read the PIDs they have not seen first (see :func:`_stop_and_kill`);
    and each hop leaves the PID it left as our zombie, so a round that reaps a zombie we did
    not stop is not quiet either. Then all are killed, and we wait until they are gone. The
    whole pass is repeated until one finds nothing left (within 30 s).
    Returns one line per process killed (``"pid 123: python -c ..."``), for the report.
    """
    deadline = time.monotonic() + 30
    killed: list[str] = []
    while True:
        found = _stop_and_kill(keep, deadline)
        killed += found
        if not found or time.monotonic() > deadline:
            return list(dict.fromkeys(killed))


def _read_parent(pid: int) -> tuple[int, bool] | None:
    """``(parent PID, is a zombie)`` of ``pid``, or None when it is gone (one read)."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return proc.ppid(), proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except _GONE:
        return None


def _owner(pid: int, parents: dict[int, int], keep: set[int]) -> bool | None:
    """Whether ``pid`` is below this process and not below ``keep``, following ``parents``;
    None when the line of its ancestors breaks at a process that was not read."""
    me = os.getpid()
    if pid == me:
        return False  # not below itself
    seen = set()
    while pid not in seen:
        seen.add(pid)
        if pid in keep:
            return False
        if pid == me:
            return True
        if pid not in parents:
            return None if pid > 1 else False
        pid = parents[pid]
    return False  # a loop: PIDs reused while we read


def _stop_and_kill(keep: set[int], deadline: float) -> list[str]:
    """One pass of :func:`end_processes`: stop all, kill all, wait until they are gone.

    Each round lists the PIDs and reads the parent of each PID it has not read this pass
    (the first round reads them all), newest first, and stops those that are ours. A process
    that hops is new each time we look, so it is read within moments of the listing, however
    many old processes the table holds (a scan of them all can outlast a hop on a busy
    machine: with 1000 other processes, such scans missed a hopper every time)."""
    stop = getattr(signal, "SIGSTOP", None)
    parents: dict[int, int] = {}
    unsettled: dict[int, int] = {}  # PID -> parent, where the line of ancestors broke: read again
    stopped: list[int] = []
    killed: list[str] = []
    quiet_rounds = 0
    while time.monotonic() < deadline and quiet_rounds < 3:  # a child being born may not show yet
        # A hop that no round saw still leaves its trace: the parent it left is our zombie.
        # So a round is quiet only if it found no new process and reaped no zombie we did not
        # stop.
        hopped = _reap(keep) - set(stopped)
        try:
            listed = psutil.pids()
        except (IndexError, *_GONE):  # psutil's own error for an empty table (/proc hidden)
            listed = []
        new = sorted({p for p in listed if p not in parents} | set(unsettled), reverse=True)
        living = []
        for pid in new:
            read = _read_parent(pid)
            if read is not None:
                parents[pid] = read[0]
                if not read[1]:
                    living.append(pid)
        fresh, broken = [], {}
        for pid in living:
            owner = _owner(pid, parents, keep)
            if owner is None and unsettled.get(pid) != parents[pid]:
                broken[pid] = parents[pid]  # its parent may have died since: it has a new one
            elif owner and pid not in stopped:
                fresh.append(pid)
        # (a line that breaks twice at the same parent is not ours: /proc hides that parent)
        unsettled = broken
        quiet_rounds = 0 if fresh or hopped or unsettled else quiet_rounds + 1
        for pid in fresh:
            with contextlib.suppress(*_GONE):
                if stop is not None:
                    os.kill(pid, stop)
                else:  # no SIGSTOP (Windows): kill at once
                    psutil.Process(pid).kill()
        killed += [f"pid {pid}: {_describe(pid)}" for pid in fresh]
        stopped += fresh
        time.sleep(0.01)
    for pid in stopped:
        with contextlib.suppress(*_GONE):
            psutil.Process(pid).kill()
    # A killed process is gone once it is a zombie (then reaped) or no longer exists; on a
    # busy machine that can take longer than one sleep.
    while time.monotonic() < deadline:
        _reap(keep)
        if all((_read_parent(pid) or (0, True))[1] for pid in stopped):
            break
        time.sleep(0.01)
    _reap(keep)
    return killed


def _reap(keep: set[int]) -> set[int]:
    """Collect the exit status of our children that are zombies (not those in ``keep``), and
    return their PIDs: as a subreaper we adopt every orphan, and a process that hops PIDs
    leaves one per hop."""
    reaped: set[int] = set()
    try:
        children = psutil.Process().children()
    except _GONE:
        return reaped
    for child in children:
        with contextlib.suppress(ChildProcessError, *_GONE):
            if child.pid not in keep and child.status() == psutil.STATUS_ZOMBIE:
                if os.waitpid(child.pid, os.WNOHANG)[0] == child.pid:
                    reaped.add(child.pid)
    return reaped


def command_seconds(fallback_start: float) -> float:
    """Wall-clock seconds since this process started, never more than it really ran
    (``fallback_start``, a ``time.monotonic()`` reading taken after the start, where the start
    time cannot be read).

    On Linux a start time is counted in clock ticks from boot, and the wall-clock time of the
    boot is known to the second only: ``time.time() - create_time()`` came out 0.6 s too long
    here. There we subtract on the boot clock instead. The tick count is rounded down, so the
    start may lie up to one tick (10 ms) later than it says: we take the latest start it allows
    (a reading 0.3 ms too long was seen here before we did)."""
    since_fallback = max(0.0, time.monotonic() - fallback_start)
    try:
        started = psutil.Process().create_time()
        if hasattr(time, "CLOCK_BOOTTIME"):
            tick = 1.0 / os.sysconf("SC_CLK_TCK")  # Linux, like CLOCK_BOOTTIME
            since_boot = time.clock_gettime(time.CLOCK_BOOTTIME) - (started - psutil.boot_time()) - tick
            return max(since_fallback, since_boot)
        return max(0.0, time.time() - started)
    except _GONE:
        return since_fallback
