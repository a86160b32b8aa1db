"""The ``course room`` command (:func:`main`) and what it shows: the grid as text, as a page that
reloads itself, and what changed (the grid itself is :func:`course.classroom.room.collect`'s).

:func:`text` is the grid for a terminal, a summary of each exercise under it (how many are
stuck, the misconception most of them met) and the hint of every misconception met;
:func:`page` is the same as one HTML file with a ``<meta http-equiv="refresh">``;
:func:`changes` is what ``--watch`` prints between two refreshes: only the learners whose
cells (or note) changed.

    >>> from course.classroom.room import Cell, Room, Row
    >>> room = Room(0, [("0.1", "cube_sum_grad"), ("0.2", "predicted_a_grad")], [
    ...     Row("ada", {"0.1": Cell("passed"), "0.2": Cell("passed")}),
    ...     Row("bob", {"0.1": Cell("failed", "forgot_backward", "call .backward()")}),
    ...     Row("cy", note="no notebook of lesson 00")], graded=2, unchanged=0)
    >>> print(text(room, width=100))
    lesson 00: 3 learners; 2 graded, 0 unchanged (0.0 s)
    <BLANKLINE>
    learner   0.1                      0.2
    ada       passed                   passed
    bob       failed: forgot_backward  not attempted
    cy        not attempted            not attempted  (no notebook of lesson 00)
    stuck     1 of 3                   0 of 3
    most met  forgot_backward (1)      -
    <BLANKLINE>
    0.1 cube_sum_grad, 0.2 predicted_a_grad
    0.1 forgot_backward: call .backward()
    >>> after = Room(0, room.exercises, [Row("ada", room.rows[0].cells), Row("bob", {"0.1": Cell("passed")}),
    ...                                  room.rows[2]])
    >>> changes(room, after)
    ['bob: 0.1 failed: forgot_backward -> passed']
"""

from __future__ import annotations

import argparse
import html
import os
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from course.classroom import room
from course.classroom.room import Room, Row
from course.classroom.room_grader import WarmGrader
from course.grading.files import write_atomically
from course.grading.options import positive_seconds
from course.grading.untrusted import clean_text

__all__ = ["changes", "main", "page", "summary", "text"]


def summary(room: Room) -> list[tuple[int, str, int, str]]:
    """Per exercise ``(stuck, most met misconception, its count, its hint)``; ``("", 0, "")``
    when none is stuck on a catalogued one."""
    out = []
    for ex_id, _ in room.exercises:
        cells = [row.cell(ex_id) for row in room.rows]
        met = Counter(c.misconception for c in cells if c.stuck and c.misconception != "unrecognised")
        name, count = min(met.items(), key=lambda kv: (-kv[1], kv[0])) if met else ("", 0)
        hint = next((c.hint for c in cells if c.misconception == name and name), "")
        out.append((sum(c.stuck for c in cells), name, count, hint))
    return out


def _headline(room: Room) -> str:
    learners = f"{len(room.rows)} learner{'' if len(room.rows) == 1 else 's'}"
    done = f"{room.graded} graded, {room.unchanged} unchanged ({room.seconds:.1f} s)"
    return f"lesson {room.lesson:02d}: {learners}; {done}"


def text(room: Room, width: int | None = None) -> str:
    """The grid, one line per learner, cut to ``width`` columns (default: the terminal's).

    A column too narrow for its misconceptions' names shows them by key where cutting would
    make two look alike (``failed: #1``), and the keys are spelled out under the grid."""
    width = width or shutil.get_terminal_size((120, 24)).columns
    per = summary(room)
    grid = [["learner", *(i for i, _ in room.exercises)]]
    grid += [[clean_text(r.learner, 24), *(str(r.cell(i)) for i, _ in room.exercises)] for r in room.rows]
    grid.append(["stuck", *(f"{s} of {len(room.rows)}" for s, *_ in per)])
    grid.append(["most met", *(f"{name} ({n})" if name else "-" for _, name, n, _ in per)])
    widths = _widths(grid, width)
    keys = _keys(room, per, widths)
    for k, (ex_id, _) in enumerate(room.exercises, 1):
        for line in grid[1:]:
            line[k] = _keyed(line[k], keys.get(ex_id, {}))
    widths = _widths(grid, width)  # the keys are shorter: room for the other columns
    notes = {n: r.note for n, r in enumerate(room.rows, 1) if r.note}  # grid line n is row n - 1
    lines = [_headline(room), ""]
    for n, line in enumerate(grid):
        cells = [_cut(c, w) for c, w in zip(line, widths)]
        note = f"  ({clean_text(notes[n], 200)})" if n in notes else ""
        lines.append(("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() + note).rstrip())
    lines += ["", ", ".join(f"{i} {name}" for i, name in room.exercises)]
    for ex_id, named in keys.items():
        lines += [_cut(f"{ex_id} {key} = {name}", width) for name, key in named.items()]
    for (ex_id, _), (_, name, _, hint) in zip(room.exercises, per):
        if name:
            lines.append(
                _cut(f"{ex_id} {keys.get(ex_id, {}).get(name, name)}: {' '.join(hint.split())}", width)
            )
    return "\n".join(lines)


def _widths(grid: list[list[str]], width: int) -> list[int]:
    """Each column's width: the longest exercise column loses a character until the line fits
    (never below ``not attempted``)."""
    widths = [max(len(line[k]) for line in grid) for k in range(len(grid[0]))]
    spare = width - sum(w + 2 for w in widths)
    while spare < 0 and max(widths[1:], default=0) > len("not attempted"):  # cut the longest column
        k = max(range(1, len(widths)), key=widths.__getitem__)
        widths[k] -= 1
        spare += 1
    return widths


def _keys(room: Room, per: list, widths: list[int]) -> dict[str, dict[str, str]]:
    """``{exercise id: {misconception: "#n"}}`` for the columns where two different
    misconceptions would be cut to the same text."""
    keys = {}
    for k, (ex_id, _) in enumerate(room.exercises, 1):
        cells = {row.cell(ex_id) for row in room.rows}
        named = sorted({c.misconception for c in cells if c.misconception} | ({per[k - 1][1]} - {""}))
        shown = [f"{c.status}: {m}" for c in cells if (m := c.misconception)] + [f"{m} (0)" for m in named]
        cut = {_cut(t, widths[k]) for t in shown}
        if len(cut) < len(set(shown)):
            keys[ex_id] = {name: f"#{n}" for n, name in enumerate(named, 1)}
    return keys


def _keyed(shown: str, keys: dict[str, str]) -> str:
    """A cell's text with its misconception's name replaced by its key, if it has one."""
    for name, key in keys.items():
        if shown.endswith(f": {name}"):
            return shown[: -len(name)] + key
        if shown.startswith(f"{name} (") and shown.endswith(")"):
            return key + shown[len(name) :]
    return shown


def _cut(s: str, width: int) -> str:
    return s if len(s) <= width else s[: max(1, width - 3)] + "..."


_COLOURS = {"passed": "#c8e6c9", "failed": "#ffcdd2", "error": "#ffcc80", "revealed": "#e1bee7"}


def page(room: Room, refresh: float) -> str:
    """The grid as one HTML page that reloads itself every ``refresh`` seconds."""
    esc = html.escape
    per = summary(room)
    head = "".join(
        f"<th title='{esc(name)}'>{esc(i)}<br><small>{esc(name)}</small></th>" for i, name in room.exercises
    )
    body = "".join(_html_row(r, room) for r in room.rows)
    stuck = "".join(f"<td>{s} of {len(room.rows)}</td>" for s, *_ in per)
    most = "".join(f"<td title='{esc(h)}'>{esc(f'{m} ({n})') if m else '-'}</td>" for _, m, n, h in per)
    legend = "".join(
        f"<li><b>{esc(i)} {esc(m)}</b> ({n}): {esc(h)}</li>"
        for (i, _), (_, m, n, h) in zip(room.exercises, per)
        if m
    )
    return (
        f"<!doctype html><meta charset='utf-8'><meta http-equiv='refresh' content='{max(1, round(refresh))}'>"
        f"<title>Room: lesson {room.lesson:02d}</title>"
        "<style>body{font-family:sans-serif;margin:1em}td,th{padding:.2em .5em;border:1px solid #ddd;"
        "text-align:left;vertical-align:top}tfoot td{font-weight:bold}</style>"
        f"<h1>Lesson {room.lesson:02d}: who is stuck on what</h1><p>{esc(_headline(room))}; "
        f"made at {time.strftime('%H:%M:%S')}; this page reloads every {max(1, round(refresh))} s.</p>"
        f"<table><thead><tr><th>learner</th>{head}<th>note</th></tr></thead><tbody>{body}</tbody>"
        f"<tfoot><tr><td>stuck</td>{stuck}<td></td></tr><tr><td>most met</td>{most}<td></td></tr></tfoot></table>"
        f"<h2>Misconceptions met</h2><ul>{legend or '<li>none</li>'}</ul>\n"
    )


def _html_row(row: Row, room: Room) -> str:
    cells = []
    for ex_id, _ in room.exercises:
        cell = row.cell(ex_id)
        colour = _COLOURS.get(cell.status, "#fff")
        cells.append(
            f"<td style='background:{colour}' title='{html.escape(cell.hint)}'>{html.escape(str(cell))}</td>"
        )
    return f"<tr><td>{html.escape(row.learner)}</td>{''.join(cells)}<td>{html.escape(row.note)}</td></tr>"


def changes(before: Room, after: Room) -> list[str]:
    """One line per learner whose cells or note differ between two refreshes (new and gone
    learners too), in name order."""
    old, new = {r.learner: r for r in before.rows}, {r.learner: r for r in after.rows}
    lines = []
    for learner in sorted(old.keys() | new.keys()):
        if learner not in old or learner not in new:
            lines.append(f"{learner}: {'joined' if learner in new else 'gone'}")
            continue
        a, b = old[learner], new[learner]
        said = [f"{i} {a.cell(i)} -> {b.cell(i)}" for i, _ in after.exercises if a.cell(i) != b.cell(i)]
        if a.note != b.note:
            said.append(f"note: {b.note or 'none'}")
        if said:
            lines.append(f"{learner}: " + "; ".join(said))
    return lines


# --- the command ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course room", description=room.__doc__.split("\n\n")[0])
    parser.add_argument("homes", type=Path, help="a folder of learners' homes (or of learner folders)")
    parser.add_argument("--lesson", type=int, required=True, help="the lesson on the board, e.g. 1")
    parser.add_argument("--html", type=Path, help="also write the grid as a page that reloads itself")
    parser.add_argument("--watch", type=positive_seconds, help="refresh every S seconds until Ctrl-C")
    parser.add_argument(
        "-j", "--jobs", type=int, default=None, help="notebooks graded at once (default: CPUs)"
    )
    parser.add_argument(
        "--cache", type=Path, help=f"where verdicts are kept (default HOMES/{room.CACHE_DIR})"
    )
    parser.add_argument(
        "--timeout", type=positive_seconds, default=300, help="seconds per notebook run (default 300)"
    )
    parser.add_argument(
        "--deadline",
        type=positive_seconds,
        default=None,
        help="draw the grid after S seconds, stragglers as grading… (default: --watch's period, else wait)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return parser


def _usage_error(args) -> str:
    """What is wrong with the command line, or ""."""
    if not args.homes.is_dir():
        return f"no such folder: {args.homes}"
    if args.jobs is not None and args.jobs < 1:
        return "-j needs a positive number"
    if args.html is not None and (args.html.is_dir() or not args.html.parent.is_dir()):
        return f"--html needs a file name in an existing folder, not {args.html}"
    return ""


def _grader(args) -> WarmGrader:
    """The room's grader (``course.classroom.room_grader``): warm sandboxes where bubblewrap
    runs, else each notebook through ``gradebook.grade_sandboxed``, which says how it isolated."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return WarmGrader(args.lesson, size=args.jobs or cpus or 1, keep_warm=bool(args.watch))


def _refresher(args, grader: WarmGrader) -> Callable[[], Room]:
    """A function that refreshes the grid once (and writes ``--html``)."""

    def progress_line(done: int, total: int, learner: str) -> None:
        if not args.quiet:
            print(f"graded {done}/{total} ({clean_text(learner, 40)})", file=sys.stderr, flush=True)

    running: dict = {}  # gradings that outlived a refresh's deadline (stragglers), by cache entry

    def refresh() -> Room:
        now = room.collect(
            args.homes,
            args.lesson,
            args.cache,
            args.jobs,
            args.timeout,
            grade=grader,
            on_graded=progress_line,
            deadline=args.deadline or args.watch,
            running=running,
        )
        if any(i.startswith("none") for i in now.isolation):
            print(
                "course room: WARNING: bubblewrap is not available here, so notebooks were graded WITHOUT a "
                "sandbox (a separate process, a private copy and limits only); see docs/grading.md.",
                file=sys.stderr,
            )
        if args.html is not None:
            write_atomically(args.html, page(now, args.watch or 30))
        return now

    return refresh


def _failed(e: OSError) -> str:
    return f"course room: {e.strerror or e}: {e.filename or ''} (a folder you cannot write? --cache DIR)"


def _watch(period: float, refresh: Callable[[], Room], now: Room) -> None:
    """Refresh every ``period`` seconds; print who changed."""
    while True:
        time.sleep(period)
        try:
            before, now = now, refresh()
        except OSError as e:  # the homes' volume went away for a moment: say so, try again
            print(_failed(e), file=sys.stderr, flush=True)
            continue
        said = changes(before, now)
        if said:  # only who changed: the grid itself is in --html, or one Ctrl-C and a rerun away
            print(f"{time.strftime('%H:%M:%S')} ({now.graded} graded, {now.seconds:.1f} s)", flush=True)
            print("\n".join(f"  {line}" for line in said), flush=True)


def main(argv: list[str] | None = None) -> int:
    """``course room HOMES --lesson N [--html FILE] [--watch S] [-j N] [--cache DIR] [-q]``."""
    args = _parser().parse_args(argv)
    wrong = _usage_error(args)
    if wrong:
        print(f"course room: {wrong}", file=sys.stderr)
        return 2
    grader = _grader(args)
    previous = _on_sigterm(_stop)  # kill, systemd, a CI's timeout: as Ctrl-C
    try:
        refresh = _refresher(args, grader)
        try:
            now = refresh()
        except OSError as e:
            print(_failed(e), file=sys.stderr)
            return 1
        if not now.exercises:
            print(f"course room: lesson {args.lesson:02d} has no exercises", file=sys.stderr)
            return 2
        if not now.rows:
            print(f"course room: no learner folders in {args.homes}", file=sys.stderr)
            return 2
        print(text(now), flush=True)
        if args.watch:
            grader.start()  # warm sandboxes wait for the first save
            _watch(args.watch, refresh, now)
    except KeyboardInterrupt:
        print("", file=sys.stderr)
    finally:
        grader.close()  # the warm sandboxes and their folders
        _on_sigterm(previous)
    return 0


def _on_sigterm(handler):
    """Put ``handler`` on SIGTERM and return the one it replaces (the main thread only can)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler if handler is not None else signal.SIG_DFL)


def _stop(signum, frame) -> None:
    """SIGTERM ends the room as Ctrl-C does, so its warm sandboxes are closed, not left behind."""
    raise KeyboardInterrupt
