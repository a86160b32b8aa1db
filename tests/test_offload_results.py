"""Stored GPU runs (benchmarks/results/*.json), asked as questions.

Does the format sample load, and does the loader name what a broken file lacks? Is every
file the repository stores a real run in the documented format (never a sample)? Does the
table a lesson prints say where its figures come from? Does the script's record writer
produce what the loader accepts? (The sample in tests/data is a format sample with invented
numbers, marked ``"sample": true``; it is never shown as a measurement.)
"""

import json
from pathlib import Path

import pytest

from course.offload.results import RESULTS_FORMAT, load_results, results_table, stored_results

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "offload_results_sample.json"


def test_does_the_format_sample_load_and_say_it_is_a_sample():
    rec = load_results(SAMPLE)
    assert rec["format"] == RESULTS_FORMAT and rec["sample"] is True
    table = results_table(rec)
    assert table.splitlines()[0].startswith("FORMAT SAMPLE, not a measurement")
    assert all(r["name"] in table for r in rec["strategies"])


@pytest.mark.parametrize(
    "breaks, message",
    [
        (lambda r: r.pop("device"), "missing device"),
        (lambda r: r["device"].pop("cuda"), "device: missing cuda"),
        (lambda r: r["bandwidth_GBs"].pop("h2d_pageable"), "missing h2d_pageable"),
        (lambda r: r["strategies"][1]["step_ms"].pop("max"), "strategies[1].step_ms: missing max"),
        (lambda r: r.__setitem__("format", "something-else/9"), "format"),
        (lambda r: r.__setitem__("strategies", r["strategies"][1:]), "no 'none' strategy"),
    ],
)
def test_does_the_loader_name_what_a_broken_file_lacks(tmp_path, breaks, message):
    rec = json.loads(SAMPLE.read_text())
    breaks(rec)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(rec))
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_results(path)


def test_are_stored_runs_real_runs_in_the_documented_format():
    folder = ROOT / "benchmarks" / "results"
    assert RESULTS_FORMAT in (folder / "README.md").read_text()  # the format is documented beside the runs
    for path in sorted(folder.glob("*.json")):
        rec = load_results(path)
        assert rec["sample"] is False, f"{path.name}: a format sample does not belong in benchmarks/results"
        assert rec["device"]["type"] == "cuda", f"{path.name}: only GPU runs are stored"
    assert all(not r["sample"] for r in stored_results(folder))


def test_are_samples_left_out_of_stored_results(tmp_path):
    (tmp_path / "sample.json").write_text(SAMPLE.read_text())
    real = json.loads(SAMPLE.read_text())
    real["sample"] = False
    (tmp_path / "real.json").write_text(json.dumps(real))
    assert [r["sample"] for r in stored_results(tmp_path)] == [False]
    assert stored_results(tmp_path / "missing") == []


def test_does_the_scripts_record_load(tmp_path):
    """benchmarks/offload.py's writer, fed a small CPU benchmark, makes a file the loader accepts."""
    import importlib.util

    import torch

    from course.offload.bench import BenchmarkResult, StrategyResult

    spec = importlib.util.spec_from_file_location("offload_script", ROOT / "benchmarks" / "offload.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rows = (
        StrategyResult("none", 0.01, None, 100, 0, 0, 5, 5, (0.009, 0.01, 0.011)),
        StrategyResult("identity hooks", 0.011, None, 100, 0, 0, 5, 5, (0.01, 0.011, 0.012)),
        StrategyResult("course", 0.02, None, 100, 100, 200, 5, 5, (0.019, 0.02, 0.021)),
    )
    result = BenchmarkResult("cpu", "CPU", 3, rows)
    bw = {"d2h_pinned": 1e10, "d2h_pageable": 5e9, "h2d_pinned": 1e10, "h2d_pageable": 5e9}
    preds = script.predict_rows(result, 0.004, 2, bw)
    args = type("Args", (), {"layers": 2, "d_model": 64, "seq": 8, "batch": 2})()
    rec = script.record_of(result, 0.004, bw, preds, args, torch.device("cpu"), torch.float32)
    assert rec["format"] == RESULTS_FORMAT and rec["sample"] is False
    out = tmp_path / "x.json"
    out.write_text(json.dumps(rec))
    loaded = load_results(out)
    assert [r["name"] for r in loaded["strategies"]] == ["none", "identity hooks", "course"]
    assert loaded["strategies"][2]["schedule"] == "synchronous"  # a CPU run copies synchronously
    assert loaded["strategies"][2]["moved_MB"] == 200 / 2**20
    assert script.results_path(rec).name.startswith("cpu-")
