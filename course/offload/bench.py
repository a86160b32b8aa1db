"""A timing harness: run one model under several offload strategies and compare.

A strategy is a context manager around the forward pass (``none`` is no context at all).
For each strategy :func:`benchmark` runs ``warmup`` untimed steps, the first of them with
byte accounting, then ``steps`` timed rounds (one step of every strategy per round, so a
noisy moment on a shared machine hurts all of them alike), and reports::

    BenchmarkResult(device='cpu', label='CPU', steps=3, rows=(StrategyResult(...), ...))

Timing uses CUDA events on a GPU and ``time.perf_counter`` on the CPU; each row keeps every
timed step, so tables show min / median / max. Peak device memory is
``torch.cuda.max_memory_allocated`` on a GPU and ``None`` on the CPU. Byte and call columns
come from pack-hook accounting on the warm-up step, the same definition for every strategy:

- ``saved_bytes``: distinct storages the pack hook saw (a storage saved twice counts once);
- ``offloaded_bytes``: of those, bytes whose storage was copied (so stop pinning the device);
- ``moved_bytes``: every byte copied by a pack or unpack hook, in either direction;
- ``packs`` / ``unpacks``: how many times each hook ran (what the hooks' own cost scales with).

The ``identity hooks`` strategy packs ``t.detach()`` and unpacks it as is: it copies nothing,
so its extra time over ``none`` is the price of the hook calls alone (the timing model's
``hook_s``; :func:`hook_seconds` divides it by the calls).

Stored GPU runs (``benchmarks/offload.py`` writes one JSON file per run) are read by
:mod:`course.offload.results`.

For torch's ``save_on_cpu`` a hook "copied" when its result does not share the input's
storage; course's :class:`~course.offload.offloader.Offloader` reports its own counters.

Index: :func:`benchmark`, :func:`plot`, :func:`hook_seconds`, :class:`BenchmarkResult`,
:class:`StrategyResult`, :data:`STRATEGIES`. What the timing model predicts for a run is
:mod:`course.offload.predictions`; stored runs are read by :mod:`course.offload.results`.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd.graph import save_on_cpu
from torch.multiprocessing.reductions import StorageWeakRef

from course.offload.offloader import Offloader

__all__ = [
    "STRATEGIES",
    "BenchmarkResult",
    "StrategyResult",
    "benchmark",
    "hook_seconds",
    "plot",
]


def _course(**kwargs: Any):
    return Offloader(**kwargs)


def _identity():
    return torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda p: p)


#: name -> factory of a fresh context manager (called once per strategy per benchmark).
STRATEGIES: dict[str, Callable[[], Any]] = {
    "none": contextlib.nullcontext,
    "identity hooks": _identity,
    "save_on_cpu": lambda: save_on_cpu(),
    "save_on_cpu(pin_memory=True)": lambda: save_on_cpu(pin_memory=True),
    "course": _course,
}


@dataclass(frozen=True)
class StrategyResult:
    """One strategy's figures: median seconds per step, peak bytes (None on CPU), byte counts,
    hook calls, and every timed step (``times``, seconds)."""

    strategy: str
    step_s: float
    peak_bytes: int | None
    saved_bytes: int
    offloaded_bytes: int
    moved_bytes: int
    packs: int = 0
    unpacks: int = 0
    times: tuple[float, ...] = ()

    @property
    def spread(self) -> tuple[float, float, float]:
        """(min, median, max) seconds per step."""
        ts = self.times or (self.step_s,)
        return min(ts), self.step_s, max(ts)


@dataclass(frozen=True)
class BenchmarkResult:
    """All strategies on one device. ``label`` says where the figures come from ("CPU")."""

    device: str
    label: str
    steps: int
    rows: tuple[StrategyResult, ...]

    def row(self, strategy: str) -> StrategyResult:
        """The row of ``strategy`` (KeyError if it was not run)."""
        for r in self.rows:
            if r.strategy == strategy:
                return r
        raise KeyError(strategy)

    def table(self, times: bool = True) -> str:
        """A fixed-width text table; ``times=False`` leaves out the columns that vary by run.

        Times are min / median / max over the timed steps (ms); ``x none`` is the ratio of medians.

        Example:
            >>> r = BenchmarkResult("cpu", "CPU", 3, (StrategyResult("none", 0.002, None, 2**20, 0, 0,
            ...                                                      times=(0.0019, 0.002, 0.0031)),))
            >>> print(r.table())
            strategy (CPU, 3 steps)           min ms  median ms   max ms  x none  peak MB  saved MB  offl. MB  moved MB
            none                               1.900      2.000    3.100    1.00        -     1.000     0.000     0.000
        """
        base = self.rows[0].step_s or 1.0
        w = max(30, *(len(r.strategy) + 1 for r in self.rows))  # the name column
        head = f"{'strategy (' + self.label + f', {self.steps} steps)':<{w}}"
        head += (
            f" {'min ms':>9} {'median ms':>10} {'max ms':>8} {'x ' + self.rows[0].strategy:>7}"
            if times
            else ""
        )
        lines = [head + f" {'peak MB':>8} {'saved MB':>9} {'offl. MB':>9} {'moved MB':>9}"]
        for r in self.rows:
            line = f"{r.strategy:<{w}}"
            lo, mid, hi = (v * 1e3 for v in r.spread)
            line += f" {lo:9.3f} {mid:10.3f} {hi:8.3f} {r.step_s / base:7.2f}" if times else ""
            peak = "-" if r.peak_bytes is None else f"{r.peak_bytes / 2**20:.1f}"
            mb = [v / 2**20 for v in (r.saved_bytes, r.offloaded_bytes, r.moved_bytes)]
            lines.append(line + f" {peak:>8} {mb[0]:9.3f} {mb[1]:9.3f} {mb[2]:9.3f}")
        return "\n".join(lines)


class _Counted(torch.autograd.graph.saved_tensors_hooks):
    """Wrap another strategy's hooks with byte accounting (see the module docstring)."""

    def __init__(self, inner: Any) -> None:
        self.saved = self.offloaded = self.moved = self.packs = self.unpacks = 0
        # (device, data_ptr) -> weak ref to the storage: an address freed and handed out
        # again is a new storage, not the same one seen twice.
        self._seen: dict[tuple[str, int], tuple[StorageWeakRef, list[bool]]] = {}
        # "none" counts through detach (never the tensor itself: a reference cycle)
        inner_pack = getattr(inner, "pack_hook", lambda t: t.detach())
        inner_unpack = getattr(inner, "unpack_hook", lambda p: p)

        def pack(t: torch.Tensor) -> Any:
            self.packs += 1
            storage = t.untyped_storage()
            key, n = (str(t.device), storage.data_ptr()), storage.nbytes()
            seen = self._seen.get(key)
            if seen is None or seen[0].expired():
                seen = self._seen[key] = (StorageWeakRef(storage), [False])
                self.saved += n
            packed = inner_pack(t)
            out = next((p for p in _flat(packed) if isinstance(p, torch.Tensor)), None)
            if out is not None and out.untyped_storage().data_ptr() != key[1]:
                if not seen[1][0]:  # first copy of this storage
                    seen[1][0] = True
                    self.offloaded += n
                self.moved += t.nbytes
            return packed

        def unpack(packed: Any) -> torch.Tensor:
            self.unpacks += 1
            t = inner_unpack(packed)
            src = next((p for p in _flat(packed) if isinstance(p, torch.Tensor)), None)
            if src is not None and src.untyped_storage().data_ptr() != t.untyped_storage().data_ptr():
                self.moved += t.nbytes
            return t

        super().__init__(pack, unpack)


def _flat(packed: Any) -> tuple:
    return packed if isinstance(packed, tuple) else (packed,)


def _step(model: torch.nn.Module, inputs: Sequence[torch.Tensor], ctx: Any, loss_fn: Callable) -> None:
    with ctx:
        loss = loss_fn(model(*inputs))
    loss.backward()
    for p in model.parameters():
        p.grad = None


def _timed(device: torch.device, fn: Callable[[], None]) -> float:
    if device.type != "cuda":
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    fn()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / 1e3


def _default_loss(out: Any) -> torch.Tensor:
    return out.float().sum() if isinstance(out, torch.Tensor) else sum(o.float().sum() for o in out)


def _warm_up(model, inputs, ctx, loss_fn, warmup: int, bar) -> tuple[int, int, int, int, int]:
    """``warmup`` untimed steps under ``ctx``; the first counts (saved, offloaded, moved bytes;
    packs, unpacks), by course's Offloader itself or by wrapping ``ctx`` in :class:`_Counted`."""
    if hasattr(ctx, "reset_stats"):  # course's Offloader counts for itself
        ctx.reset_stats()
        _step(model, inputs, ctx, loss_fn)
        st = ctx.stats
        counts = (st.saved_bytes, st.offloaded_bytes, st.moved_bytes, st.packed, st.unpacked)
    else:
        counted = _Counted(ctx)
        _step(model, inputs, counted, loss_fn)
        counts = (counted.saved, counted.offloaded, counted.moved, counted.packs, counted.unpacks)
    for _ in range(warmup - 1):
        _step(model, inputs, ctx, loss_fn)
    bar.update(warmup)
    return counts


def _timed_rounds(model, inputs, ctxs: dict, loss_fn, steps: int, device: torch.device, bar):
    """``steps`` rounds of one timed step per strategy (round robin, so a noisy moment hurts
    every strategy alike): ``({name: [seconds, ...]}, {name: peak bytes, 0 on the CPU})``."""
    cuda = device.type == "cuda"
    times: dict[str, list[float]] = {name: [] for name in ctxs}
    peaks = dict.fromkeys(ctxs, 0)
    for _ in range(steps):
        for name, ctx in ctxs.items():
            if cuda:
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
            times[name].append(_timed(device, lambda: _step(model, inputs, ctx, loss_fn)))  # noqa: B023 (called in this iteration)
            if cuda:
                peaks[name] = max(peaks[name], torch.cuda.max_memory_allocated(device))
            bar.update(1)
    return times, peaks


def benchmark(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    strategies: Sequence[str] | dict[str, Callable[[], Any]] = tuple(STRATEGIES),
    steps: int = 5,
    warmup: int = 1,
    loss_fn: Callable[[Any], torch.Tensor] = _default_loss,
    progress: bool | None = None,
) -> BenchmarkResult:
    """Time forward + backward of ``model(*inputs)`` under each offload strategy.

    Args:
        model: the module (its parameters' device, else the first input's, is the one measured).
        inputs: positional inputs of one forward.
        strategies: names from :data:`STRATEGIES`, or a dict name -> context factory.
        steps: timed rounds (one step per strategy each; the median is reported).
        warmup: untimed steps first (at least 1: the first carries the byte accounting).
        loss_fn: output -> scalar loss (default: sum of the output).
        progress: show a tqdm bar; ``None`` shows one when there are 50 steps or more.

    Returns:
        A :class:`BenchmarkResult`, rows in the order of ``strategies``.

    Raises:
        KeyError: an unknown strategy name.
        ValueError: if ``steps`` < 1 or ``warmup`` < 1.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
        >>> r = benchmark(model, [torch.randn(32, 64)], steps=2, progress=False)
        >>> print(r.table(times=False))
        strategy (CPU, 2 steps)         peak MB  saved MB  offl. MB  moved MB
        none                                  -     0.016     0.000     0.000
        identity hooks                        -     0.016     0.000     0.000
        save_on_cpu                           -     0.016     0.000     0.000
        save_on_cpu(pin_memory=True)          -     0.016     0.016     0.016
        course                                -     0.016     0.000     0.000

    On the CPU, ``save_on_cpu(pin_memory=True)`` still copies every saved tensor (into an
    unpinned buffer); ``save_on_cpu()`` and course's offloader (``passthrough``) copy nothing.
    """
    from tqdm.auto import tqdm

    if steps < 1 or warmup < 1:
        raise ValueError(f"steps and warmup must be >= 1, got {steps} and {warmup}")
    factories = dict(strategies) if isinstance(strategies, dict) else {s: STRATEGIES[s] for s in strategies}
    device = next(model.parameters(), inputs[0]).device
    cuda = device.type == "cuda"
    show = progress if progress is not None else len(factories) * (steps + warmup) >= 50
    bar = tqdm(total=len(factories) * (steps + warmup), disable=not show, desc="offload benchmark")
    ctxs = {name: factory() for name, factory in factories.items()}
    counts = {name: _warm_up(model, inputs, ctx, loss_fn, warmup, bar) for name, ctx in ctxs.items()}
    times, peaks = _timed_rounds(model, inputs, ctxs, loss_fn, steps, device, bar)
    rows = [
        StrategyResult(
            name,
            statistics.median(times[name]),
            peaks[name] if cuda else None,
            *counts[name],
            times=tuple(times[name]),
        )
        for name in factories
    ]
    bar.close()
    label = f"GPU {torch.cuda.get_device_name(device)}" if cuda else device.type.upper()
    return BenchmarkResult(device.type, label, steps, tuple(rows))


def plot(result: BenchmarkResult, ax: Any = None) -> Any:
    """Step time against memory, one labelled point per strategy (matplotlib).

    On a GPU the memory axis is the peak allocated memory; on the CPU, where there is no
    device memory to measure, it is the saved bytes left on the compute device
    (``saved_bytes - offloaded_bytes``), and the title says so.

    Args:
        result: what :func:`benchmark` returned.
        ax: an Axes to draw on (a new figure when None).

    Returns:
        The Axes.

    Example:
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> r = BenchmarkResult("cpu", "CPU", 1, (StrategyResult("none", 0.002, None, 2**20, 0, 0),))
        >>> plot(r).get_xlabel()
        'saved MB left on the device (CPU: no peak memory)'
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    gpu = all(r.peak_bytes is not None for r in result.rows)
    for r in result.rows:
        mem = r.peak_bytes if gpu else r.saved_bytes - r.offloaded_bytes
        ax.scatter(mem / 2**20, r.step_s * 1e3)
        ax.annotate(r.strategy, (mem / 2**20, r.step_s * 1e3), textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("peak device MB" if gpu else "saved MB left on the device (CPU: no peak memory)")
    ax.set_ylabel("ms per step")
    ax.set_title(f"Offload strategies ({result.label}, median of {result.steps} steps)")
    return ax


def hook_seconds(result: BenchmarkResult, identity: str = "identity hooks", base: str = "none") -> float:
    """Seconds one hook call costs: the identity-hook run's extra median time per pack/unpack call.

    Identity hooks copy nothing, so what they add over ``base`` is the calls themselves
    (Python, the autograd engine's detours). Never negative (noise can make it so).

    Example:
        >>> r = BenchmarkResult("cpu", "CPU", 1, (StrategyResult("none", 0.010, None, 0, 0, 0),
        ...     StrategyResult("identity hooks", 0.012, None, 0, 0, 0, packs=10, unpacks=10)))
        >>> round(hook_seconds(r) * 1e6, 3)  # 2 ms over 20 calls
        100.0
    """
    row = result.row(identity)
    calls = row.packs + row.unpacks
    if not calls:
        return 0.0
    return max(row.step_s - result.row(base).step_s, 0.0) / calls
