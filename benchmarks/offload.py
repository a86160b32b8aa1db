"""Offload strategies against no offload: step-time and peak-memory ratios, and the model's guess.

Run:  python benchmarks/offload.py            (GPU: 8 transformer blocks, ~9 GB of activations)
      python benchmarks/offload.py --quick    (tiny sizes; what CI runs on the CPU)

On a GPU the strategies are torch's ``save_on_cpu`` (plain and pinned) and course's
``Offloader`` (side stream, prefetch, pooled pinned buffers, parameters kept). On the CPU the
same code paths run at small size and every figure is labelled CPU: there is no device
memory to save there, so the ratios say what the hooks cost, not what offloading gains.

Two more tables:
- the issue's MLP (8 x Linear(1024, 1024) + ReLU, batch 64): the share of saved bytes that
  are weights, which ``save_on_cpu`` copies every step and course keeps;
- the timing model (course.offload.model) for course's offloader, from the measured
  forward / backward time, the offloaded bytes and a measured copy bandwidth.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from course.offload import Offloader, benchmark, predict_step
from course.offload.bench import STRATEGIES


def transformer(layers: int, d: int, heads: int, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    block = lambda: torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)  # noqa: E731
    return torch.nn.Sequential(*[block() for _ in range(layers)]).to(device, dtype)


def issue_mlp(device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    mods = [m for _ in range(8) for m in (torch.nn.Linear(1024, 1024), torch.nn.ReLU())]
    return torch.nn.Sequential(*mods).to(device)


def copy_bandwidth(device: torch.device, nbytes: int) -> float:
    """Bytes per second of a device-to-host copy into a pinned buffer (host memcpy on CPU)."""
    cuda = device.type == "cuda"
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty(nbytes, dtype=torch.uint8, pin_memory=cuda)
    best = float("inf")
    for _ in range(3):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        dst.copy_(src, non_blocking=cuda)
        if cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return nbytes / best


def per_copy_seconds(make: Callable[[], Offloader], device: torch.device, n: int = 200) -> float:
    """Fixed cost of one copy through the offloader's hooks (Python, bookkeeping, launch).

    Each of ``n`` fresh 4 KB tensors goes through ``pack_hook`` (one copy out) and
    ``unpack_hook`` (one copy back); the model's ``latency`` is the time per copy.
    """
    off = make()
    off.min_bytes = 0
    tensors = [torch.empty(1024, device=device) for _ in range(n)]  # fresh storages: no aliasing
    with off:  # __enter__ sets up this pass's bookkeeping
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for t in tensors:
            off.unpack_hook(off.pack_hook(t))
        if device.type == "cuda":
            torch.cuda.synchronize()
    return (time.perf_counter() - start) / (2 * n)


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
    return sorted(times[1:])[len(times[1:]) // 2]


def parameter_bytes_saved(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of parameter storages that the forward saves for backward (each counted once)."""
    params = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr in params:
            seen[ptr] = params[ptr]
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(seen.values())


def ratios(result) -> str:
    base = result.row("none")
    lines = [f"{'ratio vs none (' + result.label + ')':<40} {'step time':>10} {'peak memory':>12}"]
    for r in result.rows:
        peak = "-" if r.peak_bytes is None else f"{r.peak_bytes / base.peak_bytes:.2f}"
        lines.append(f"{r.strategy:<40} {r.step_s / base.step_s:10.2f} {peak:>12}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, 2 steps (smoke run)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=1, help="CPU only: torch intra-op threads")
    args = p.parse_args(argv)

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:  # two shared cores: one intra-op thread keeps the CPU figures steadier
        torch.set_num_threads(args.threads)
    if args.quick or not cuda:  # the CPU runs the same code paths at small size
        args.layers, args.d_model, args.seq, args.batch = 2, 64, 32, 4
    steps = args.steps or (2 if args.quick else 5)
    dtype = torch.bfloat16 if cuda else torch.float32
    where = (
        f"GPU ({torch.cuda.get_device_name()})"
        if cuda
        else f"CPU (no GPU: CPU figures, no peak memory, {args.threads} thread(s))"
    )
    print(f"# offload benchmark on {where}")
    print(f"# {args.layers} transformer blocks, d_model={args.d_model}, seq={args.seq}, batch={args.batch}, {dtype}")

    model = transformer(args.layers, args.d_model, args.d_model // 64 or 1, device, dtype)
    x = torch.randn(args.batch, args.seq, args.d_model, device=device, dtype=dtype)
    strategies = dict(STRATEGIES)
    if not cuda:  # course's default is passthrough on the CPU; also run the copying path
        strategies["course(mode='copy')"] = lambda: Offloader(device_type="cpu", mode="copy", min_bytes=1024)
    strategies["course"] = lambda: Offloader(modules=[model]) if cuda else Offloader(device_type="cpu")
    result = benchmark(model, [x], strategies=strategies, steps=steps, warmup=2)
    print(result.table())
    print()
    print(ratios(result))

    # The timing model for the strategy that really copies here.
    name = "course" if cuda else "course(mode='copy')"
    off = strategies[name]()
    off.reset_stats()
    with off:  # one more forward to count the host copies per layer
        loss = model(x).float().sum()
    loss.backward()
    st = off.stats
    copies = st.packed - st.aliased - st.kept_param - st.kept_small - st.kept_excluded - st.kept_other
    n = args.layers
    offloaded = result.row(name).offloaded_bytes
    fwd = forward_seconds(model, x, steps)
    bwd = max(result.row("none").step_s - fwd, 0.0)
    bw = copy_bandwidth(device, max(offloaded // n, 1 << 20))
    latency = per_copy_seconds(strategies[name], device) * copies / n  # per layer and direction
    pred = predict_step([fwd / n] * n, [bwd / n] * n, [offloaded / n] * n, bandwidth=bw, latency=latency)
    measured = result.row(name).step_s / result.row("none").step_s
    print()
    print(f"# model for {name} ({where}): {offloaded / 2**20:.1f} MB offloaded in {copies} copies, "
          f"copy bandwidth {bw / 1e9:.1f} GB/s, {latency / (copies / n) * 1e6:.1f} us per copy, "
          f"forward {fwd * 1e3:.2f} ms, backward {bwd * 1e3:.2f} ms (no offload)")
    print(f"predicted: {pred}")
    print("applies:   " + ("overlapped / pipelined (side stream)" if cuda else "synchronous (CPU copies block)"))
    print(f"measured:  x{measured:.2f}")

    # The issue's figures: parameters in save_on_cpu's saved bytes.
    mlp = issue_mlp(device)
    xm = torch.randn(64, 1024, device=device)
    mlp_strategies = {k: STRATEGIES[k] for k in ("none", "save_on_cpu", "save_on_cpu(pin_memory=True)", "course")}
    if not cuda:  # what course would copy: activations only (weights kept, aliases once)
        name = "course(mode='copy', min_bytes=0)"
        mlp_strategies[name] = lambda: Offloader(device_type="cpu", mode="copy", min_bytes=0)
    r = benchmark(mlp, [xm], steps=steps, warmup=2, progress=False, strategies=mlp_strategies)
    saved = r.row("save_on_cpu").saved_bytes
    weights_saved = parameter_bytes_saved(mlp, xm)
    print()
    print(f"# issue MLP: 8 x Linear(1024, 1024) + ReLU, batch 64 ({r.label})")
    print(r.table())
    print(f"weights are {100 * weights_saved / saved:.1f}% of saved bytes")
    for row in r.rows:
        print(f"{row.strategy:<34} copies {row.moved_bytes / saved:.2f} x the saved bytes per step")


if __name__ == "__main__":
    main()
