"""Export time: course.joint.export_joint against torch's aot_export_joint_with_descriptors.

Three timings per model, run in this process, interleaved (the order flips every repeat) and
repeated after one warm-up each:

* torch: ``aot_export_joint_with_descriptors`` (it builds no stages and does not partition);
* course export: ``export_joint`` alone: the metadata pass and the joint (the teaching
  stages are built on first access, NOTE [Stages on demand] in course/aot/stage.py);
* course export + stages: ``export_joint`` and then ``.stages``: all seven stages, including
  the partitioner, work torch's call does not do.

We print median seconds, both ratios against the same torch figure, then where course's
time goes (JointWithDescriptors.timings of the export + stages run). No assertion: this prints.

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


def _export_and_stages(mod, args):
    jd = export_joint(mod, args)
    jd.stages  # noqa: B018 (read for its effect)
    return jd


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
    who_all = ("torch", "course", "course+stages")
    times: dict[str, dict[str, list[float]]] = {n: {w: [] for w in who_all} for n in models}
    stage_times: dict[str, dict[str, list[float]]] = {n: {} for n in models}
    for mod, args in [] if opts.quick else models.values():  # warm-up: first-call caches
        _torch_export(mod, args)
        _export_and_stages(mod, args)
    for r in range(repeats):
        for name, (mod, args) in models.items():
            order = [
                ("torch", _torch_export),
                ("course", export_joint),
                ("course+stages", _export_and_stages),
            ]
            for who, f in order if r % 2 == 0 else order[::-1]:
                dt, out = _timed(f, mod, args)
                times[name][who].append(dt)
                if who == "course+stages":
                    for stage, s in out.timings.items():
                        stage_times[name].setdefault(stage, []).append(s)
    print(f"export time, median of {repeats} interleaved runs (seconds)")
    print("  export:   course's export_joint alone, against torch's export")
    print("  +stages:  course's export_joint then .stages (all 7, partitioner included),")
    print("            against the same torch export (torch builds no stages)")
    print(
        f"{'model':<26}{'torch':>9}{'export':>9}{'+stages':>9}"
        f"{'export course/torch':>21}{'+stages course/torch':>22}"
    )
    for name, t in times.items():
        mt, mc, ms = (statistics.median(t[w]) for w in who_all)
        print(f"{name:<26}{mt:>9.4f}{mc:>9.4f}{ms:>9.4f}{mc / mt:>20.2f}x{ms / mt:>21.2f}x")
    print(
        "\nwhere course's time goes, export + stages (median seconds per step; metadata,"
        "\ntraced_joint and descriptors are the export, the rest are stages built on demand)"
    )
    for name, per_stage in stage_times.items():
        parts = ", ".join(f"{s} {statistics.median(v):.4f}" for s, v in per_stage.items())
        print(f"{name}: {parts}")


if __name__ == "__main__":
    main()
