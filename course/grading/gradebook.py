"""`course gradebook`: one table for a whole class, and the misconceptions the class met.

``ROSTER`` holds one folder per learner (the folder's name is the learner). Each folder holds
that learner's notebooks, or the ``course grade --json`` reports a CI job made for them (a
file of format ``course-grade/1``), or both (reports win: nothing is graded again)::

    roster/
      ada/      00_warmup.ipynb 01_autograd_graph.ipynb ...
      grace/    report.json                     # from `course grade grace-repo --json report.json`
      linus/                                    # empty: listed, with zeros and a reason

Notebooks are graded by ``course grade --no-run`` itself, one learner at a time in a fresh
process (``-j N`` learners at once), so a gradebook has exactly the grader's isolation and
timeouts; it skips the headless "Run All", which never changes a score.
Its reports are cached in ``ROSTER/.course-gradebook/`` under the hash of the learner's
notebooks, the lessons chosen and the grader's fingerprint (version and checks): run it again after every push and only changed learners
are graded.

What it writes:

- stdout: per exercise, the pass rate and the misconceptions met (the known wrong answer a
  learner's answer matched, with its hint), most common first; learners who did not attempt
  the exercise are counted apart;
- ``--csv OUT``: one row per learner (``learner`` first), one column per exercise id with the
  points scored, then ``total``, ``max`` and ``note`` (why a row is empty);
- ``--json OUT``: the same as stdout, as data (format ``course-gradebook/1``);
- ``--html OUT``: the report with a bar chart of pass rates, readable without Jupyter.

A misconception is recognised by the hint in the report: the grader gives a wrong answer the
hint of the known wrong answer it behaves like (``course.checks``), and the gradebook looks
that hint up in the exercise's catalogue.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import html
import io
import json
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Learner", "Report", "build", "collect", "main"]

CACHE_DIR = ".course-gradebook"
REPORT_FORMAT = "course-grade/1"


@dataclass
class Learner:
    """One learner's results: ``{exercise id: exercise entry of the grade report}``."""

    name: str
    exercises: dict[str, dict] = field(default_factory=dict)
    note: str = ""  # why the row is empty or partial ("no notebooks", "unreadable: ...")


@dataclass
class Report:
    learners: list[Learner]
    exercise_ids: list[str]
    points: dict[str, int]
    per_exercise: list[dict]

    def to_json(self) -> dict:
        return {
            "format": "course-gradebook/1",
            "learners": [
                {"learner": x.name, "note": x.note,
                 "scores": {i: x.exercises.get(i, {}).get("score", 0) for i in self.exercise_ids},
                 "total": total(x, self.exercise_ids), "max": sum(self.points.values())}
                for x in self.learners
            ],
            "exercises": self.per_exercise,
        }


def total(learner: Learner, ids: list[str]) -> float:
    return sum(learner.exercises.get(i, {}).get("score", 0) for i in ids)


# --- reading a roster -----------------------------------------------------------------------


def _exercises(lessons: set[int] | None) -> list:
    from course import checks

    checks.load_all()
    return [ex for ex in checks.all_exercises() if lessons is None or ex.lesson in lessons]


def _lesson_of_name(name: str) -> int | None:
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def _notebooks(folder: Path, lessons: set[int] | None) -> list[Path]:
    found = sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith(".") and ".updated" not in p.name)
    return [p for p in found if lessons is None or _lesson_of_name(p.name) in lessons]


def _reports(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("format") == REPORT_FORMAT:
            out.append(data)
    return out


def _fingerprint(notebooks: list[Path], lessons: set[int] | None = None) -> str:
    from course.grading.progress import grader_fingerprint

    # The grader's own fingerprint (version and the checks' code): a fixed check grades again.
    chosen = "all" if lessons is None else ",".join(map(str, sorted(lessons)))
    h = hashlib.sha256(f"{grader_fingerprint()} lessons {chosen}".encode())
    for p in notebooks:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:24]


def _grade(folder: Path, notebooks: list[Path], cache: Path, timeout: float, quiet: bool,
           lessons: set[int] | None = None) -> dict:
    """The ``course grade --json`` report of ``notebooks``, from the cache or a fresh run."""
    key = cache / f"{folder.name}-{_fingerprint(notebooks, lessons)}.json"
    if key.is_file():
        try:
            return json.loads(key.read_text(encoding="utf-8"))
        except ValueError:
            pass  # a half-written cache entry: grade again
    with tempfile.TemporaryDirectory(prefix="course-gradebook-") as tmp:
        work = Path(tmp) / folder.name
        work.mkdir()
        for p in notebooks:  # only the selected lessons, under their own names
            (work / p.name).write_bytes(p.read_bytes())
        out = Path(tmp) / "report.json"
        # --no-run: a gradebook wants scores, and a score never depends on the headless "Run All"
        # (a kernel per notebook, the larger part of grading a lesson).
        cmd = [sys.executable, "-m", "course", "grade", str(work), "--json", str(out), "-q", "--no-run",
               "--timeout", str(timeout)]
        if lessons is not None:  # only their checks are prepared (and missing ones reported)
            cmd += ["--lessons", ",".join(f"{n:02d}" for n in sorted(lessons))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if not out.is_file():
            last = (proc.stderr.strip().splitlines() or ["no report"])[-1]
            raise RuntimeError(f"course grade failed (exit {proc.returncode}): {last}")
        report = json.loads(out.read_text(encoding="utf-8"))
    cache.mkdir(exist_ok=True)
    partial = key.with_suffix(".tmp")
    partial.write_text(json.dumps(report), encoding="utf-8")
    partial.replace(key)  # atomic: a killed run never leaves a half entry under the key
    if not quiet:
        print(f"graded {folder.name}", file=sys.stderr, flush=True)
    return report


def _learner(folder: Path, lessons: set[int] | None, cache: Path, timeout: float, quiet: bool) -> Learner:
    learner = Learner(folder.name)
    reports = _reports(folder)
    if not reports:
        notebooks = _notebooks(folder, lessons)
        if not notebooks:
            learner.note = "no notebooks"
            return learner
        try:
            reports = [_grade(folder, notebooks, cache, timeout, quiet, lessons)]
        except (OSError, RuntimeError, ValueError) as e:
            learner.note = f"not graded: {e}"
            return learner
    notes = []
    for report in reports:
        for nb in report.get("notebooks", []):
            if nb.get("error"):
                notes.append(f"{Path(str(nb.get('path', '?'))).name}: {nb['error']}")
            for entry in nb.get("exercises", []):
                if isinstance(entry, dict) and "id" in entry:
                    learner.exercises[str(entry["id"])] = entry
    learner.note = "; ".join(notes)
    return learner


def collect(roster: Path, lessons: set[int] | None = None, jobs: int = 1, timeout: float = 300,
            quiet: bool = True) -> list[Learner]:
    """Every learner folder of ``roster``, in name order, graded or read from their reports."""
    folders = sorted(p for p in roster.iterdir() if p.is_dir() and not p.name.startswith("."))
    cache = roster / CACHE_DIR
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda f: _learner(f, lessons, cache, timeout, quiet), folders))


# --- the report -------------------------------------------------------------------------------


def build(learners: list[Learner], lessons: set[int] | None = None) -> Report:
    """Pass rates and misconceptions per exercise, from the learners' grade entries."""
    exercises = _exercises(lessons)
    ids = [ex.id for ex in exercises]
    per_exercise = []
    for ex in exercises:
        statuses = Counter(x.exercises.get(ex.id, {}).get("status", "not attempted") for x in learners)
        known = {w.hint for w in ex.wrong}
        met = Counter(x.exercises[ex.id].get("hint", "") for x in learners
                      if x.exercises.get(ex.id, {}).get("status") in ("failed", "error")
                      and x.exercises[ex.id].get("hint", "") in known)
        attempted = len(learners) - statuses["not attempted"]
        per_exercise.append({
            "id": ex.id, "name": ex.name, "title": ex.title, "points": ex.points,
            "learners": len(learners), "attempted": attempted, "not_attempted": statuses["not attempted"],
            "passed": statuses["passed"], "failed": statuses["failed"], "error": statuses["error"],
            "pass_rate": statuses["passed"] / len(learners) if learners else 0.0,
            "misconceptions": [{"hint": h, "learners": n} for h, n in sorted(met.items(), key=lambda kv: (-kv[1], kv[0]))],
            "unrecognised_wrong": statuses["failed"] + statuses["error"] - sum(met.values()),
        })
    return Report(learners, ids, {ex.id: ex.points for ex in exercises}, per_exercise)


def text(report: Report) -> str:
    lines = [f"{len(report.learners)} learners, {len(report.exercise_ids)} exercises", ""]
    for x in report.learners:
        note = f"  ({x.note})" if x.note else ""
        lines.append(f"  {x.name:<20} {total(x, report.exercise_ids):g}/{sum(report.points.values())}{note}")
    lines.append("")
    for e in report.per_exercise:
        lines.append(f"{e['id']:<5} {e['name']:<28} passed {e['passed']}/{e['learners']} "
                     f"({e['pass_rate']:.0%}); not attempted {e['not_attempted']}")
        for m in e["misconceptions"]:
            lines.append(f"        {m['learners']} x {m['hint']}")
        if e["unrecognised_wrong"]:
            lines.append(f"        {e['unrecognised_wrong']} x a wrong answer that matched no known misconception")
    return "\n".join(lines)


def write_csv(report: Report, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["learner", *report.exercise_ids, "total", "max", "note"])
        for x in report.learners:
            scores = [f"{x.exercises.get(i, {}).get('score', 0):g}" for i in report.exercise_ids]
            w.writerow([x.name, *scores, f"{total(x, report.exercise_ids):g}", sum(report.points.values()), x.note])


def write_html(report: Report, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids = report.exercise_ids
    rates = [e["pass_rate"] * 100 for e in report.per_exercise]
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(ids)), 3.5), layout="constrained")
    ax.bar(ids, rates, color="#4c72b0")
    ax.set_ylim(0, 100)
    ax.set_ylabel("learners who passed (%)")
    ax.set_xlabel("exercise")
    ax.set_title(f"Pass rate per exercise ({len(report.learners)} learners)")
    ax.tick_params(axis="x", rotation=90)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    chart = base64.b64encode(buf.getvalue()).decode()
    top = sorted(((m["learners"], e["id"], m["hint"]) for e in report.per_exercise for m in e["misconceptions"]),
                 key=lambda t: (-t[0], t[1]))[:15]
    esc = html.escape
    rows = "".join(f"<tr><td>{n}</td><td>{esc(i)}</td><td>{esc(h)}</td></tr>" for n, i, h in top)
    learners = "".join(f"<tr><td>{esc(x.name)}</td><td>{total(x, ids):g}</td><td>{esc(x.note)}</td></tr>"
                       for x in report.learners)
    path.write_text(
        "<!doctype html><meta charset='utf-8'><title>Gradebook</title>"
        "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}td,th{padding:.2em .6em;"
        "border-bottom:1px solid #ddd;text-align:left}</style>"
        f"<h1>Gradebook</h1><img alt='pass rate per exercise' src='data:image/png;base64,{chart}'>"
        "<h2>Misconceptions the class met</h2><table><tr><th>learners</th><th>exercise</th><th>hint</th></tr>"
        f"{rows or '<tr><td colspan=3>none</td></tr>'}</table>"
        f"<h2>Learners</h2><table><tr><th>learner</th><th>total / {sum(report.points.values())}</th>"
        f"<th>note</th></tr>{learners}</table>\n",
        encoding="utf-8",
    )


def _lessons(value: str | None) -> set[int] | None:
    if not value:
        return None
    try:
        return {int(part) for part in value.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--lessons takes numbers like 00,01, not {value!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course gradebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("roster", type=Path, help="a folder with one folder per learner")
    parser.add_argument("--csv", type=Path, help="one row per learner, one column per exercise")
    parser.add_argument("--json", type=Path, help="the report as JSON")
    parser.add_argument("--html", type=Path, help="the report with a pass-rate chart, as one HTML file")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="learners graded at once (default 1)")
    parser.add_argument("--lessons", type=_lessons, default=None, help="only these lessons, e.g. 00,01")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per notebook run (default 300)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if not args.roster.is_dir():
        print(f"course gradebook: no such roster folder: {args.roster}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print("course gradebook: -j needs a positive number of learners", file=sys.stderr)
        return 2
    for out in (args.csv, args.json, args.html):
        if out is not None and not out.parent.is_dir():
            print(f"course gradebook: the folder for {out} does not exist", file=sys.stderr)
            return 2
    learners = collect(args.roster, args.lessons, args.jobs, args.timeout, args.quiet)
    if not learners:
        print(f"course gradebook: no learner folders in {args.roster}", file=sys.stderr)
        return 2
    report = build(learners, args.lessons)
    print(text(report))
    if args.csv:
        write_csv(report, args.csv)
    if args.json:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if args.html:
        write_html(report, args.html)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
