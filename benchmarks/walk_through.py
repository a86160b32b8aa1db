"""Time a walk-through of one lesson: a persistent kernel, one cell at a time, a time stamp each.

How lessons 09-11's times were estimated (NOTE [How the lesson times were measured] in
course/lessons.py): a learner (a person, or a model following the same protocol) shows every
cell in order, runs every code cell, writes each exercise's answer into a file of its own and
runs it in the stub's place, and runs the check until it passes. The log holds one line per
step, so the minutes per cell, per exercise and in all can be read from it afterwards::

    python benchmarks/walk_through.py start  DIR notebooks/09_memory_policies.ipynb .
    python benchmarks/walk_through.py show   DIR 0        # read cell 0 (logged)
    python benchmarks/walk_through.py run    DIR 1        # run code cell 1 as written
    python benchmarks/walk_through.py run    DIR 9 my_9_1.py   # your answer in cell 9's place
    python benchmarks/walk_through.py log    DIR exercise 9.1 passed after 2 tries
    python benchmarks/walk_through.py stop   DIR          # the wall time and the time cells ran

``start`` copies the notebook into DIR (the learner's copy there is the one walked) and starts
a kernel whose ``PYTHONPATH`` is the checkout given (the course as it was at that commit).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def _log(folder: Path, text: str) -> None:
    with open(folder / "walk.log", "a", encoding="utf-8") as f:
        f.write(f"{time.time():.1f}\t{time.strftime('%H:%M:%S')}\t{text}\n")


def _cells(folder: Path) -> list[dict]:
    return json.loads((folder / "lesson.ipynb").read_text(encoding="utf-8"))["cells"]


def _client(folder: Path):
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=str(folder / "kernel.json"))
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return client


def start(folder: Path, notebook: str, checkout: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook, folder / "lesson.ipynb")
    env = dict(os.environ, PYTHONPATH=str(Path(checkout).resolve()), MPLBACKEND="Agg")
    kernel = subprocess.Popen(
        [sys.executable, "-m", "ipykernel_launcher", "-f", str(folder / "kernel.json")],
        cwd=folder,
        env=env,
        stdout=open(folder / "kernel.out", "w"),  # noqa: SIM115 - the kernel outlives this call
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    (folder / "kernel.pid").write_text(str(kernel.pid))
    for _ in range(100):
        if (folder / "kernel.json").exists():
            break
        time.sleep(0.2)
    time.sleep(1)
    _client(folder)
    _log(folder, f"start {notebook} ({len(_cells(folder))} cells)")
    print(f"kernel started; {len(_cells(folder))} cells")


def show(folder: Path, index: int) -> None:
    cell = _cells(folder)[index]
    _log(folder, f"show {index} {cell['cell_type']}")
    print(f"--- cell {index} of {len(_cells(folder))} ({cell['cell_type']}) ---")
    print("".join(cell["source"]))


def run(folder: Path, index: int, own: str | None = None) -> None:
    source = Path(own).read_text(encoding="utf-8") if own else "".join(_cells(folder)[index]["source"])
    client, began, status = _client(folder), time.time(), "ok"
    msg_id = client.execute(source, store_history=True)
    while True:
        try:
            msg = client.get_iopub_msg(timeout=900)
        except queue.Empty:
            status = "timeout"
            break
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            print(content["text"], end="")
        elif kind in ("execute_result", "display_data"):
            print(content["data"].get("text/plain", "[" + ", ".join(content["data"]) + "]"))
        elif kind == "error":
            status = "error"
            print("\n".join(content["traceback"])[-4000:])
        elif kind == "status" and content["execution_state"] == "idle":
            break
    seconds = time.time() - began
    _log(folder, f"run {index} {status} {seconds:.1f}s{' (own source)' if own else ''}")
    print(f"--- cell {index}: {status} in {seconds:.1f}s ---")


def stop(folder: Path) -> None:
    try:
        os.killpg(int((folder / "kernel.pid").read_text()), signal.SIGTERM)
    except (OSError, ValueError) as e:
        print(f"the kernel was gone already: {e}")
    _log(folder, "stop")
    lines = [line.split("\t") for line in (folder / "walk.log").read_text(encoding="utf-8").splitlines()]
    ran = sum(float(line[2].split()[3][:-1]) for line in lines if line[2].startswith("run "))
    wall = float(lines[-1][0]) - float(lines[0][0])
    print(f"wall {wall / 60:.1f} min, of it cells running {ran / 60:.1f} min")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("start", "show", "run", "log", "stop"):
        print(__doc__)
        return 2
    command, folder = argv[0], Path(argv[1]).resolve()
    if command == "start":
        start(folder, argv[2], argv[3])
    elif command == "show":
        show(folder, int(argv[2]))
    elif command == "run":
        run(folder, int(argv[2]), argv[3] if len(argv) > 3 else None)
    elif command == "log":
        _log(folder, " ".join(argv[2:]))
    else:
        stop(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
