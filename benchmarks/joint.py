"""Export time: course.joint.export_joint against torch's aot_export_joint_with_descriptors.

Both run in this process, interleaved (torch, course, course, torch, ...) and repeated, after
one warm-up each; we print median seconds and the ratio course/torch, then where course's
time goes, stage by stage (JointWithDescriptors.timings). No assertion: this prints.

    python benchmarks/joint.py            # 15 repeats
    python benchmarks/joint.py --quick    # 1 repeat, no warm-up: a smoke test, not a figure
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import warnings

import torch
from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

from course.joint import export_joint


def _models() -> dict[str, tuple[torch.nn.Module, tuple]]:
    torch.manual_seed(0)
    mlp = [m for _ in range(8) for m in (torch.nn.Linear(64, 64), torch.nn.ReLU())]
    return {
        "Linear": (torch.nn.Linear(64, 64), (torch.randn(32, 64),)),
        "MLP8": (torch.nn.Sequential(*mlp), (torch.randn(32, 64),)),
        "TransformerEncoderLayer": (
            torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, batch_first=True),
            (torch.randn(8, 16, 64),),
        ),
        "Linear+BatchNorm1d": (
            torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.BatchNorm1d(64)),
            (torch.randn(32, 64),),
        ),
    }


def _torch_export(mod, args):
    with contextlib.ExitStack() as stack:
        return aot_export_joint_with_descriptors(stack, mod, args)


def _timed(f, *a):
    t0 = time.perf_counter()
    out = f(*a)
    return time.perf_counter() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 repeat (smoke test)")
    parser.add_argument("--repeats", type=int, default=15)
    opts = parser.parse_args()
    repeats = 1 if opts.quick else opts.repeats
    warnings.filterwarnings("ignore")  # TransformerEncoderLayer's nested-tensor note
    models = _models()
    times: dict[str, dict[str, list[float]]] = {n: {"torch": [], "course": []} for n in models}
    stage_times: dict[str, dict[str, list[float]]] = {n: {} for n in models}
    for mod, args in [] if opts.quick else models.values():  # warm-up: first-call caches
        _torch_export(mod, args)
        export_joint(mod, args)
    for r in range(repeats):
        for name, (mod, args) in models.items():
            order = [("torch", _torch_export), ("course", export_joint)]
            for who, f in order if r % 2 == 0 else order[::-1]:
                dt, out = _timed(f, mod, args)
                times[name][who].append(dt)
                if who == "course":
                    for stage, s in out.timings.items():
                        stage_times[name].setdefault(stage, []).append(s)
    print(f"export time, median of {repeats} interleaved runs (seconds)")
    print(f"{'model':<26}{'torch':>10}{'course':>10}{'course/torch':>14}")
    for name, t in times.items():
        mt, mc = statistics.median(t["torch"]), statistics.median(t["course"])
        print(f"{name:<26}{mt:>10.4f}{mc:>10.4f}{mc / mt:>13.2f}x")
    print("\nwhere course's time goes (median seconds per stage)")
    for name, per_stage in stage_times.items():
        parts = ", ".join(f"{s} {statistics.median(v):.4f}" for s, v in per_stage.items())
        print(f"{name}: {parts}")


if __name__ == "__main__":
    main()
