"""A timing model for activation offloading: when do the copies cost nothing?

Per layer ``i`` we know its compute time ``c[i]`` (forward or backward) and the bytes it
saves ``s[i]``; the link (PCIe, NVLink-C2C) moves ``bandwidth`` bytes per second after a
fixed ``latency`` per copy, so a copy takes ``x[i] = latency + s[i] / bandwidth``.

- **Synchronous** offload (``save_on_cpu`` without pinned memory: the copy blocks the
  compute stream) pays both: ``sum(c) + sum(x)``.
- **Overlapped** offload (a side stream, one layer in flight): layer ``i``'s copy hides
  behind neighbouring compute, and the slower of the two sets the pace:
  ``sum(max(c[i], x[i]))``.
- **Pipelined** offload (a side stream, unlimited queue) is the two-machine flow shop: the
  copy stream starts copy ``i`` once compute ``i`` is done and copy ``i-1`` is done. Backward
  is the mirror image: fetch ``i`` must finish before backward compute ``i`` starts.

Every model sits between two bounds a learner should be able to state::

    max(sum(c), sum(x)) <= pipelined_time(c, x) <= synchronous_time(c, x)   # OK
    max(sum(c), sum(x)) <= overlapped_time(c, x) <= synchronous_time(c, x)  # OK
    overlapped_time(c, x) < max(sum(c), sum(x))                             # BAD: impossible

Worked example (4 layers, 2 ms of forward compute each, 32 MB saved each, 16 GB/s link:
2 ms per copy) -- the copies hide exactly::

    >>> x = transfer_times([32e6] * 4, bandwidth=16e9)
    >>> [round(t * 1e3, 3) for t in x]
    [2.0, 2.0, 2.0, 2.0]
    >>> round(synchronous_time([2e-3] * 4, x) * 1e3, 3), round(overlapped_time([2e-3] * 4, x) * 1e3, 3)
    (16.0, 8.0)

Index: :func:`transfer_times`, :func:`synchronous_time`, :func:`overlapped_time`,
:func:`pipelined_time`, :func:`predict_step`, :class:`StepPrediction`.

Differences from torch: torch has no such model; this one ignores copy-engine contention,
the time to launch kernels, and the memory the prefetched tensors occupy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "StepPrediction",
    "overlapped_time",
    "pipelined_time",
    "predict_step",
    "synchronous_time",
    "transfer_times",
]


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
    """Copies block compute: every second of transfer is added.

    Args:
        compute: per-layer compute times (seconds).
        transfer: per-layer transfer times (seconds), same length.

    Returns:
        ``sum(compute) + sum(transfer)``.

    Raises:
        ValueError: if the lengths differ.

    Example:
        >>> synchronous_time([1.0, 2.0], [3.0, 0.5])
        6.5
    """
    _check(compute, transfer)
    return float(sum(compute) + sum(transfer))


def overlapped_time(compute: Sequence[float], transfer: Sequence[float]) -> float:
    """Copies run beside compute, one layer at a time: each layer costs the slower of the two.

    Args:
        compute: per-layer compute times (seconds).
        transfer: per-layer transfer times (seconds), same length.

    Returns:
        ``sum(max(c, x) for c, x in zip(compute, transfer))``.

    Raises:
        ValueError: if the lengths differ.

    Example:
        >>> overlapped_time([1.0, 2.0], [3.0, 0.5])  # max(1, 3) + max(2, 0.5)
        5.0
    """
    _check(compute, transfer)
    return float(sum(max(c, x) for c, x in zip(compute, transfer)))


def pipelined_time(first: Sequence[float], second: Sequence[float]) -> float:
    """Two streams, unlimited queue: stage ``second[i]`` starts after ``first[i]`` and ``second[i-1]``.

    Forward is ``pipelined_time(compute, transfer)`` (compute, then offload its activations);
    backward, with layers in backward order, is ``pipelined_time(transfer, compute)``
    (fetch, then compute with it).

    Args:
        first: per-layer times of the stage that runs first.
        second: per-layer times of the stage that depends on it, same length.

    Returns:
        The time at which both streams are done.

    Raises:
        ValueError: if the lengths differ.

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
class StepPrediction:
    """Predicted seconds per training step, without offload and with each model of it."""

    none: float
    synchronous: float
    overlapped: float
    pipelined: float

    def __str__(self) -> str:
        base = self.none or 1.0
        return (
            f"none {self.none * 1e3:.3f} ms | synchronous x{self.synchronous / base:.2f} | "
            f"overlapped x{self.overlapped / base:.2f} | pipelined x{self.pipelined / base:.2f}"
        )


def predict_step(
    forward: Sequence[float],
    backward: Sequence[float],
    saved_bytes: Sequence[float],
    bandwidth: float,
    latency: float = 0.0,
) -> StepPrediction:
    """Predict one step (forward, then backward) with the offload copies modelled both ways.

    Each layer's saved bytes go to the host during forward and come back during backward.

    Args:
        forward: per-layer forward compute times, in forward order (seconds).
        backward: per-layer backward compute times, in *forward* order (seconds).
        saved_bytes: per-layer offloaded bytes, in forward order.
        bandwidth: link bandwidth in bytes per second (each direction).
        latency: fixed cost per copy (seconds).

    Returns:
        A :class:`StepPrediction`.

    Raises:
        ValueError: on mismatched lengths or a non-positive bandwidth.

    Example:
        >>> p = predict_step([2.0] * 3, [4.0] * 3, [1.0, 1.0, 6.0], bandwidth=1.0)
        >>> p  # sync: 18 + 2 * 8; overlap: (2 + 2 + 6) + (6 + 4 + 4)
        StepPrediction(none=18.0, synchronous=34.0, overlapped=24.0, pipelined=30.0)

    The pipelined model is the honest one here: the last layer's 6 s copy can only start
    when its compute ends (forward ends at 12), and backward must fetch it before anything
    (6 + 4 + 4 + 4 = 18). The per-layer model pretends each copy hides behind its own layer.

        >>> print(p)
        none 18000.000 ms | synchronous x1.89 | overlapped x1.33 | pipelined x1.67
    """
    x = transfer_times(saved_bytes, bandwidth, latency)
    _check(forward, x)
    _check(backward, x)
    none = float(sum(forward) + sum(backward))
    return StepPrediction(
        none=none,
        synchronous=synchronous_time(forward, x) + synchronous_time(backward, x),
        overlapped=overlapped_time(forward, x) + overlapped_time(backward, x),
        pipelined=pipelined_time(forward, x) + pipelined_time(x[::-1], list(backward)[::-1]),
    )
