"""What ``course grade`` reports: one notebook's grade, the summary, its text, JSON and JUnit.

:class:`NotebookReport` is one notebook's result; :func:`summary` gathers a run's reports into
the ``--json`` document (format ``course-grade/1``, described in docs/grading.md);
:func:`print_notebook`, :func:`print_table` and :func:`print_footer` write what a person reads;
:func:`junit` builds the JUnit XML a CI system shows. Files are written with
:func:`course.grading.files.write_atomically`, the format string is
:data:`course.grading.files.REPORT_FORMAT`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

from course.grading.files import REPORT_FORMAT
from course.grading.untrusted import clean_text

__all__ = [
    "NotebookReport",
    "junit",
    "junit_placeholder",
    "placeholder",
    "print_footer",
    "print_notebook",
    "print_table",
    "summary",
]


@dataclass
class NotebookReport:
    """The grade of one notebook (``to_json`` is the ``--json`` entry, see docs/grading.md)."""

    path: str
    lesson: int | None
    exercises: list[dict] = field(default_factory=list)
    run: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""
    note: str = ""
    killed: list[str] = field(default_factory=list)
    sha256: str = ""  # of the notebook's bytes, what a signed report binds its score to
    git: dict | None = (
        None  # the commit that holds it and that commit's time (provenance.py); None outside git
    )

    @property
    def score(self) -> float:
        return sum(e["score"] for e in self.exercises)

    @property
    def max_score(self) -> float:
        return sum(e["points"] for e in self.exercises)

    @property
    def all_passed(self) -> bool:
        return (
            not self.error and bool(self.exercises) and all(e["status"] == "passed" for e in self.exercises)
        )

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(score=self.score, max_score=self.max_score, all_passed=self.all_passed)
        return d


def summary(reports: list[NotebookReport], ignored=(), killed=(), tampering=(), seconds=0.0) -> dict:
    import torch

    import course

    score, max_score = sum(r.score for r in reports), sum(r.max_score for r in reports)
    return {
        "format": REPORT_FORMAT,
        "course_version": course.__version__,
        "torch_version": torch.__version__,
        "notebooks": [r.to_json() for r in reports],
        "ignored": list(ignored),
        "killed": list(killed),
        "tampering": list(tampering),
        "seconds": round(seconds, 2),
        "score": score,
        "max_score": max_score,
        "fraction": round(score / max_score, 4) if max_score else 0.0,
        "all_passed": bool(reports) and all(r.all_passed for r in reports) and not tampering,
        "finished": True,
    }


def placeholder(why: str = "grading did not finish") -> dict:
    """What a report file holds from the start of grading until the real report replaces it
    (so a file planted there before, or a grade that dies, never leaves a score behind)."""
    return {
        "format": REPORT_FORMAT,
        "finished": False,
        "error": clean_text(why),
        "score": 0,
        "max_score": 0,
        "fraction": 0.0,
        "all_passed": False,
        "notebooks": [],
    }


def junit_placeholder(why: str = "grading did not finish") -> str:
    """The JUnit file's content until the real one replaces it: one suite, one error."""
    suites = ET.Element("testsuites", name="course grade")
    suite = ET.SubElement(suites, "testsuite", name="course grade", tests="1", failures="0", errors="1")
    ET.SubElement(ET.SubElement(suite, "testcase", name="grading"), "error", message=why).text = why
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def print_notebook(r: NotebookReport) -> None:
    print(f"{r.path}  (lesson {r.lesson})")
    if r.error:
        print(f"  error: {clean_text(r.error)}")
    for e in r.exercises:
        cases = f"{e['cases_passed']}/{e['cases_total']} cases" + (
            ", partial credit" if e.get("partial") else ""
        )
        points = f"{e['score']:g}/{e['points']:g}"
        print(f"  {e['id']:<6} {e['name']:<28} {e['status']:<14} {points:<9} {cases}")
    for e in r.exercises:
        if e["status"] != "passed":
            print("\n" + "\n".join("  " + line for line in _as_status(e).splitlines()))
    run = r.run
    if "failure" in run:
        print(f"\n  notebook run failed: {run['failure']}")
    elif run:
        problems = [
            f"cell {x['cell']}: {x['error']}"
            for x in sorted(run["errors"] + run["timeouts"], key=lambda x: x["cell"])
        ]
        line = (
            f"\n  notebook run: {run['code_cells']} code cells in {run['seconds']:.1f} s, "
            f"{len(run['errors'])} raised, {len(run['timeouts'])} timed out"
        )
        line += f", {run['skipped']} skipped (total timeout)" if run["skipped"] else ""
        print(line)
        for p in problems[:10]:
            print(f"    {clean_text(p, 160)}")


def _as_status(e: dict) -> str:
    """The exercise's message, its first line naming the status the report gives it: an answer
    that raised on a case is an ``error`` (the check's line says ``failed: 2/4 cases``).

    Example:
        >>> _as_status({"status": "error", "message": "[1.1 f] failed: 2/4 cases\\n  case: f(1)"})
        '[1.1 f] error: 2/4 cases\\n  case: f(1)'
    """
    head, sep, rest = e["message"].partition("\n")
    if e["status"] == "error":
        head = head.replace("] failed: ", "] error: ", 1)
    return head + sep + rest


def print_table(reports: list[NotebookReport]) -> None:
    names = [Path(r.path).name if not r.note else f"{r.lesson:02d} (missing)" for r in reports]
    width = max([len(n) for n in names] + [8])
    print(f"{'notebook':<{width}}  {'score':>9}  passed  failed  not att.  error  seconds")
    for name, r in zip(names, reports):
        count = {
            s: sum(e["status"] == s for e in r.exercises)
            for s in ("passed", "failed", "not attempted", "error")
        }
        score = f"{r.score:g}/{r.max_score:g}" if r.exercises or not r.error else "error"
        print(
            f"{name:<{width}}  {score:>9}  {count['passed']:>6}  {count['failed']:>6}  "
            f"{count['not attempted']:>8}  {count['error']:>5}  {r.seconds:>7.1f}"
        )
    total, most = sum(r.score for r in reports), sum(r.max_score for r in reports)
    print(f"{'total':<{width}}  {f'{total:g}/{most:g}':>9}")
    for r in reports:
        if r.error:
            print(f"{Path(r.path).name}: {clean_text(r.error)}")


def print_footer(summary: dict) -> None:
    for item in summary["ignored"]:
        print(f"skipped {Path(item['path']).name}: {item['reason']}")
    if summary["killed"]:
        print(f"ended {len(summary['killed'])} process(es) that learner code left running:")
        for line in summary["killed"][:10]:
            print(f"  {line}")
    if summary["tampering"]:
        print(
            "TAMPERING: files of the course package changed during grading: "
            + ", ".join(summary["tampering"][:10])
        )
    extra = summary.get("extra_cases")
    if extra:
        where = ", ".join(f"{n} for {i}" for i, n in extra["exercises"].items())
        print(
            f"graded with {extra['count']} extra case(s) ({where}) from a file with sha256 {extra['sha256']}"
        )
    score, most = summary["score"], summary["max_score"]
    pct = f" ({100 * score / most:.0f}%)" if most else ""
    print(
        f"\nscore {score:g}/{most:g}{pct}, graded in {summary['seconds']:.1f} s (wall clock, the whole command)"
    )


def junit(summary: dict) -> ET.ElementTree:
    suites = ET.Element("testsuites", name="course grade")
    x = clean_text  # every text below may come from learner code: no character XML forbids
    for nb in summary["notebooks"]:
        suite = ET.SubElement(suites, "testsuite", name=x(nb["path"]), time=f"{nb['seconds']:.2f}")
        cases = []
        if nb["error"]:
            case = ET.SubElement(suite, "testcase", name="notebook", classname=x(nb["path"]))
            ET.SubElement(case, "error", message="error").text = x(nb["error"])
            cases.append("error")
        for e in nb["exercises"]:
            case = ET.SubElement(
                suite,
                "testcase",
                name=x(f"{e['id']} {e['name']}"),
                classname=x(nb["path"]),
                time=f"{e['seconds']:.2f}",
            )
            if e["status"] == "error":
                ET.SubElement(case, "error", message=e["status"]).text = x(e["message"], 4000)
            elif e["status"] != "passed":
                ET.SubElement(case, "failure", message=e["status"]).text = x(e["message"], 4000)
            cases.append({"error": "error", "passed": "passed"}.get(e["status"], "failure"))
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(cases.count("failure")))
        suite.set("errors", str(cases.count("error")))
    return ET.ElementTree(suites)
