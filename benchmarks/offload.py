"""Offload strategies against no offload: step time, memory, bytes moved, and the model's prediction.

Run:  python benchmarks/offload.py            (GPU: 8 transformer blocks, writes benchmarks/results/<gpu>-<date>.json)
      python benchmarks/offload.py --quick    (tiny sizes, 3 steps: a smoke run, what CI can afford)
      python benchmarks/offload.py --steps 30 (CPU: two model sizes, predicted against measured)

Strategies: no hooks; identity hooks (copy nothing: their extra time is the price of the hook
calls, the timing model's ``hook_s``); torch's ``save_on_cpu`` plain and pinned; course's
``Offloader`` (on a GPU: side stream, prefetch, pooled pinned buffers, parameters kept) and
its synchronous ``mode='copy'``.

For every strategy the script prints, per step, the bytes offloaded (distinct storages
copied out) and the bytes moved (every copy, both directions), min / median / max step time,
and what ``course.offload.model`` predicts from measured inputs only: the no-offload forward
and backward times, the hook cost per call, the copy bandwidth, and the strategy's own byte
and call counts. Which schedule applies is a property of the strategy, not a fit:

- ``save_on_cpu`` (both) and course's ``mode='copy'``: copies on the compute stream
  (synchronous): every copy adds its time;
- course's ``Offloader`` on a GPU: a side stream with ``prefetch`` fetches ahead (the model's
  ``in_flight``);
- a strategy that copies nothing: the hook calls alone.

On the CPU there is no device memory to save and no link to cross: a ratio there says what
the hooks and the host copies cost, not what offloading gains on a GPU. On a GPU the run is
written to ``benchmarks/results/`` (format: ``benchmarks/results/README.md``) for lesson 4.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from pathlib import Path

import torch

from course.offload import Offloader, benchmark
from course.offload.bench import (
    STRATEGIES,
    BenchmarkResult,
    hook_seconds,
)
from course.offload.model import MB
from course.offload.predictions import copy_bandwidth, forward_seconds, predict_rows
from course.offload.results import RESULTS_FORMAT, load_results

RESULTS = Path(__file__).resolve().parent / "results"


def transformer(layers: int, d: int, heads: int, seq: int, device: torch.device, dtype: torch.dtype):
    torch.manual_seed(0)
    block = lambda: torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)  # noqa: E731
    return torch.nn.Sequential(*[block() for _ in range(layers)]).to(device, dtype)


def strategies_for(model: torch.nn.Module, cuda: bool) -> dict:
    s = {k: STRATEGIES[k] for k in ("none", "identity hooks", "save_on_cpu", "save_on_cpu(pin_memory=True)")}
    if cuda:
        s["course"] = lambda: Offloader(modules=[model])  # stream mode, prefetch 2, pinned pool
        s["course(mode='copy')"] = lambda: Offloader(modules=[model], mode="copy")
    else:
        s["course"] = lambda: Offloader(device_type="cpu")  # passthrough: no GPU to free
        s["course(mode='copy')"] = lambda: Offloader(device_type="cpu", mode="copy", min_bytes=1024)
    return s


def report(result: BenchmarkResult, preds: dict[str, tuple[str, float]]) -> str:
    base = result.row("none").step_s
    lines = [
        f"{'strategy (' + result.label + ')':<30} {'offloaded MB':>12} {'moved MB':>9} {'packs':>6} "
        f"{'unpacks':>7} {'schedule':<12} {'measured x':>10} {'(of mins)':>9} {'predicted x':>11} {'error':>7}"
    ]
    base_min = result.row("none").spread[0]
    for r in result.rows:
        schedule, pred = preds[r.strategy]
        err = (pred / base) / (r.step_s / base) - 1
        lines.append(
            f"{r.strategy:<30} {r.offloaded_bytes / MB:12.3f} {r.moved_bytes / MB:9.3f} {r.packs:6d} "
            f"{r.unpacks:7d} {schedule:<12} {r.step_s / base:10.2f} {r.spread[0] / base_min:9.2f} "
            f"{pred / base:11.2f} {err:+7.1%}"
        )
    lines.append("measured x: ratio of medians to none's (error is against it); (of mins): ratio of minima")
    return "\n".join(lines)


def size_inputs(layers: int, d: int, seq: int, batch: int, device: torch.device, dtype: torch.dtype):
    model = transformer(layers, d, max(d // 64, 1), seq, device, dtype)
    return model, torch.randn(batch, seq, d, device=device, dtype=dtype)


def run_size(layers: int, d: int, seq: int, batch: int, steps: int, device: torch.device, dtype: torch.dtype):
    cuda = device.type == "cuda"
    model, x = size_inputs(layers, d, seq, batch, device, dtype)
    result = benchmark(
        model, [x], strategies=strategies_for(model, cuda), steps=steps, warmup=2, progress=False
    )
    fwd = forward_seconds(model, x, steps)
    row = max(result.rows, key=lambda r: r.offloaded_bytes)  # the typical copy: a mean storage
    bw = copy_bandwidth(device, max(row.moved_bytes // max(row.packs + row.unpacks, 1), 1 << 16))
    preds = predict_rows(result, fwd, layers, bw)
    return result, fwd, bw, preds


def version_check_line(model: torch.nn.Module, x: torch.Tensor, steps: int, cuda: bool) -> str:
    """What ``check_versions`` costs: the same Offloader with and without it, per saved tensor."""
    kw = {"modules": [model]} if cuda else {"device_type": "cpu", "mode": "copy", "min_bytes": 1024}
    on_off = {"checked": lambda: Offloader(**kw), "unchecked": lambda: Offloader(check_versions=False, **kw)}
    r = benchmark(model, [x], strategies=on_off, steps=steps, warmup=2, progress=False)
    on, off = r.row("checked"), r.row("unchecked")
    per = (on.step_s - off.step_s) / max(on.packs, 1)
    return (
        f"version check (check_versions=True vs False, {r.label}): {per * 1e6:+.2f} us per saved tensor "
        f"({on.packs} packs), step x{on.step_s / off.step_s:.3f} (medians of {steps})"
    )


def record_of(result, fwd, bw, preds, args, device, dtype) -> dict:
    """The results file (see benchmarks/results/README.md): everything a lesson needs to compare."""
    none = result.row("none").step_s
    rows = []
    for r in result.rows:
        lo, mid, hi = r.spread
        rows.append(
            {
                "name": r.strategy,
                "schedule": preds[r.strategy][0],
                "step_ms": {"min": lo * 1e3, "median": mid * 1e3, "max": hi * 1e3},
                "predicted_ms": preds[r.strategy][1] * 1e3,
                "peak_MB": None if r.peak_bytes is None else r.peak_bytes / MB,
                "saved_MB": r.saved_bytes / MB,
                "offloaded_MB": r.offloaded_bytes / MB,
                "moved_MB": r.moved_bytes / MB,
                "packs": r.packs,
                "unpacks": r.unpacks,
            }
        )
    cuda = device.type == "cuda"
    return {
        "format": RESULTS_FORMAT,
        "sample": False,
        "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": {
            "type": device.type,
            "name": torch.cuda.get_device_name(device) if cuda else "CPU",
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
        },
        "workload": {
            "model": "TransformerEncoderLayer",
            "layers": args.layers,
            "d_model": args.d_model,
            "seq": args.seq,
            "batch": args.batch,
            "dtype": str(dtype).removeprefix("torch."),
        },
        "bandwidth_GBs": {k: v / 1e9 for k, v in bw.items()},
        "model": {
            "layers": args.layers,
            "forward_ms": fwd * 1e3,
            "backward_ms": (none - fwd) * 1e3,
            "hook_us_per_call": hook_seconds(result) * 1e6,
            "keep_last": False,
            "in_flight": 2,
        },
        "steps": result.steps,
        "strategies": rows,
    }


def results_path(record: dict) -> Path:
    name = re.sub(r"[^a-z0-9]+", "-", record["device"]["name"].lower()).strip("-")
    return RESULTS / f"{name}-{record['created'][:10]}.json"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, 3 steps (smoke run)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per strategy (GPU 20, CPU 30)")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=1, help="CPU only: torch intra-op threads")
    p.add_argument("--no-save", action="store_true", help="GPU only: do not write benchmarks/results/*.json")
    args = p.parse_args(argv)

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    if not cuda:  # shared cores: one intra-op thread keeps the CPU figures steadier
        torch.set_num_threads(args.threads)
    steps = args.steps or (3 if args.quick else (20 if cuda else 30))
    if cuda and not args.quick:
        sizes = [(args.layers, args.d_model, args.seq, args.batch)]
    elif args.quick:
        sizes = [(2, 64, 32, 4)]
    else:  # two CPU sizes, small enough for a shared machine
        sizes = [(4, 128, 64, 8), (4, 256, 128, 8)]
    where = f"GPU {torch.cuda.get_device_name()}" if cuda else f"CPU ({args.threads} thread(s); no GPU)"
    print(f"# offload benchmark on {where}, torch {torch.__version__}, CUDA {torch.version.cuda}, {dtype}")
    for layers, d, seq, batch in sizes:
        print(f"\n# {layers} transformer blocks, d_model={d}, seq={seq}, batch={batch}, {steps} steps")
        result, fwd, bw, preds = run_size(layers, d, seq, batch, steps, device, dtype)
        print(result.table())
        print(
            f"forward {fwd * 1e3:.2f} ms, backward {(result.row('none').step_s - fwd) * 1e3:.2f} ms (no offload); "
            f"hook cost {hook_seconds(result) * 1e6:.2f} us per call (identity hooks)"
        )
        print("copy bandwidth GB/s: " + ", ".join(f"{k} {v / 1e9:.1f}" for k, v in bw.items()))
        print(report(result, preds))
        print(version_check_line(*size_inputs(layers, d, seq, batch, device, dtype), steps, cuda))
        if cuda and not args.quick and not args.no_save:
            args.layers, args.d_model, args.seq, args.batch = layers, d, seq, batch
            rec = record_of(result, fwd, bw, preds, args, device, dtype)
            path = results_path(rec)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(rec, indent=1) + "\n")
            load_results(path)  # the file we wrote reads back in the documented format
            print(f"wrote {path.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
