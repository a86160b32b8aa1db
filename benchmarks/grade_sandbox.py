"""What the sandbox costs ``course grade``: lesson 00 graded with and without bubblewrap, alternated.

``course grade`` runs learner code in bubblewrap by default wherever it can
(:mod:`course.grading.sandbox`); ``--no-sandbox`` runs it under supervision alone. The issue's
target: the default is within 10% of ``--no-sandbox`` on lesson 00, same machine, same run.
A shared machine's load drifts, so the two commands alternate (A, B, A, B, ...) and each run
is timed from outside, as a learner or CI sees it; the load average is printed before and after.

    python benchmarks/grade_sandbox.py             # 6 runs each, solutions/00_warmup.ipynb
    python benchmarks/grade_sandbox.py --runs 10 --notebook notebooks/00_warmup.ipynb
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = {"sandbox (default)": [], "--no-sandbox": ["--no-sandbox"]}


def _seconds(notebook: Path, flags: list[str]) -> float:
    """Wall seconds of one grade. (Not CPU: the processes in bubblewrap's PID namespace are
    not counted in this process's ``RUSAGE_CHILDREN``, so the two would not compare.)"""
    command = [sys.executable, "-m", "course", "grade", str(notebook), "-q", *flags]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1) or (not flags and "WITHOUT isolation" in done.stderr):
        raise SystemExit(f"{' '.join(command[3:])}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    return seconds


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="runs of each variant (default 6)")
    parser.add_argument("--notebook", type=Path, default=ROOT / "solutions" / "00_warmup.ipynb")
    args = parser.parse_args(argv)
    print(f"load average before: {_load()}")
    for flags in VARIANTS.values():  # one untimed run each: caches, bytecode, the page cache
        _seconds(args.notebook, flags)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for i in range(args.runs):
        for name, flags in VARIANTS.items() if i % 2 == 0 else reversed(VARIANTS.items()):
            times[name].append(_seconds(args.notebook, flags))
    for name, seen in times.items():
        spread = f"{statistics.stdev(seen):.2f}" if len(seen) > 1 else "-"
        print(
            f"{name:<18} mean {statistics.mean(seen):6.2f} s  median {statistics.median(seen):6.2f} s"
            f"  sd {spread} s  ({' '.join(f'{s:.2f}' for s in seen)})"
        )
    sandboxed, plain = (statistics.mean(times[name]) for name in VARIANTS)
    print(f"ratio sandbox / --no-sandbox: {sandboxed / plain:.3f} (target: at most 1.10)")
    print(f"load average after: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
