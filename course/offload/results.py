"""Stored GPU runs of the offload benchmark: one JSON file per run, read and checked here.

``benchmarks/offload.py`` (on a GPU) writes each run to ``benchmarks/results/`` in the format
:data:`RESULTS_FORMAT` (``benchmarks/results/README.md`` describes its fields);
:func:`load_results` reads one file and names the first field that is missing or wrong,
:func:`stored_results` lists the repository's real runs (format samples left out), and
:func:`results_table` prints one run measured against predicted, saying where it came from.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

__all__ = ["RESULTS_FORMAT", "load_results", "results_table", "stored_results"]

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
