"""``checkpoint(..., debug=True)``: when the recomputation disagrees, show both op lists.

A determinism error says *that* the forward and the recomputation saved different
tensors, not *where* they parted. With ``debug=True`` the checkpoint runs both under an
op log (a ``TorchDispatchMode`` that writes down every aten op) and, on a
``CheckpointError``, raises a new one carrying both lists, numbered, so the first line
that differs is the place to look::

    context_fn, unpack_error_cb = debug_context_and_cb()
    fwd_log, recompute_log = context_fn()      # the forward runs in one, the recomputation in the other
    unpack_error_cb(error)                     # raises CheckpointError(both lists) from error

Example:
    >>> import torch
    >>> context_fn, cb = debug_context_and_cb()
    >>> fwd, rec = context_fn()
    >>> with fwd:
    ...     _ = torch.ones(2).sin()
    >>> with rec:
    ...     _ = torch.ones(2).cos()
    >>> try:
    ...     cb(CheckpointError("mismatch"))
    ... except CheckpointError as e:
    ...     print(str(e).split("in order")[1].strip())
    forward:
      1. aten.ones.default
      2. aten.sin.default
    recomputation:
      1. aten.ones.default
      2. aten.cos.default

Differences from torch: torch's debug mode records stack traces (Python, TorchScript and
C++) for every op with ``LoggingTensorMode`` and ``capture_logs`` from its test utilities;
we record op names only, which is what a learner compares first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import NoReturn

from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointError

__all__ = ["debug_context_and_cb", "debug_enabled", "set_checkpoint_debug_enabled"]

_checkpoint_debug_enabled: bool | None = None


@contextlib.contextmanager
def set_checkpoint_debug_enabled(enabled: bool | None) -> Iterator[None]:
    """Inside the block, every checkpoint runs as with ``debug=enabled`` (None: each its own).

    Example:
        >>> with set_checkpoint_debug_enabled(True):
        ...     debug_enabled(False)
        True
        >>> debug_enabled(False)
        False
    """
    global _checkpoint_debug_enabled
    prev = _checkpoint_debug_enabled
    try:
        _checkpoint_debug_enabled = enabled
        yield
    finally:
        _checkpoint_debug_enabled = prev


def debug_enabled(debug: bool) -> bool:
    """The ``debug`` a checkpoint uses: the open :func:`set_checkpoint_debug_enabled`'s, else its own."""
    return debug if _checkpoint_debug_enabled is None else _checkpoint_debug_enabled


class _OpLog(TorchDispatchMode):
    """Writes down the name of every aten op that runs inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _numbered(ops: list[str]) -> str:
    return "\n".join(f"  {i}. {op}" for i, op in enumerate(ops, 1)) or "  (no ops)"


def debug_context_and_cb() -> tuple[
    Callable[[], tuple[_OpLog, _OpLog]], Callable[[CheckpointError], NoReturn]
]:
    """A ``context_fn`` that logs both runs, and the callback that reports them on an error."""
    logs: dict[str, _OpLog] = {}

    def context_fn() -> tuple[_OpLog, _OpLog]:
        logs["forward"], logs["recomputation"] = _OpLog(), _OpLog()
        return logs["forward"], logs["recomputation"]

    def unpack_error_cb(e: CheckpointError) -> NoReturn:
        raise CheckpointError(
            f"{e}\n\ncourse.checkpoint (debug=True): the aten ops of both runs, in order\n"
            f"forward:\n{_numbered(logs['forward'].ops)}\nrecomputation:\n{_numbered(logs['recomputation'].ops)}"
        ) from e

    return context_fn, unpack_error_cb
