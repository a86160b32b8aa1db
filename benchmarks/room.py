"""How long `course room` takes over a simulated class: cold, warm with no change, warm with 2 changed.

We build 30 learners' hub homes (``HOMES/<learner>/autograd-course/01_autograd_graph.ipynb``)
in a temporary folder, from lesson 01's solution and its learner copy:

* a third have the solution (each with a markdown cell of their own, so no two are alike);
* a third have the learner copy as ``course hub-start`` gave it (untouched);
* a third have the solution with a known wrong answer pasted into exercise 1.1 (the walk
  without a set of queued nodes, ``_no_seen_set`` in course/checks/lesson01/ex1_1_bfs_names.py).

Then we time the command as an instructor runs it (``python -m course room HOMES --lesson 1
-q``, a fresh process each time, wall clock): cold (an empty cache), again with nothing
changed, and again after two learners changed their notebook (a wrong answer fixed, an
untouched copy solved). Then the live room: ``course room HOMES --lesson 1 --watch 1``, left
to warm up (``--settle`` s, its sandboxes waiting), and ``--saves`` learners save a fixed
notebook one after the other (``--gap`` s apart): for each, the seconds from the save to the
line where the room shows that learner's change (the 1 s polling period included). The wall
clock depends on the machine and on what else runs on it: we print its CPU count and the load
average beside it (the sandboxed graders' CPU time does not show in this process's
``RUSAGE_CHILDREN``, so we do not print one). No assertion: this prints (and checks that the
grid came out as built).

    python benchmarks/room.py                   # 30 learners
    python benchmarks/room.py --learners 6      # a smaller class, a quicker run
    python benchmarks/room.py --lesson 0        # lesson 00 (its checks cost a third of 01's)
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# lesson -> (its notebook, a line of the reference answer, the known wrong line pasted over it,
# the misconception the grid should name for it)
LESSONS = {
    1: (
        "01_autograd_graph.ipynb",
        "if nxt is not None and nxt not in seen:  # None: an input that needs no grad",
        "if nxt is not None:  # every edge, even to a node already queued",
        "no_seen_set",
    ),
    0: ("00_warmup.ipynb", "(x**3).sum().backward()", "(x**3).sum()", "forgot_backward"),
}


def _notebook(lesson: int, learner: str, wrong: bool = False) -> str:
    name, right, wrong_line, _ = LESSONS[lesson]
    nb = json.loads((ROOT / "solutions" / name).read_text())
    if wrong:
        cell = next(c for c in nb["cells"] if right in "".join(c["source"]) and c["cell_type"] == "code")
        cell["source"] = "".join(cell["source"]).replace(right, wrong_line, 1)
    nb["cells"].append({"cell_type": "markdown", "id": f"notes-{learner}", "metadata": {}, "source": learner})
    return json.dumps(nb, indent=1) + "\n"


def build(homes: Path, learners: int, lesson: int) -> dict[str, str]:
    """The class: learner -> what they hold ("solved", "untouched" or "wrong")."""
    kinds = {}
    for n in range(learners):
        learner, kind = f"learner-{n:02d}", ("solved", "untouched", "wrong")[n % 3]
        folder = homes / learner / "autograd-course"
        folder.mkdir(parents=True)
        name = LESSONS[lesson][0]
        if kind == "untouched":
            (folder / name).write_bytes((ROOT / "notebooks" / name).read_bytes())
        else:
            (folder / name).write_text(_notebook(lesson, learner, kind == "wrong"))
        kinds[learner] = kind
    return kinds


def timed(homes: Path, lesson: int) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "course", "room", str(homes), "--lesson", str(lesson), "-q"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "200"},  # one line a learner, whatever the terminal
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"course room failed ({proc.returncode}):\n{proc.stderr}")
    return seconds, proc.stdout


def _check(grid: str, kinds: dict[str, str], lesson: int) -> None:
    expected = {"solved": "passed", "untouched": "not attempted", "wrong": f"failed: {LESSONS[lesson][3]}"}
    rows = {line.split()[0]: line for line in grid.splitlines() if line.startswith("learner-")}
    wrong = [k for k, kind in kinds.items() if not rows[k].split(None, 1)[1].startswith(expected[kind])]
    if wrong:
        raise SystemExit(f"the grid does not show what was built for {wrong}:\n{grid}")


def live_saves(homes: Path, lesson: int, learners: list[str], settle: float, gap: float) -> list[float]:
    """Seconds from each learner's save to the live room's line about them (``--watch 1``)."""
    said = open(homes.parent / "room.err", "w+")  # noqa: SIM115 (closed below)
    room = subprocess.Popen(
        [sys.executable, "-m", "course", "room", str(homes), "--lesson", str(lesson), "--watch", "1", "-q"],
        stdout=subprocess.PIPE,
        stderr=said,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in room.stdout], daemon=True).start()
    seconds = []
    try:
        time.sleep(settle)  # the first grid, then its warm sandboxes getting ready
        for learner in learners:
            path = homes / learner / "autograd-course" / LESSONS[lesson][0]
            while not lines.empty():  # what the room said before this save
                lines.get()
            path.write_text(_notebook(lesson, learner))
            saved = time.perf_counter()
            while True:
                try:
                    line = lines.get(timeout=300)
                except queue.Empty:
                    said.seek(0)
                    raise SystemExit(
                        f"the live room said nothing for 300 s; its stderr:\n{said.read()[-3000:]}"
                    ) from None
                if re.match(rf"{learner}: {lesson}\.1 [^;]*-> passed", line.strip()):  # its N.1, now passed
                    seconds.append(time.perf_counter() - saved)
                    break
            time.sleep(gap)  # the sandbox used is replaced meanwhile, as between two saves in class
    finally:
        room.send_signal(signal.SIGINT)  # Ctrl-C: the room ends its waiting sandboxes and their folders
        try:
            room.wait(timeout=60)
        except subprocess.TimeoutExpired:
            room.kill()
            room.wait()
        said.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument("--lesson", type=int, choices=sorted(LESSONS), default=1)
    parser.add_argument("--saves", type=int, default=3, help="live saves timed (0: none)")
    parser.add_argument("--settle", type=float, default=30, help="seconds the live room warms up")
    parser.add_argument("--gap", type=float, default=15, help="seconds between two live saves")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="course-room-bench-") as tmp:
        homes = Path(tmp) / "homes"
        kinds = build(homes, args.learners, args.lesson)
        first = {kind: list(kinds.values()).count(kind) for kind in ("solved", "untouched", "wrong")}
        load = os.getloadavg()[0]
        cold, grid = timed(homes, args.lesson)
        _check(grid, kinds, args.lesson)
        warm, _ = timed(homes, args.lesson)
        fixed = next(k for k, kind in kinds.items() if kind == "wrong")
        solved = next(k for k, kind in kinds.items() if kind == "untouched")
        for learner in (fixed, solved):
            path = homes / learner / "autograd-course" / LESSONS[args.lesson][0]
            path.write_text(_notebook(args.lesson, learner))
            kinds[learner] = "solved"
        changed, grid = timed(homes, args.lesson)
        _check(grid, kinds, args.lesson)
        savers = [k for k, kind in kinds.items() if kind == "wrong"][: args.saves]
        load_live = os.getloadavg()[0]
        saves = live_saves(homes, args.lesson, savers, args.settle, args.gap) if savers else []
    mix = ", ".join(f"{n} {kind}" for kind, n in first.items())
    machine = f"{os.cpu_count()} CPUs, load average {load:.1f} (live: {load_live:.1f}, after: {os.getloadavg()[0]:.1f})"
    print(f"course room, lesson {args.lesson:02d}, {args.learners} learners ({mix}); {machine}")
    print(f"cold (empty cache)      {cold:7.1f} s")
    print(f"warm, nothing changed   {warm:7.1f} s")
    print(f"warm, 2 notebooks       {changed:7.1f} s")
    if saves:
        each = ", ".join(f"{s:.1f}" for s in saves)
        print(f"live, one save shown    {statistics.median(saves):7.1f} s median ({each})")
    print(grid)


if __name__ == "__main__":
    main()
