"""How much slower is course.checkpoint than torch.utils.checkpoint (non-reentrant)?

One process, the same model and batch, each transformer block checkpointed on its own, one
forward + backward per step, dropout on (so the RNG is stashed and restored each time). The
variants run interleaved (torch, course, course, torch, ...) so the machine's other load hits
both alike. We print the median step time of each, the median of the paired ratios
course/torch (goal: within 1.05), the ratio of the best steps, and, for scale, the step
without any checkpoint.

Variants:
  plain  checkpoint(block, x, use_reentrant=False)
  sac    the same with create_selective_checkpoint_contexts([aten.mm.default, aten.addmm.default])
         (matmuls cached, the rest recomputed)

Sizes: a toy (2 blocks, d_model=64) and the one asked for (width 1024, a few blocks; on the
CPU a short sequence so it finishes in minutes). On a GPU the sizes grow (--seq, --batch).

Usage:  python benchmarks/checkpoint.py [--quick] [--repeats N] [--layers N] [--seq N] [--batch N] [--threads N]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch
import torch.utils.checkpoint as torch_ckpt

import course.checkpoint as course_ckpt

LIBS = {"torch": torch_ckpt, "course": course_ckpt}
SAVED_OPS = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default]


def blocks(layers: int, d: int, device: torch.device) -> torch.nn.ModuleList:
    torch.manual_seed(0)
    make = lambda: torch.nn.TransformerEncoderLayer(d, max(d // 64, 1), 4 * d, dropout=0.1, batch_first=True)  # noqa: E731
    return torch.nn.ModuleList(make() for _ in range(layers)).to(device)


def forward_backward(model: torch.nn.ModuleList, x: torch.Tensor, lib, variant: str) -> None:
    """One training step's forward + backward; ``lib`` None means no checkpoint."""
    h = x
    for block in model:
        if lib is None:
            h = block(h)
        elif variant == "sac":
            ctx = functools.partial(lib.create_selective_checkpoint_contexts, SAVED_OPS)
            h = lib.checkpoint(block, h, use_reentrant=False, context_fn=ctx)
        else:
            h = lib.checkpoint(block, h, use_reentrant=False)
    h.sum().backward()


def step_fn(model: torch.nn.ModuleList, x: torch.Tensor, lib, variant: str):
    def step() -> None:
        forward_backward(model, x, lib, variant)
        model.zero_grad(set_to_none=True)

    return step


def timed(step, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def check_same_gradients(model, x, variant: str) -> None:
    """Before timing: torch's and course's step give the same gradients from the same seed."""
    grads = {}
    for name, lib in LIBS.items():
        torch.manual_seed(1)
        h = x.detach().requires_grad_()
        forward_backward(model, h, lib, variant)
        grads[name] = [h.grad] + [p.grad for p in model.parameters()]
        model.zero_grad(set_to_none=True)
    assert all(torch.equal(a, b) for a, b in zip(grads["torch"], grads["course"], strict=True)), variant


def run(layers: int, d: int, seq: int, batch: int, repeats: int, device: torch.device) -> list[str]:
    model = blocks(layers, d, device)
    x = torch.randn(batch, seq, d, device=device, requires_grad=True)
    lines = [
        f"{'variant':<8} {'none ms':>9} {'torch ms':>9} {'course ms':>10} {'course/torch':>13} {'(of mins)':>10}"
    ]
    for variant in ("plain", "sac"):
        check_same_gradients(model, x, variant)
        steps = {"none": step_fn(model, x, None, variant)}
        steps.update({name: step_fn(model, x, lib, variant) for name, lib in LIBS.items()})
        for step in steps.values():  # warm-up
            step()
        times: dict[str, list[float]] = {k: [] for k in steps}
        for i in range(repeats):
            order = ["torch", "course"] if i % 2 == 0 else ["course", "torch"]
            for name in ["none", *order]:
                times[name].append(timed(steps[name], device))
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = statistics.median(c / t for c, t in zip(times["course"], times["torch"]))
        best = min(times["course"]) / min(times["torch"])
        lines.append(
            f"{variant:<8} {med['none'] * 1e3:9.1f} {med['torch'] * 1e3:9.1f} {med['course'] * 1e3:10.1f} "
            f"{ratio:13.3f} {best:10.3f}"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the toy size only, 3 repeats (smoke run)")
    p.add_argument(
        "--repeats", type=int, default=None, help="timed steps per variant (default 50 toy, 11 wide)"
    )
    p.add_argument("--layers", type=int, default=2, help="blocks at width 1024")
    p.add_argument("--seq", type=int, default=None, help="sequence length at width 1024 (CPU 32, GPU 1024)")
    p.add_argument("--batch", type=int, default=None, help="batch at width 1024 (CPU 2, GPU 8)")
    p.add_argument("--threads", type=int, default=1, help="CPU only: torch intra-op threads")
    args = p.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:
        torch.set_num_threads(args.threads)
    where = f"GPU {torch.cuda.get_device_name()}" if cuda else f"CPU ({args.threads} thread(s); no GPU)"
    print(f"# checkpoint benchmark on {where}, torch {torch.__version__}, float32, dropout 0.1")
    sizes = [("toy", 2, 64, 16, 4, args.repeats or (3 if args.quick else 50))]
    if not args.quick:
        seq, batch = args.seq or (1024 if cuda else 32), args.batch or (8 if cuda else 2)
        sizes.append(("wide", args.layers, 1024, seq, batch, args.repeats or 11))
    for label, layers, d, seq, batch, repeats in sizes:
        print(
            f"\n# {label}: {layers} blocks, d_model={d}, seq={seq}, batch={batch}, {repeats} repeats (median)"
        )
        print("\n".join(run(layers, d, seq, batch, repeats, device)))
    print("\ncourse/torch: median of paired ratios (goal <= 1.05); (of mins): ratio of the best steps")


if __name__ == "__main__":
    main()
