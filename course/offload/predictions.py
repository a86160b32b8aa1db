"""What the timing model predicts for a benchmark run: the link's measured bandwidth, the
forward's time, and one predicted step time per strategy, beside figures others published.

:func:`copy_bandwidth` times device-to-host and host-to-device copies (pinned and pageable);
:func:`forward_seconds` times the forward; :func:`predict_rows` gives each row of a
:class:`~course.offload.bench.BenchmarkResult` the time :func:`course.offload.model.predict_step`
predicts under that strategy's schedule (:func:`schedule_of`); nothing is fitted to the run.
:data:`PUBLISHED` holds GPU figures read in their sources, for lesson 04 to set beside the model.
"""

from __future__ import annotations

import statistics
import time

import torch

from course.offload.bench import BenchmarkResult, hook_seconds
from course.offload.model import predict_step

__all__ = ["PUBLISHED", "copy_bandwidth", "forward_seconds", "predict_rows", "schedule_of"]


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
