"""The instructor's grading policy for ``course collect``: extensions, late penalties, point
weights, and the two-column export an LMS gradebook imports. Torch-free.

Each is a small file the instructor keeps beside the class's reports, never a fork of the
course::

    extensions.csv   learner,deadline            ada,2026-12-03T23:59:00+01:00
    weights.csv      exercise,weight             0.1,2      (0.1 counts twice its points)
    --late-penalty 0.1                           10% of the score per started day late, at most all of it

    # OK:  score 3 of 4, 1 day late, --late-penalty 0.25 -> final 2.25
    # OK:  ada's extension to 2026-12-03: her commit of 12-02 is on time
    # BAD: a weight on an exercise id the report does not have: an error, never silently 0

The final score is ``weighted score × (1 - min(1, penalty × days late))``, days counted from the
learner's own deadline to the report's last commit, rounded up; ``late`` "unknown" (a notebook
graded outside git) takes no penalty and keeps its flag, for the instructor to decide.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from course.grading.provenance import parse_utc
from course.grading.untrusted import csv_cell

__all__ = ["Policy", "PolicyError", "days_late", "final_score", "read_policy", "write_lms_csv"]


class PolicyError(ValueError):
    """A policy file that cannot be used: the message names the file and the line."""


@dataclass
class Policy:
    extensions: dict[str, object] = field(default_factory=dict)  # learner -> aware datetime
    weights: dict[str, float] = field(default_factory=dict)  # exercise id -> weight (default 1)
    late_penalty: float = 0.0  # fraction of the score lost per started day late

    def deadline_for(self, learner: str, deadline):
        """The learner's own deadline: an extension (by name, or by the login a Classroom
        repository name ends with), else the class's."""
        for name, when in self.extensions.items():
            if learner == name or learner.endswith(f"-{name}"):
                return when
        return deadline


def _rows(path: Path) -> list[tuple[int, list[str]]]:
    rows = csv.reader(path.read_text(encoding="utf-8").splitlines())
    return [
        (n, row) for n, row in enumerate(rows, 1) if row and row[0].strip() and not row[0].startswith("#")
    ]


def read_policy(extensions: Path | None, weights: Path | None, late_penalty: float = 0.0) -> Policy:
    """The policy from its files (a header line ``learner,...`` / ``exercise,...`` is skipped).

    Raises:
        PolicyError: a line that is not ``name,ISO time with a zone`` or ``id,number >= 0``.
    """
    policy = Policy(late_penalty=late_penalty)
    if not 0 <= late_penalty <= 1:
        raise PolicyError(f"--late-penalty {late_penalty}: a fraction of the score per day, 0 to 1")
    for n, row in _rows(extensions) if extensions else []:
        if row[0].strip() == "learner":
            continue
        try:
            policy.extensions[row[0].strip()] = parse_utc(row[1].strip())
        except (IndexError, ValueError) as e:
            raise PolicyError(f"{extensions}:{n}: expected learner,deadline with a time zone ({e})") from None
    for n, row in _rows(weights) if weights else []:
        if row[0].strip() == "exercise":
            continue
        try:
            weight = float(row[1])
        except (IndexError, ValueError):
            weight = -1.0
        if not (math.isfinite(weight) and weight >= 0):
            raise PolicyError(f"{weights}:{n}: expected exercise,weight (a number >= 0)")
        policy.weights[row[0].strip()] = weight
    return policy


def days_late(commit_time, deadline) -> int:
    """Started days between the deadline and the commit (0 when on time).

    Example:
        >>> days_late(parse_utc("2026-12-02T01:00Z"), parse_utc("2026-12-01T23:00Z"))
        1
        >>> days_late(parse_utc("2026-12-03T23:00:01Z"), parse_utc("2026-12-01T23:00Z")), days_late(None, None)
        (3, 0)
    """
    if commit_time is None or deadline is None or commit_time <= deadline:
        return 0
    return math.ceil((commit_time - deadline).total_seconds() / 86400)


def final_score(report: dict, policy: Policy, late_days: int) -> tuple[float, float]:
    """(final score, its maximum): the exercises' scores weighted, then the late penalty.

    Raises:
        PolicyError: a weight names an exercise the report does not have.

    Example:
        >>> report = {"notebooks": [{"exercises": [{"id": "0.1", "score": 1, "points": 1},
        ...                                        {"id": "0.2", "score": 2, "points": 3}]}]}
        >>> final_score(report, Policy(weights={"0.1": 2}, late_penalty=0.25), late_days=1)
        (3.0, 5.0)
    """
    entries = [e for nb in report.get("notebooks", []) for e in nb.get("exercises", [])]
    unknown = sorted(set(policy.weights) - {e["id"] for e in entries})
    if unknown:
        raise PolicyError(f"weights for exercises the report does not have: {', '.join(unknown)}")
    score = sum(policy.weights.get(e["id"], 1.0) * e["score"] for e in entries)
    most = sum(policy.weights.get(e["id"], 1.0) * e["points"] for e in entries)
    kept = 1 - min(1.0, policy.late_penalty * late_days)
    return round(score * kept, 4), round(most, 4)


def write_lms_csv(rows: list[tuple[str, str, str]], path: Path, column: str = "points") -> None:
    """``learner,<column>,max``: one line per learner, for an LMS gradebook's CSV import
    (Moodle's "Import grades from CSV" maps ``learner`` to the username; a learner with no
    report has an empty cell, not 0)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["learner", column, "max"])
        w.writerows([csv_cell(c) for c in row] for row in rows)
