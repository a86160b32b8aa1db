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

Stored GPU runs: ``benchmarks/offload.py`` writes one JSON file per run to
``benchmarks/results/`` (the format is :data:`RESULTS_FORMAT`, described in
``benchmarks/results/README.md``); :func:`load_results` reads and checks one file and
:func:`stored_results` lists the repository's (format samples excluded).

For torch's ``save_on_cpu`` a hook "copied" when its result does not share the input's
storage; course's :class:`~course.offload.offloader.Offloader` reports its own counters.

Index: :func:`benchmark`, :func:`plot`, :func:`hook_seconds`, :class:`BenchmarkResult`,
:class:`StrategyResult`, :data:`STRATEGIES`, :data:`RESULTS_FORMAT`, :func:`load_results`,
:func:`stored_results`, :func:`results_table`.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.autograd.graph import save_on_cpu
from torch.multiprocessing.reductions import StorageWeakRef

from course.offload.model import predict_step
from course.offload.offloader import Offloader

__all__ = [
    "RESULTS_FORMAT",
    "STRATEGIES",
    "BenchmarkResult",
    "StrategyResult",
    "benchmark",
    "copy_bandwidth",
    "forward_seconds",
    "hook_seconds",
    "load_results",
    "plot",
    "predict_rows",
    "PUBLISHED",
    "results_table",
    "schedule_of",
    "stored_results",
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
    ctxs, counts = {}, {}
    for name, factory in factories.items():  # warm-up; the first step carries the accounting
        ctx = ctxs[name] = factory()
        if hasattr(ctx, "reset_stats"):  # course's Offloader counts for itself
            ctx.reset_stats()
            _step(model, inputs, ctx, loss_fn)
            st = ctx.stats
            counts[name] = (st.saved_bytes, st.offloaded_bytes, st.moved_bytes, st.packed, st.unpacked)
        else:
            counted = _Counted(ctx)
            _step(model, inputs, counted, loss_fn)
            c = counted
            counts[name] = (c.saved, c.offloaded, c.moved, c.packs, c.unpacks)
        for _ in range(warmup - 1):
            _step(model, inputs, ctx, loss_fn)
        bar.update(warmup)
    times: dict[str, list[float]] = {name: [] for name in factories}
    peaks = dict.fromkeys(factories, 0)
    for _ in range(steps):  # round robin, so a noisy moment hurts every strategy alike
        for name, ctx in ctxs.items():
            if cuda:
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
            times[name].append(_timed(device, lambda: _step(model, inputs, ctx, loss_fn)))  # noqa: B023 (called in this iteration)
            if cuda:
                peaks[name] = max(peaks[name], torch.cuda.max_memory_allocated(device))
            bar.update(1)
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


# --------------------------------------------------------------------------- predictions


def _timed_copy(dst_of, src: torch.Tensor, cuda: bool, repeat: int = 9) -> float:
    """Median bytes per second of ``dst_of().copy_(src)`` (``dst_of`` may allocate every time).

    The median, not the best: on a shared machine the benchmark's own copies see the same
    contention as these."""
    times = []
    for _ in range(repeat + 1):  # the first one warms up
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        dst_of().copy_(src, non_blocking=cuda)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return src.nbytes / statistics.median(times[1:])


def copy_bandwidth(device: torch.device, nbytes: int) -> dict[str, float]:
    """Bytes per second, both directions, into pinned and pageable host memory.

    On the CPU there is no link: "pinned" is a copy into a buffer allocated once (what the
    offloader's pool does), "pageable" a copy into a new buffer each time (allocation and first
    touch included), and both directions are host memcpy.
    """
    cuda = device.type == "cuda"
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=cuda).fill_(1)
    pageable = torch.empty(nbytes, dtype=torch.uint8).fill_(1)
    dev_out = torch.empty_like(dev)
    new_host = lambda: torch.empty(nbytes, dtype=torch.uint8)  # noqa: E731
    return {
        "d2h_pinned": _timed_copy(lambda: pinned, dev, cuda),
        "d2h_pageable": _timed_copy(new_host if not cuda else (lambda: pageable), dev, cuda),
        "h2d_pinned": _timed_copy(lambda: dev_out, pinned, cuda),
        "h2d_pageable": _timed_copy(
            (lambda: torch.empty_like(dev)) if not cuda else (lambda: dev_out), pageable, cuda
        ),
    }


def forward_seconds(model: torch.nn.Module, x: torch.Tensor, steps: int) -> float:
    """Median forward time with the graph built (no offload); its backward is not run."""
    times = []
    for _ in range(steps + 1):
        if x.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = model(x)
        if x.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        del out
    rest = sorted(times[1:])
    return rest[len(rest) // 2]


def schedule_of(name: str, cuda: bool, moved: int) -> str:
    """Which schedule of the timing model a strategy runs: ``none``, ``hooks only`` (copies
    nothing), ``overlapped`` (course's offloader on a GPU: side stream, prefetch) or
    ``synchronous`` (copies on the compute stream: ``save_on_cpu``, ``mode='copy'``, any CPU run)."""
    if name == "none":
        return "none"
    if moved == 0:
        return "hooks only"
    return "overlapped" if (cuda and name == "course") else "synchronous"


def _effective(bw: dict[str, float], out_key: str, back_key: str) -> float:
    """One bandwidth for equal bytes out and back: the harmonic mean of the two directions."""
    return 2.0 / (1.0 / bw[out_key] + 1.0 / bw[back_key])


def predict_rows(
    result: BenchmarkResult, fwd_s: float, layers: int, bw: dict[str, float], prefetch: int = 2
) -> dict[str, tuple[str, float]]:
    """strategy -> (schedule, predicted seconds per step), from measured inputs only.

    Inputs: the ``none`` row's median (split into forward ``fwd_s`` and the rest, backward),
    the hook cost per call (:func:`hook_seconds`, from the ``identity hooks`` row), each
    row's own byte and call counts, and ``bw`` (:func:`copy_bandwidth`'s four figures).
    The schedule follows from the strategy (see :func:`schedule_of`); nothing is fitted.
    Layers are taken as equal (``layers`` of them); no layer is kept on the device, because
    the strategies measured here offload every layer.
    """
    cuda = result.device == "cuda"
    none = result.row("none").step_s
    bwd_s = max(none - fwd_s, 0.0)
    per_call = hook_seconds(result)
    out = {}
    for row in result.rows:
        schedule = schedule_of(row.strategy, cuda, row.moved_bytes)
        if schedule == "none":
            out[row.strategy] = (schedule, none)
            continue
        hook_s = per_call * (row.packs + row.unpacks) / (2 * layers)  # per layer and pass
        pageable = row.strategy == "save_on_cpu" or (not cuda and row.strategy.startswith("save_on_cpu"))
        band = (
            _effective(bw, "d2h_pageable", "h2d_pageable")
            if pageable
            else _effective(bw, "d2h_pinned", "h2d_pinned")
        )
        if not cuda and row.strategy.startswith("course"):  # pooled buffer out, new device memory back
            band = _effective(bw, "d2h_pinned", "h2d_pageable")
        per_layer = [row.moved_bytes / 2 / layers] * layers  # out once and back once, spread evenly
        p = predict_step(
            [fwd_s / layers] * layers,
            [bwd_s / layers] * layers,
            per_layer,
            band,
            hook_s=hook_s,
            in_flight=prefetch,
            keep_last=False,
        )
        out[row.strategy] = (schedule, p.overlapped if schedule == "overlapped" else p.synchronous)
    return out


# --------------------------------------------------------------------------- stored results

#: GPU figures others published, each with its source and setting: published, not measured here.
#: Only figures read in the source itself; the lesson asks learners to set them beside the model.
PUBLISHED: tuple[dict, ...] = (
    {
        "source": "PyTorch tutorial 'Hooks for autograd saved tensors' "
        "(pytorch/tutorials, intermediate_source/autograd_saved_tensors_hooks_tutorial.py)",
        "url": "https://pytorch.org/tutorials/intermediate/autograd_saved_tensors_hooks_tutorial.html",
        "strategy": "save_on_cpu(pin_memory=True) around the whole model",
        "setting": "A100 GPU, ResNet-152, batch size 256",
        "memory": "GPU memory 48 GB -> 5 GB",
        "time": "a 6x slowdown",
        "slowdown": 6.0,
        "schedule": "synchronous",
    },
    {
        "source": "torchtune v0.4.0 release notes (meta-pytorch/torchtune)",
        "url": "https://github.com/meta-pytorch/torchtune/releases/tag/v0.4.0",
        "strategy": "activation offloading with streams, together with activation checkpointing",
        "setting": "Llama3 8B fine-tuning",
        "memory": "roughly 24% less memory",
        "time": "a performance slowdown of under 1%",
        "slowdown": 1.01,  # at most this
        "schedule": "overlapped",
    },
)

#: The ``format`` field of a results file (see ``benchmarks/results/README.md``).
RESULTS_FORMAT = "course-offload-results/1"

_TOP = ("format", "sample", "created", "device", "workload", "bandwidth_GBs", "model", "steps", "strategies")
_DEVICE = ("type", "name", "torch", "cuda")
_WORKLOAD = ("model", "layers", "d_model", "seq", "batch", "dtype")
_BANDWIDTH = ("d2h_pinned", "d2h_pageable", "h2d_pinned", "h2d_pageable")
_STRATEGY = (
    "name",
    "schedule",
    "step_ms",
    "predicted_ms",
    "peak_MB",
    "saved_MB",
    "offloaded_MB",
    "moved_MB",
    "packs",
    "unpacks",
)


def _require(record: dict, keys: Sequence[str], where: str) -> None:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected an object, got {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")


def load_results(path: str | Path) -> dict:
    """Read one results file and check its shape; return the record (a dict).

    Args:
        path: a ``.json`` file written by ``benchmarks/offload.py``.

    Returns:
        The record, unchanged.

    Raises:
        ValueError: a wrong ``format`` or a missing field (the message names it).
    """
    record = json.loads(Path(path).read_text())
    _require(record, _TOP, str(path))
    if record["format"] != RESULTS_FORMAT:
        raise ValueError(f"{path}: format {record['format']!r}, expected {RESULTS_FORMAT!r}")
    _require(record["device"], _DEVICE, f"{path}: device")
    _require(record["workload"], _WORKLOAD, f"{path}: workload")
    _require(record["bandwidth_GBs"], _BANDWIDTH, f"{path}: bandwidth_GBs")
    _require(record["model"], ("forward_ms", "backward_ms", "hook_us_per_call", "layers"), f"{path}: model")
    names = []
    for i, row in enumerate(record["strategies"]):
        _require(row, _STRATEGY, f"{path}: strategies[{i}]")
        _require(row["step_ms"], ("min", "median", "max"), f"{path}: strategies[{i}].step_ms")
        names.append(row["name"])
    if "none" not in names:
        raise ValueError(f"{path}: no 'none' strategy to compare with")
    return record


def stored_results(folder: str | Path | None = None) -> list[dict]:
    """Every stored GPU run in ``folder`` (default: the repository's ``benchmarks/results``),
    oldest first; format samples (``"sample": true``) are left out.

    Returns ``[]`` when the folder does not exist (an installed package has no repository).
    """
    folder = (
        Path(folder) if folder is not None else Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    )
    if not folder.is_dir():
        return []
    records = [load_results(p) for p in sorted(folder.glob("*.json"))]
    return sorted((r for r in records if not r["sample"]), key=lambda r: r["created"])


def results_table(record: dict) -> str:
    """Measured against predicted, one line per strategy, with where the figures come from.

    Example:
        >>> rec = {"sample": True, "created": "2026-01-01", "steps": 3,
        ...        "device": {"type": "cuda", "name": "GPU X", "torch": "2.13.0", "cuda": "13.0"},
        ...        "workload": {"model": "transformer", "layers": 8, "d_model": 1024, "seq": 2048, "batch": 16,
        ...                     "dtype": "bfloat16"},
        ...        "strategies": [{"name": "none", "schedule": "none", "predicted_ms": 10.0, "peak_MB": 100.0,
        ...                        "moved_MB": 0.0, "step_ms": {"min": 9.5, "median": 10.0, "max": 11.0}}]}
        >>> print(results_table(rec))
        FORMAT SAMPLE, not a measurement: GPU X, 2026-01-01, torch 2.13.0, CUDA 13.0, 3 steps
        8 x transformer, d_model=1024, seq=2048, batch=16, bfloat16
        strategy                       schedule      min ms  median ms   max ms  predicted ms  peak MB  moved MB
        none                           none           9.500     10.000   11.000        10.000    100.0       0.0
    """
    dev, w = record["device"], record["workload"]
    where = "FORMAT SAMPLE, not a measurement" if record["sample"] else "measured"
    lines = [
        f"{where}: {dev['name']}, {record['created']}, torch {dev['torch']}, CUDA {dev['cuda']}, "
        f"{record['steps']} steps",
        f"{w['layers']} x {w['model']}, d_model={w['d_model']}, seq={w['seq']}, batch={w['batch']}, {w['dtype']}",
        f"{'strategy':<30} {'schedule':<12} {'min ms':>7} {'median ms':>10} {'max ms':>8} {'predicted ms':>13} "
        f"{'peak MB':>8} {'moved MB':>9}",
    ]
    for r in record["strategies"]:
        t = r["step_ms"]
        peak = "-" if r["peak_MB"] is None else f"{r['peak_MB']:.1f}"
        lines.append(
            f"{r['name']:<30} {r['schedule']:<12} {t['min']:7.3f} {t['median']:10.3f} {t['max']:8.3f} "
            f"{r['predicted_ms']:13.3f} {peak:>8} {r['moved_MB']:9.1f}"
        )
    return "\n".join(lines)
