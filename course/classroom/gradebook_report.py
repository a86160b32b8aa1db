"""The gradebook's report: per exercise, the pass rate and the misconceptions met; per
learner, the points. Written as text, CSV, JSON and an HTML page (:mod:`course.classroom.gradebook`
writes whichever the instructor asks for).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from course.classroom.roster import Learner
from course.grading.files import GRADEBOOK_FORMAT
from course.grading.untrusted import csv_cell


def _exercises(lessons: set[int] | None) -> list:
    from course import checks

    checks.load_all()
    return [ex for ex in checks.all_exercises() if lessons is None or ex.lesson in lessons]


@dataclass
class Report:
    learners: list[Learner]
    exercise_ids: list[str]
    points: dict[str, int]
    per_exercise: list[dict]

    def to_json(self) -> dict:
        return {
            "format": GRADEBOOK_FORMAT,
            "learners": [
                {
                    "learner": x.name,
                    "note": x.note,
                    "isolation": x.isolation,
                    # null where the CSV leaves the cell empty: not attempted (0: tried, failed)
                    "scores": {i: _json_score(x.exercises.get(i)) for i in self.exercise_ids},
                    "total": total(x, self.exercise_ids),
                    "max": sum(self.points.values()),
                }
                for x in self.learners
            ],
            "exercises": self.per_exercise,
        }


def _json_score(entry: dict | None) -> float | None:
    """The points of one exercise entry; None when not attempted (the CSV's empty cell)."""
    if entry is None or entry.get("status", "not attempted") == "not attempted":
        return None
    return entry.get("score", 0)


def total(learner: Learner, ids: list[str]) -> float:
    return sum(learner.exercises.get(i, {}).get("score", 0) for i in ids)


def build(learners: list[Learner], lessons: set[int] | None = None) -> Report:
    """Pass rates and misconceptions per exercise, from the learners' grade entries."""
    exercises = _exercises(lessons)
    ids = [ex.id for ex in exercises]
    per_exercise = []
    for ex in exercises:
        statuses = Counter(x.exercises.get(ex.id, {}).get("status", "not attempted") for x in learners)
        known = {w.hint for w in ex.wrong}
        met = Counter(
            x.exercises[ex.id].get("hint", "")
            for x in learners
            if x.exercises.get(ex.id, {}).get("status") in ("failed", "error")
            and x.exercises[ex.id].get("hint", "") in known
        )
        attempted = len(learners) - statuses["not attempted"]
        per_exercise.append(
            {
                "id": ex.id,
                "name": ex.name,
                "title": ex.title,
                "points": ex.points,
                "learners": len(learners),
                "attempted": attempted,
                "not_attempted": statuses["not attempted"],
                "passed": statuses["passed"],
                "failed": statuses["failed"],
                "error": statuses["error"],
                "revealed": statuses["revealed"],
                "pass_rate": statuses["passed"] / len(learners) if learners else 0.0,
                "misconceptions": [
                    {"hint": h, "learners": n} for h, n in sorted(met.items(), key=lambda kv: (-kv[1], kv[0]))
                ],
                "unrecognised_wrong": statuses["failed"] + statuses["error"] - sum(met.values()),
            }
        )
    return Report(learners, ids, {ex.id: ex.points for ex in exercises}, per_exercise)


def text(report: Report) -> str:
    lines = [f"{len(report.learners)} learners, {len(report.exercise_ids)} exercises", ""]
    for x in report.learners:
        note = f"  ({x.note})" if x.note else ""
        points = "-" if x.empty else f"{total(x, report.exercise_ids):g}/{sum(report.points.values())}"
        lines.append(f"  {x.name:<20} {points}{note}")
    lines.append("")
    for e in report.per_exercise:
        lines.append(
            f"{e['id']:<5} {e['name']:<28} passed {e['passed']}/{e['learners']} "
            f"({e['pass_rate']:.0%}); not attempted {e['not_attempted']}"
        )
        for m in e["misconceptions"]:
            lines.append(f"        {m['learners']} x {m['hint']}")
        if e["unrecognised_wrong"]:
            lines.append(
                f"        {e['unrecognised_wrong']} x a wrong answer that matched no known misconception"
            )
    return "\n".join(lines)


def write_csv(report: Report, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["learner", *report.exercise_ids, "total", "max", "note"])
        for x in report.learners:
            scores = [_csv_score(x.exercises.get(i)) for i in report.exercise_ids]
            w.writerow(
                [
                    csv_cell(x.name),
                    *scores,
                    f"{total(x, report.exercise_ids):g}",
                    sum(report.points.values()),
                    csv_cell(x.note),
                ]
            )


def _csv_score(entry: dict | None) -> str:
    """The points of one exercise entry; "" when not attempted (no entry, or that status)."""
    if entry is None or entry.get("status", "not attempted") == "not attempted":
        return ""
    return f"{entry.get('score', 0):g}"


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
    top = sorted(
        ((m["learners"], e["id"], m["hint"]) for e in report.per_exercise for m in e["misconceptions"]),
        key=lambda t: (-t[0], t[1]),
    )[:15]
    esc = html.escape
    rows = "".join(f"<tr><td>{n}</td><td>{esc(i)}</td><td>{esc(h)}</td></tr>" for n, i, h in top)
    learners = "".join(
        f"<tr><td>{esc(x.name)}</td><td>{total(x, ids):g}</td><td>{esc(x.note)}</td></tr>"
        for x in report.learners
    )
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


def write_json(report: Report, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
