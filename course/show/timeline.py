"""Timelines for the offload lesson: compute and copy streams side by side, memory over time.

An offloader wins when its copies (device -> host after the forward uses a tensor, host ->
device before the backward needs it) run on a side stream *while* compute runs. We describe
a run as a list of :class:`Interval` (stream, start, end, label) and draw one row per
stream; where a copy sits under a compute bar, it is hidden::

    >>> from course.show.timeline import Interval, timeline_text
    >>> run = [Interval("compute", 0, 4, "fwd1"), Interval("compute", 4, 8, "fwd2"),
    ...        Interval("copy", 4, 7, "d2h a")]
    >>> print(timeline_text(run, width=16))
    compute |########++++++++| 0..8
    copy    |        ======  | 0..8
    compute: fwd1 [0, 4), fwd2 [4, 8)
    copy: d2h a [4, 7)
    copy hidden under compute: 3 of 3 (100%)

Memory is a list of ``(time, bytes)`` points, a step function (the value holds until the
next point).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = ["Interval", "hidden_copy_time", "memory_at", "timeline_text", "memory_text", "draw_timeline"]


class Interval(NamedTuple):
    """One piece of work on one stream, ``[start, end)`` in any time unit."""

    stream: str
    start: float
    end: float
    label: str = ""


def as_intervals(intervals: Iterable) -> list[Interval]:
    out = [Interval(*iv) for iv in intervals]
    for iv in out:
        if iv.end < iv.start:
            raise ValueError(f"interval ends before it starts: {iv}")
    return out


def _streams(ivs: Sequence[Interval]) -> list[str]:
    return list(dict.fromkeys(iv.stream for iv in ivs))  # first-seen order


def _union_overlap(a: list[Interval], b: list[Interval]) -> float:
    """Total length of time covered by both some interval of ``a`` and some of ``b``."""
    points = sorted({p for iv in a + b for p in (iv.start, iv.end)})
    both = 0.0
    for lo, hi in zip(points, points[1:]):
        mid = (lo + hi) / 2
        if any(iv.start <= mid < iv.end for iv in a) and any(iv.start <= mid < iv.end for iv in b):
            both += hi - lo
    return both


def hidden_copy_time(intervals, compute: str = "compute") -> tuple[float, float]:
    """``(hidden, total)``: copy time that overlaps compute, and all copy time (union).

    Example:
        >>> hidden_copy_time([("compute", 0, 4, ""), ("copy", 2, 6, "")])
        (2.0, 4.0)
    """
    ivs = as_intervals(intervals)
    comp = [iv for iv in ivs if iv.stream == compute]
    copies = [iv for iv in ivs if iv.stream != compute]
    return _union_overlap(copies, comp), _union_overlap(copies, copies)


def memory_at(memory: Sequence[tuple[float, float]], t: float) -> float:
    """The memory step function at time ``t`` (0 before the first point)."""
    value = 0
    for time, nbytes in sorted(memory):
        if time > t:
            break
        value = nbytes
    return value


def timeline_text(intervals, width: int = 60, cursor: float | None = None, compute: str = "compute") -> str:
    """An ASCII Gantt chart, one row per stream, then the intervals and the hidden copy time.

    Compute intervals alternate ``#`` and ``+`` so neighbours stay apart; copies use ``=``;
    ``cursor`` marks a time with ``|`` on a ruler line. Raises ValueError on an empty list.
    """
    ivs = as_intervals(intervals)
    if not ivs:
        raise ValueError("no intervals to show: pass a list of (stream, start, end, label)")
    t0, t1 = min(iv.start for iv in ivs), max(iv.end for iv in ivs)
    scale = width / ((t1 - t0) or 1)
    col = lambda t: min(width, int(round((t - t0) * scale)))  # noqa: E731
    pad = max(len(s) for s in _streams(ivs))
    lines = []
    for s in _streams(ivs):
        row = [" "] * width
        for k, iv in enumerate(x for x in ivs if x.stream == s):
            ch = ("#+"[k % 2]) if s == compute else "="
            for c in range(col(iv.start), max(col(iv.end), col(iv.start) + 1)):
                row[min(c, width - 1)] = ch
        lines.append(f"{s:<{pad}} |{''.join(row)}| {t0:g}..{t1:g}")
    if cursor is not None:
        ruler = [" "] * width
        ruler[min(col(cursor), width - 1)] = "^"
        lines.append(f"{'t=' + format(cursor, 'g'):<{pad}}  {''.join(ruler)}")
    for s in _streams(ivs):
        lines.append(
            f"{s}: " + ", ".join(f"{iv.label} [{iv.start:g}, {iv.end:g})" for iv in ivs if iv.stream == s)
        )
    hidden, total = hidden_copy_time(ivs, compute)
    if total:
        lines.append(f"copy hidden under compute: {hidden:g} of {total:g} ({hidden / total:.0%})")
    return "\n".join(lines)


def memory_text(memory: Sequence[tuple[float, float]], unit: str = "bytes") -> str:
    """Peak and final memory, and the time the peak is first reached.

    Example:
        >>> memory_text([(0, 0), (1, 400), (2, 100)])
        'memory: peak 400 bytes at t=1, final 100 bytes'
    """
    if not memory:
        raise ValueError("no memory points: pass a list of (time, bytes)")
    pts = sorted(memory)
    peak_t, peak = max(pts, key=lambda p: (p[1], -p[0]))
    return f"memory: peak {peak:g} {unit} at t={peak_t:g}, final {pts[-1][1]:g} {unit}"


def draw_timeline(
    intervals,
    memory=None,
    cursor: float | None = None,
    compute: str = "compute",
    title: str = "",
    source: str | None = "predicted (timing model)",
    time_unit: str = "ms",
    memory_unit: str = "MB",
):
    """Draw one bar row per stream (and, with ``memory``, a step plot below it).

    Args:
        source: where the numbers come from, said in the title: the default
            ``"predicted (timing model)"`` reads "predicted (timing model), not measured";
            pass ``"measured"`` for timings taken on a device, or None to say nothing.
        time_unit, memory_unit: the units of the interval times and memory values, shown
            on the axes (``time (ms)``, ``memory (MB)``).

    Returns:
        The matplotlib Figure (constrained layout). Raises ValueError on an empty list of
        intervals.
    """
    import matplotlib.pyplot as plt

    ivs = as_intervals(intervals)
    if not ivs:
        raise ValueError("no intervals to show: pass a list of (stream, start, end, label)")
    streams = _streams(ivs)
    rows = 2 if memory else 1
    fig, axes = plt.subplots(
        rows,
        1,
        figsize=(9, 1.6 + 0.6 * len(streams) + 2 * (rows - 1)),
        sharex=True,
        squeeze=False,
        layout="constrained",
    )
    ax = axes[0][0]
    for y, s in enumerate(streams):
        mine = [iv for iv in ivs if iv.stream == s]
        color = "#4a90d9" if s == compute else "#f5a742"
        ax.broken_barh(
            [(iv.start, iv.end - iv.start) for iv in mine],
            (y - 0.4, 0.8),
            facecolors=color,
            edgecolors="black",
            linewidth=0.5,
        )
        for iv in mine:
            ax.text((iv.start + iv.end) / 2, y, iv.label, ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(streams)), streams)
    ax.set_ylabel("stream")
    ax.invert_yaxis()
    said = "" if not source else source if "measured" in source else f"{source}, not measured"
    heading = title or "streams over time"
    if said and said not in heading:
        heading += f"\n{said}"
    ax.set_title(heading, fontsize=10)
    if memory:
        pts = sorted(memory)
        mem_ax = axes[1][0]
        mem_ax.step([p[0] for p in pts], [p[1] for p in pts], where="post")
        mem_ax.set_ylabel(f"memory ({memory_unit})")
    for row in axes:
        if cursor is not None:
            row[0].axvline(cursor, color="red", linewidth=1)
    axes[-1][0].set_xlabel(f"time ({time_unit})")
    return fig
