"""Run a notebook top to bottom in a fresh Jupyter kernel of *this* Python environment.

Two users: ``course grade`` (run the learner's notebook headless, keep no outputs, record which
cells raised or timed out) and ``course assign --execute`` (run a solution notebook and store
its outputs for nbval). Both go through :func:`run_notebook`, built on nbclient.

Why "this environment": a kernelspec is looked up by name, and a ``python3`` kernel in the
user's Jupyter folder may point at another Python (without torch, or without ``course``).
:class:`CurrentEnvKernelSpecs` answers ``python3`` with ipykernel's spec for ``sys.executable``.

Timeouts: each cell gets ``cell_timeout`` seconds and the whole run ``total_timeout``. A cell
that runs out is interrupted (``KeyboardInterrupt`` in the kernel), recorded as timed out, and
the run goes on with the next cell while time remains; when the total runs out, the remaining
cells are recorded as skipped and the kernel is killed. Outputs are dropped as they arrive
when not kept, so a cell printing forever cannot fill the grader's memory.
"""

from __future__ import annotations

import math
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

__all__ = ["CellRecord", "CurrentEnvKernelSpecs", "NotebookRun", "TIMEOUT_ENAME", "run_notebook"]

#: The error name nbclient reports for a cell we interrupted after its timeout.
TIMEOUT_ENAME = "course-grade:CellTimeout"


class CurrentEnvKernelSpecs(KernelSpecManager):
    """Kernelspecs where ``python3`` always means ipykernel in the running Python."""

    def get_kernel_spec(self, kernel_name):
        if kernel_name in ("python3", "python"):
            import ipykernel.kernelspec as spec

            return self.kernel_spec_class(resource_dir=spec.RESOURCES, **spec.get_kernel_dict())
        return super().get_kernel_spec(kernel_name)


@dataclass
class CellRecord:
    """What happened to one code cell: status "ok", "error", "timeout" or "skipped"."""

    index: int
    status: str
    error: str = ""


@dataclass
class NotebookRun:
    """The record of one run: per code cell, plus totals."""

    cells: list[CellRecord] = field(default_factory=list)
    seconds: float = 0.0
    total_timed_out: bool = False
    kernel_died: bool = False

    def count(self, status: str) -> int:
        return sum(c.status == status for c in self.cells)


class _Client(NotebookClient):
    """nbclient, minus storing outputs when we do not want them."""

    keep_outputs = True

    def output(self, outs, msg, display_id, cell_index):
        return super().output(outs, msg, display_id, cell_index) if self.keep_outputs else None


def run_notebook(
    nb: nbformat.NotebookNode,
    cwd: Path,
    cell_timeout: float = 60,
    total_timeout: float = 600,
    keep_outputs: bool = False,
    allow_errors: bool = True,
    env: dict[str, str] | None = None,
) -> NotebookRun:
    """Execute ``nb`` in place (its cells get outputs only if ``keep_outputs``).

    Args:
        nb: the notebook (a copy you own; the file on disk is never touched here).
        cwd: the kernel's working directory.
        cell_timeout, total_timeout: seconds per cell and for the whole run.
        keep_outputs: store outputs in ``nb`` (for solutions) or drop them (for grading).
        allow_errors: go on after a cell raises (grading) or stop (solutions).
        env: the kernel's environment (default: this process's; the grader passes one
            without its signing key).

    Returns:
        A :class:`NotebookRun`.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised and ``allow_errors`` is False.
    """
    run = NotebookRun()
    start = time.monotonic()
    errors: dict[int, str] = {}

    def on_error(cell, cell_index, execute_reply):
        content = execute_reply["content"]
        errors[cell_index] = f"{content.get('ename', '')}: {content.get('evalue', '')}"

    client = _client(nb, cwd, cell_timeout, allow_errors, on_error)
    client.keep_outputs = keep_outputs
    # The kernel process's own stderr (app log lines, not the cells' output) goes nowhere.
    # cleanup_kc: we passed our own kernel manager, so nbclient would otherwise leave it running.
    extra = {} if env is None else {"env": env}
    with client.setup_kernel(
        cwd=str(cwd), stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cleanup_kc=True, **extra
    ):
        _run_cells(client, nb, run, errors, cell_timeout, deadline=start + total_timeout)
    run.seconds = time.monotonic() - start
    return run


def _client(nb, cwd: Path, cell_timeout: float, allow_errors: bool, on_error) -> _Client:
    """nbclient's client for ``nb``, on a kernel of this environment, that interrupts a cell at
    its timeout and records the error instead of raising."""
    km = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=CurrentEnvKernelSpecs())
    return _Client(
        nb,
        km=km,
        allow_errors=allow_errors,
        interrupt_on_timeout=True,
        error_on_timeout={
            "ename": TIMEOUT_ENAME,
            "evalue": f"cell ran past {cell_timeout:g} s",
            "traceback": [],
        },
        record_timing=False,
        shutdown_kernel="immediate",
        iopub_timeout=2,
        on_cell_error=on_error,
        resources={"metadata": {"path": str(cwd)}},
    )


def _run_cells(
    client, nb, run: NotebookRun, errors: dict[int, str], cell_timeout: float, deadline: float
) -> None:
    """Each code cell in order, each within its timeout and what is left of the total; after
    the total or a dead kernel, the rest are recorded as skipped."""
    for i in [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or run.kernel_died:
            run.total_timed_out = run.total_timed_out or not run.kernel_died
            why = "the kernel died" if run.kernel_died else "total timeout"
            run.cells.append(CellRecord(i, "skipped", "not run: " + why))
            continue
        client.timeout = max(1, math.ceil(min(cell_timeout, remaining)))
        try:
            client.execute_cell(nb.cells[i], i)
        except DeadKernelError:
            run.kernel_died = True
            errors[i] = "the kernel died"
        if i in errors and errors[i].startswith(TIMEOUT_ENAME):
            run.cells.append(CellRecord(i, "timeout", f"timed out after {client.timeout} s (interrupted)"))
        else:
            run.cells.append(CellRecord(i, "error" if i in errors else "ok", errors.get(i, "")))
