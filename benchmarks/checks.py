"""How long a learner waits for a check's verdict: the slowest failing and passing check per lesson.

Every exercise's reference solution (passing) and every known wrong answer of its catalogue
(failing) goes through ``course.checks.grade_answer``, as ``check("N.M")`` runs it in a
notebook, each with nothing cached (a learner's first check of that exercise) in a process
that has run each exercise once already (as the lesson's cells have, before its checks: the
first torch call of a process pays seconds of start-up that no check should be blamed for).
Prints, per lesson, the slowest of each kind with its seconds. The issue's target: every
verdict within 10 s on a 2-core machine.

    python benchmarks/checks.py            # every lesson
    python benchmarks/checks.py 3 8        # lessons 3 and 8
"""

from __future__ import annotations

import sys
import time

from course import checks


def _seconds(ex, answer) -> tuple[float, str]:
    forget = getattr(checks, "forget_cached", None)  # older checks kept no cache
    if forget is not None:
        forget()
    start = time.perf_counter()
    status = checks.grade_answer(ex, answer, timeout=ex.timeout).status
    return time.perf_counter() - start, status


def main(argv: list[str]) -> int:
    lessons = [int(a) for a in argv] or sorted({e.lesson for e in checks.all_exercises()})
    print(f"{'lesson':>6}  {'slowest failing check':<34}{'s':>7}  {'slowest passing check':<26}{'s':>7}")
    for lesson in lessons:
        failing, passing = (0.0, "-"), (0.0, "-")
        for ex in checks.all_exercises(lesson):
            _seconds(ex, ex.solution)  # warm up: the lesson's cells ran this code before
            seconds, _ = _seconds(ex, ex.solution)
            passing = max(passing, (seconds, ex.id))
            for k, w in enumerate(ex.wrong):
                seconds, status = _seconds(ex, w.answer)
                if status != "passed":
                    failing = max(failing, (seconds, f"{ex.id} wrong[{k}]"))
        print(
            f"{lesson:>6}  {failing[1]:<34}{failing[0]:>7.2f}  {passing[1]:<26}{passing[0]:>7.2f}", flush=True
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
