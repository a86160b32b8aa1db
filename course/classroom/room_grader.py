"""The live room's grader: warm sandboxes check, this process judges, one notebook per sandbox.

``course room --watch`` keeps one :class:`WarmGrader` for the lesson on the board. It has the
shape of :func:`course.classroom.gradebook.grade_sandboxed` (``{name: bytes}`` of one learner
in, ``(report, isolation)`` out), so :func:`course.classroom.room.collect` takes either::

    grader = WarmGrader(lesson=1, size=2)      # two sandboxes getting ready, the oracles computed
    report, isolation = grader({"01_autograd_graph.ipynb": data}, 300, {1}, [])
    report["notebooks"][0]["exercises"]       # [{"id": "1.1", "status": "passed", ...}, ...]
    grader.close()

NOTE [Where a room's one-save refresh spent its time, and where it spends it now]
    Measured on 2 CPUs (lesson 01, one notebook, ``benchmarks/room.py``): a sandboxed
    ``course grade --no-run`` of one notebook took 10.4 s on a quiet machine: 1.5 s starting
    Python and the grader's modules, 6.4 s importing torch and the checks and computing the
    oracles in the grading process while the checking server imported the same (1.1 s more
    to be ready), then 4.2 s checking, of which 1.5 to 4 s went to each exercise's process
    importing ``torch._dynamo`` (torch imports it late; the server now imports it first,
    ``TORCH_LAZY_MODULES`` in :mod:`course.grading.worker`). So:

    1. the checking server, the only process that runs learner code, starts in its sandbox
       before the notebook is saved (:mod:`course.grading.sandbox.warm`: one sandbox per
       notebook, used once, then replaced);
    2. the judge (the oracles and the comparison, :func:`course.grading.judging.judge_outcomes`)
       lives here, in the room's process, which runs no learner code, set up once: the
       outcomes come back as data (``torch.load(weights_only=True)``), as they reach the
       grading process of ``course grade``;
    3. a notebook that is not one (bad JSON, say) goes to ``grade_sandboxed`` as before, so
       its row says what the grader says; so does every notebook where bubblewrap does not
       run (:func:`course.grading.sandbox.warm.warm_available`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from course.classroom.learner_grades import grade_sandboxed
from course.grading.cells import code_cells
from course.grading.judging import judge_outcomes
from course.grading.sandbox.warm import ISOLATION, WarmPool, warm_available

__all__ = ["CELL_TIMEOUT", "WarmGrader"]

CELL_TIMEOUT = 60.0  # seconds per definition, as ``course grade --cell-timeout``'s default


class WarmGrader:
    """Grades one notebook of ``lesson`` at a time in a warm sandbox (NOTE above).

    ``keep_warm``: a sandbox taken is replaced at once (``--watch``); otherwise only while
    more notebooks are expected (:meth:`expect`), so a one-off refresh leaves none idle."""

    def __init__(self, lesson: int, size: int = 1, keep_warm: bool = True):
        self.lesson, self.size, self.keep_warm = lesson, size, keep_warm
        self.pool: WarmPool | None = None  # started by start(): a refresh that grades nothing starts nothing
        self.warm: bool | None = None  # whether bubblewrap runs here (asked by start())
        self.judge_lock = threading.Lock()  # judge_outcomes' session: the oracles, one at a time
        self.expected_outcomes: dict[str, list] = {}
        self.extra_counts: dict[str, int] = {}  # no instructor's extra cases in the room
        self.coming = 0
        self.counting = threading.Lock()
        self.prepared = threading.Thread(target=self._prepare, daemon=True)

    def start(self) -> None:
        """Start the sandboxes and, meanwhile, compute the oracles (once)."""
        with self.counting:
            if self.warm is None:
                self.warm = warm_available()
            if self.warm and self.pool is None:
                self.pool = WarmPool(self.lesson, self.size)
                self.prepared.start()

    def _prepare(self) -> None:
        from course import checks

        for ex in checks.all_exercises(self.lesson):
            try:
                self.expected(ex)
            except Exception:  # the same failure comes back when judging, as an `error`
                pass

    def expected(self, ex) -> list:
        """The oracle's outcomes on every case of ``ex``, computed once."""
        from course import checks

        if ex.id not in self.expected_outcomes:
            self.expected_outcomes[ex.id] = checks.expected_outcomes(ex)
        return self.expected_outcomes[ex.id]

    def expect(self, count: int) -> None:
        """``count`` more notebooks are coming (a refresh's to-do list)."""
        self.start()
        with self.counting:
            self.coming += count

    def __call__(self, notebooks: dict[str, bytes], timeout: float, lessons, hide=()) -> tuple[dict, str]:
        (name, data), *more = notebooks.items()
        self.start()
        if not self.warm:  # no bubblewrap here: the full grader, in the fallback it says
            return grade_sandboxed(notebooks, timeout, lessons, hide)
        with self.counting:
            self.coming = max(0, self.coming - 1)
            replace = self.keep_warm or self.coming >= len(self.pool.servers)
        try:
            text = data.decode("utf-8")
            cells = code_cells(text)
        except Exception:  # not a notebook: the full grader says why, in its own sandbox
            return grade_sandboxed(notebooks, timeout, lessons, hide)
        if more or lessons != {self.lesson}:
            raise ValueError("a warm grader grades one notebook of its own lesson")
        from course import checks

        exercises = checks.all_exercises(self.lesson)
        started = time.monotonic()
        outcomes = self.pool.take(replace).check(exercises, name, cells, text, CELL_TIMEOUT, timeout)
        seconds = time.monotonic() - started
        asked = set().union(*(checks.reveals_in(src) for _, src in cells))
        self.prepared.join()
        verdicts = [judge_outcomes(self, ex, outcomes[ex.id], seconds, ex.id in asked) for ex in exercises]
        return {"notebooks": [{"path": str(Path(name)), "exercises": verdicts, "error": ""}]}, ISOLATION

    def close(self) -> None:
        """End every sandbox still waiting."""
        if self.pool is not None:
            self.pool.close()
