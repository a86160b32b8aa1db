"""A timing model for activation offloading: when do the copies cost nothing?

Per layer ``i`` we know its forward and backward compute times ``f[i]``, ``b[i]`` and the
bytes it saves ``s[i]``; the link (PCIe, NVLink-C2C) moves ``bandwidth`` bytes per second
after a fixed ``latency`` per copy, so a copy takes ``x[i] = latency + s[i] / bandwidth``.
The hooks themselves cost time too: ``hook_s`` seconds per layer and pass, spent on the
compute stream (measure it with identity hooks, which copy nothing).

Forward sends each layer's activations to the host after the layer ran; backward fetches
them back, in reverse, before the layer's backward needs them. The **last layer stays on
the device** (``keep_last=True``): backward starts with it, so sending it out only to fetch
it straight back would leave compute idle (real offloaders keep it too). One copy stream
carries both directions, in order.

One schedule, :func:`step_schedule`, with one knob, ``in_flight``, the number of copies
allowed to run ahead of compute:

- ``in_flight=0``: **synchronous** (each copy blocks compute, as with pageable memory or
  ``mode='copy'``): every second of copying is added;
- ``in_flight=1``: **one layer in flight** (a side stream; layer ``i + 1`` computes while
  layer ``i`` is copied, and backward fetches one layer ahead);
- ``in_flight=None``: **pipelined**, an unlimited queue (the copy stream never waits for
  room; in backward every fetch is issued at once).

A looser schedule is never slower than a stricter one, and all of them lie between two
bounds a learner should be able to state::

    lower_bound <= step(in_flight=None) <= step(in_flight=1) <= step(in_flight=0) == synchronous  # OK
    step(in_flight=1) < max(total compute, total copy time)                                      # BAD: impossible

``lower_bound`` is ``max(sum of compute, sum of copies)``: each stream has at least that much
work. ``synchronous`` is their sum.

Worked example (4 layers, 2 ms of forward and 4 ms of backward compute each, 32 MB saved
each, 16 GB/s: 2 ms per copy; three layers move, the last stays)::

    >>> p = predict_step([2e-3] * 4, [4e-3] * 4, [32e6] * 4, bandwidth=16e9)
    >>> print(p)
    none 24.000 ms | lower x1.00 | pipelined x1.00 | in flight x1.00 | synchronous x1.50

Units: seconds and bytes everywhere in this module; lesson 4 prints milliseconds and
``MB = 2**20`` bytes (:data:`MB`), and gives bandwidths in GB/s of ``1e9`` bytes.

Index: :data:`MB`, :func:`transfer_times`, :func:`synchronous_time`, :func:`lower_bound`,
:func:`overlapped_time`, :func:`pipelined_time`, :func:`step_schedule`, :class:`StepSchedule`,
:func:`predict_step`, :class:`StepPrediction`.

Differences from torch: torch has no such model. Ours ignores copy-engine contention (both
directions share one stream), kernel launch time, and that a real offloader counts storages,
not layers, when it prefetches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "MB",
    "StepPrediction",
    "StepSchedule",
    "lower_bound",
    "overlapped_time",
    "pipelined_time",
    "predict_step",
    "step_schedule",
    "synchronous_time",
    "transfer_times",
]

#: The byte unit lesson 4 prints: 2**20 bytes (the harness's tables use it too).
MB = 2**20


def transfer_times(saved_bytes: Sequence[float], bandwidth: float, latency: float = 0.0) -> list[float]:
    """Seconds to copy each layer's saved bytes over the link.

    Args:
        saved_bytes: bytes each layer offloads.
        bandwidth: link bandwidth in bytes per second (> 0).
        latency: fixed cost per copy in seconds (0 for a layer that saves nothing).

    Returns:
        One time per layer.

    Raises:
        ValueError: if ``bandwidth`` is not positive.

    Example:
        >>> transfer_times([0, 1e9, 2e9], bandwidth=1e9, latency=1e-5)
        [0.0, 1.00001, 2.00001]
    """
    if bandwidth <= 0:
        raise ValueError(f"bandwidth must be positive, got {bandwidth}")
    return [(latency + b / bandwidth) if b else 0.0 for b in saved_bytes]


def _check(compute: Sequence[float], transfer: Sequence[float]) -> None:
    if len(compute) != len(transfer):
        raise ValueError(f"{len(compute)} compute times but {len(transfer)} transfer times")


def synchronous_time(compute: Sequence[float], transfer: Sequence[float]) -> float:
    """One pass whose copies block compute: every second of transfer is added (the upper bound).

    Example:
        >>> synchronous_time([1.0, 2.0], [3.0, 0.5])
        6.5
    """
    _check(compute, transfer)
    return float(sum(compute) + sum(transfer))


def lower_bound(compute: Sequence[float], transfer: Sequence[float]) -> float:
    """No schedule beats ``max(sum(compute), sum(transfer))``: each stream has that much work.

    Example:
        >>> lower_bound([1.0, 2.0], [3.0, 0.5])
        3.5
    """
    _check(compute, transfer)
    return float(max(sum(compute), sum(transfer)))


def overlapped_time(compute: Sequence[float], transfer: Sequence[float], in_flight: int | None = 1) -> float:
    """One forward-shaped pass (compute layer ``i``, then copy it) on two streams.

    Copy ``i`` starts when layer ``i`` is done and copy ``i - 1`` is done; layer ``i`` may
    start only when at most ``in_flight`` earlier copies are unfinished.

    Args:
        compute: per-layer compute times (seconds).
        transfer: per-layer copy times (seconds), same length; 0 means "nothing to copy".
        in_flight: copies allowed to run behind compute (0: synchronous; None: unlimited).

    Returns:
        The time at which both streams are done.

    Raises:
        ValueError: if the lengths differ or ``in_flight`` is negative.

    Example:
        >>> overlapped_time([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])  # layer 2 waits for copy 0
        8.0
        >>> overlapped_time([1.0, 2.0, 3.0], [2.0, 2.0, 2.0], in_flight=0)
        12.0
    """
    _check(compute, transfer)
    if in_flight is not None and in_flight < 0:
        raise ValueError(f"in_flight must be >= 0 or None, got {in_flight}")
    t_compute = t_copy = 0.0
    copy_ends: list[float] = []
    for c, x in zip(compute, transfer):
        if in_flight is not None and len(copy_ends) > in_flight:
            t_compute = max(t_compute, copy_ends[-(in_flight + 1)])  # room for one more copy
        t_compute += c
        if x:
            t_copy = max(t_copy, t_compute) + x
            copy_ends.append(t_copy)
    return max(t_compute, t_copy)


def pipelined_time(first: Sequence[float], second: Sequence[float]) -> float:
    """Two streams, unlimited queue: stage ``second[i]`` starts after ``first[i]`` and ``second[i-1]``.

    Forward is ``pipelined_time(compute, transfer)`` (compute, then offload); a backward
    whose fetches are all issued at once is ``pipelined_time(transfer, compute)``.

    Example:
        >>> pipelined_time([1.0, 2.0], [3.0, 0.5])  # copy 0 ends at 4, copy 1 at 4.5
        4.5
        >>> pipelined_time([3.0, 0.5], [1.0, 2.0])  # fetch, then compute: 4, then 3.5 + 2
        6.0
    """
    _check(first, second)
    t_first = t_second = 0.0
    for a, b in zip(first, second):
        t_first += a
        t_second = max(t_second, t_first) + b
    return max(t_first, t_second)


@dataclass(frozen=True)
class StepSchedule:
    """One training step laid out in time (seconds) and device memory (bytes).

    ``intervals`` are ``(stream, start, end, label)`` tuples (``course.show.timeline``
    draws them); ``memory`` is a step function of ``(time, activation bytes on the device)``.
    """

    intervals: tuple[tuple[str, float, float, str], ...]
    memory: tuple[tuple[float, float], ...]

    @property
    def end(self) -> float:
        """When the last interval ends: the step's time."""
        return max(iv[2] for iv in self.intervals)

    @property
    def peak(self) -> float:
        """The most activation bytes on the device at any moment."""
        return max(m for _, m in self.memory)


def step_schedule(
    forward: Sequence[float],
    backward: Sequence[float],
    saved_bytes: Sequence[float],
    bandwidth: float,
    in_flight: int | None = 1,
    latency: float = 0.0,
    hook_s: float = 0.0,
    keep_last: bool = True,
) -> StepSchedule:
    """Lay out forward, then backward, with offload copies on one copy stream.

    Forward: layer ``i`` computes (``forward[i] + hook_s``) once at most ``in_flight`` earlier
    copies are unfinished; its copy to the host follows on the copy stream. Backward, layers
    in reverse: the fetch of layer ``i`` is issued when layer ``i + 1 + in_flight`` has finished
    its backward (at once for the first ones, or for ``in_flight=None``) and runs when the copy
    stream is free; layer ``i`` computes (``backward[i] + hook_s``) when its fetch is back.

    Args:
        forward, backward: per-layer compute times in forward order (seconds).
        saved_bytes: per-layer bytes saved for backward, in forward order.
        bandwidth: bytes per second over the link (each direction).
        in_flight: copies allowed ahead of compute (0: synchronous, None: unlimited).
        latency: fixed seconds per copy.
        hook_s: seconds of hook work per layer and pass (pack calls, unpack calls).
        keep_last: keep the last layer's activations on the device (no copy either way).

    Returns:
        A :class:`StepSchedule`.

    Raises:
        ValueError: on mismatched lengths, a non-positive bandwidth or a negative ``in_flight``.

    Example:
        >>> s = step_schedule([1.0] * 3, [2.0] * 3, [2.0] * 3, bandwidth=1.0)
        >>> [iv for iv in s.intervals if iv[0] == "copy"]
        [('copy', 1.0, 3.0, 'd2h0'), ('copy', 3.0, 5.0, 'd2h1'), ('copy', 5.0, 7.0, 'h2d1'), ('copy', 7.0, 9.0, 'h2d0')]
        >>> s.end, s.peak
        (11.0, 4.0)
    """
    n = len(forward)
    _check(forward, backward)
    _check(forward, saved_bytes)
    if in_flight is not None and in_flight < 0:
        raise ValueError(f"in_flight must be >= 0 or None, got {in_flight}")
    x = transfer_times(saved_bytes, bandwidth, latency)
    moves = [bool(saved_bytes[i]) and not (keep_last and i == n - 1) for i in range(n)]
    lane = _Lanes()
    for i in range(n):  # forward: compute, then offload
        lane.forward(i, forward[i] + hook_s, saved_bytes[i], x[i] if moves[i] else None, in_flight)
    backward_start, done = lane.t_compute, {}  # layer -> end of its backward
    for i in reversed(range(n)):  # backward: fetch, then compute
        j = None if in_flight is None else i + 1 + in_flight
        issue = done[j] if j is not None and j < n else backward_start
        done[i] = lane.backward(i, backward[i] + hook_s, saved_bytes[i], x[i] if moves[i] else None, issue)
    return StepSchedule(tuple(lane.intervals), _memory_curve(lane.deltas))


class _Lanes:
    """The two lanes a step runs on (compute, and one copy stream), filled layer by layer:
    the intervals laid out so far, and each change of the device's bytes with its time."""

    def __init__(self) -> None:
        self.intervals: list[tuple[str, float, float, str]] = []
        self.deltas: list[tuple[float, float]] = []  # (time, +/- bytes on the device)
        self.t_compute = self.t_copy = 0.0
        self.copy_ends: list[float] = []

    def forward(
        self, i: int, seconds: float, saved: float, copy_s: float | None, in_flight: int | None
    ) -> None:
        """Layer ``i`` computes once at most ``in_flight`` earlier copies are unfinished, then
        (``copy_s`` not None) its saved bytes go to the host when the copy stream is free."""
        if in_flight is not None and len(self.copy_ends) > in_flight:
            self.t_compute = max(self.t_compute, self.copy_ends[-(in_flight + 1)])
        self.intervals.append(("compute", self.t_compute, self.t_compute + seconds, f"fwd{i}"))
        self.t_compute += seconds
        self.deltas.append((self.t_compute, +saved))
        if copy_s is not None:
            start = max(self.t_copy, self.t_compute)
            self.t_copy = start + copy_s
            self.intervals.append(("copy", start, self.t_copy, f"d2h{i}"))
            self.copy_ends.append(self.t_copy)
            self.deltas.append((self.t_copy, -saved))  # the device copy is freed

    def backward(self, i: int, seconds: float, saved: float, copy_s: float | None, issue: float) -> float:
        """Layer ``i``'s fetch (issued at ``issue``, run when the copy stream is free), then its
        backward once the fetch is back; returns when that backward ends."""
        ready = self.t_compute
        if copy_s is not None:
            start = max(self.t_copy, issue)
            self.t_copy = start + copy_s
            self.intervals.append(("copy", start, self.t_copy, f"h2d{i}"))
            self.deltas.append((start, +saved))  # room for the fetched copy
            ready = max(ready, self.t_copy)
        self.intervals.append(("compute", ready, ready + seconds, f"bwd{i}"))
        self.t_compute = ready + seconds
        self.deltas.append((self.t_compute, -saved))
        return self.t_compute


def _memory_curve(deltas: list[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """The device's saved bytes as steps ``((time, bytes), ...)`` from its changes."""
    memory, level = [(0.0, 0.0)], 0.0
    for t in sorted({t for t, _ in deltas}):
        level += sum(d for u, d in deltas if u == t)
        memory.append((t, level))
    return tuple(memory)


@dataclass(frozen=True)
class StepPrediction:
    """Predicted seconds per training step: no offload, the two bounds and three schedules.

    ``lower <= pipelined <= overlapped <= synchronous``; ``overlapped`` is the schedule with
    ``in_flight`` copies ahead of compute (one layer in flight by default).
    """

    none: float
    lower: float
    pipelined: float
    overlapped: float
    synchronous: float

    def __str__(self) -> str:
        base = self.none or 1.0
        return (
            f"none {self.none * 1e3:.3f} ms | lower x{self.lower / base:.2f} | "
            f"pipelined x{self.pipelined / base:.2f} | in flight x{self.overlapped / base:.2f} | "
            f"synchronous x{self.synchronous / base:.2f}"
        )


def predict_step(
    forward: Sequence[float],
    backward: Sequence[float],
    saved_bytes: Sequence[float],
    bandwidth: float,
    latency: float = 0.0,
    hook_s: float = 0.0,
    in_flight: int = 1,
    keep_last: bool = True,
) -> StepPrediction:
    """Predict one step (forward, then backward) without offload and with each schedule.

    Args:
        forward: per-layer forward compute times, in forward order (seconds).
        backward: per-layer backward compute times, in *forward* order (seconds).
        saved_bytes: per-layer saved bytes, in forward order.
        bandwidth: link bandwidth in bytes per second (each direction).
        latency: fixed cost per copy (seconds).
        hook_s: seconds the hooks cost per layer and pass (not paid by ``none``).
        in_flight: copies ahead of compute for the ``overlapped`` schedule.
        keep_last: keep the last layer's activations on the device.

    Returns:
        A :class:`StepPrediction`.

    Raises:
        ValueError: on mismatched lengths or a non-positive bandwidth.

    Example:
        >>> p = predict_step([2.0] * 3, [4.0] * 3, [1.0, 1.0, 6.0], bandwidth=1.0)
        >>> p  # the last layer's 6 bytes stay on the device: only 1 + 1 go out and back
        StepPrediction(none=18.0, lower=18.0, pipelined=18.0, overlapped=18.0, synchronous=22.0)
        >>> predict_step([2.0] * 3, [4.0] * 3, [1.0, 1.0, 6.0], bandwidth=1.0, keep_last=False).synchronous
        34.0
    """
    none = float(sum(forward) + sum(backward))

    def end(k: int | None) -> float:
        return step_schedule(forward, backward, saved_bytes, bandwidth, k, latency, hook_s, keep_last).end

    n = len(forward)
    copies = [
        t
        for i, t in enumerate(transfer_times(saved_bytes, bandwidth, latency))
        if not (keep_last and i == n - 1)
    ]
    work = none + 2 * n * hook_s
    return StepPrediction(
        none=none,
        lower=max(work, 2 * sum(copies)),
        pipelined=end(None),
        overlapped=end(in_flight),
        synchronous=end(0),
    )
