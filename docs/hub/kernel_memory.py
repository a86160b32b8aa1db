"""Measure a lesson kernel's peak memory: run a notebook top to bottom in a fresh kernel
and sample the kernel process's resident memory (its children included) with psutil.

    .venv/bin/python docs/hub/kernel_memory.py solutions/01_autograd_graph.ipynb
"""

import subprocess
import sys
import threading
import time

import nbformat
import psutil
from nbclient import NotebookClient


def peak_rss(path: str) -> tuple[int, float]:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            process = client.km.provisioner.process if client.km and client.km.provisioner else None
            try:
                if process is not None:
                    kernel = psutil.Process(process.pid)
                    rss = kernel.memory_info().rss + sum(c.memory_info().rss for c in kernel.children(recursive=True))
                    peak[0] = max(peak[0], rss)
            except psutil.Error:
                pass  # the kernel is starting or has just ended
            time.sleep(0.05)

    threading.Thread(target=sample, daemon=True).start()
    began = time.monotonic()
    client.execute(stderr=subprocess.DEVNULL)
    done.set()
    return peak[0], time.monotonic() - began


if __name__ == "__main__":
    for path in sys.argv[1:]:
        rss, seconds = peak_rss(path)
        print(f"{path}: kernel peak RSS {rss / 2**20:.0f} MiB ({rss / 1e6:.0f} MB), ran in {seconds:.0f} s")
