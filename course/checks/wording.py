"""How a verdict is worded: an outcome in one short line, clipped, wrapped and indented.

A check prints a verdict as fields, each a label and its text starting at one column::

    [9.1 double] failed: 0/1 cases
      case:     double(3)
      yours:    4
      expected: 6
      hint:     add, don't multiply?

Whatever an answer returned, the verdict stays about 15 lines: :func:`show` describes an
outcome briefly and deterministically (a large tensor by its shape, dtype and first values,
never its memory address), :func:`clip` cuts a field to a few lines, :func:`wrapped` breaks
prose at :data:`WIDTH` so the browser never cuts a word, and :func:`indent` keeps a field's
later lines under its first.

Example:
    >>> show({"kind": "value", "value": torch.zeros(3, 4)})
    'tensor of shape (3, 4), float32: [0, 0, 0, 0, 0, 0, ...]'
    >>> clip("one\\ntwo\\nthree", max_lines=2)
    'one\\ntwo ...'
"""

from __future__ import annotations

import textwrap
from typing import Any

import torch

__all__ = ["COLUMN", "WIDTH", "clip", "indent", "points_text", "show", "show_value", "wrapped"]

COLUMN = len("  expected: ")  # where the text of every field of a verdict starts
WIDTH = 88  # a verdict's prose wraps here: a JupyterLab output area on a laptop holds about 100


def points_text(n: float) -> str:
    """ "1 point", "2 points", "0.5 points": what a passed exercise earns, in words."""
    return f"{n:g} point" + ("" if n == 1 else "s")


def clip(text: str, max_lines: int = 3, max_chars: int = 300) -> str:
    """At most ``max_lines`` lines and ``max_chars`` characters of ``text`` (a failing check
    prints about 15 lines in all, whatever the answer returned)."""
    lines = text.splitlines() or [""]
    out = "\n".join(lines[:max_lines])
    if len(out) > max_chars:
        out = out[: max_chars - 3] + "..."
    elif len(lines) > max_lines:
        out += " ..."
    return out


def indent(text: str) -> str:
    """``text`` with every line after the first moved to the fields' column (:data:`COLUMN`)."""
    return text.replace("\n", "\n" + " " * COLUMN)


def wrapped(text: str) -> str:
    """``text`` broken at spaces into lines that end by column :data:`WIDTH`, each line after
    the first indented to the field's column. Words stay whole (a word longer than a line gets
    a line of its own), so a name like ``torch.autograd.graph.saved_tensors_hooks`` is never
    cut, and the browser never has to wrap the line itself (it cuts mid-word).

    Example:
        >>> print("  hint:     " + wrapped("gradients accumulate: the second .backward() adds "
        ...                                 "its 4 to the 4 already in a.grad, so set_to_none first"))
          hint:     gradients accumulate: the second .backward() adds its 4 to the 4 already in
                    a.grad, so set_to_none first
    """
    lines = [
        part
        for line in text.splitlines() or [""]
        for part in textwrap.wrap(line, WIDTH - COLUMN, break_long_words=False, break_on_hyphens=False)
        or [""]
    ]
    return indent("\n".join(lines))


def show(outcome: dict) -> str:
    """A short deterministic description of an outcome, for "yours:" / "expected:" lines.

    Example:
        >>> show({"kind": "raised", "type": "RuntimeError", "message": "boom"})
        'raised RuntimeError: boom'
    """
    kind = outcome.get("kind")
    if kind == "raised":
        return f"raised {outcome['type']}: {outcome['message']}"
    if kind == "not attempted":
        return "not attempted (NotImplementedError)"
    if kind == "timeout":
        return f"did not finish within {outcome['seconds']:g} s"
    return show_value(outcome.get("value"))


_SHOWN_ELEMENTS = 12  # a tensor with more elements is summarized, never printed whole


def show_value(v: Any) -> str:
    """An encoded value (see :mod:`course.checks.outcomes`) in words: a small tensor by its
    repr, a larger one by its shape, dtype and first values."""
    if isinstance(v, torch.Tensor):
        if v.numel() <= _SHOWN_ELEMENTS and v.dim() <= 1:
            return repr(v)
        flat = v.flatten()[:6].tolist()
        head = ", ".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in flat)
        more = ", ..." if v.numel() > 6 else ""
        return f"tensor of shape {tuple(v.shape)}, {str(v.dtype).replace('torch.', '')}: [{head}{more}]"
    if isinstance(v, dict):
        if "exception" in v:
            return f"raises {v['exception']}"
        if "dict" in v:
            return "{" + ", ".join(f"{show_value(k)}: {show_value(x)}" for k, x in v["dict"]) + "}"
        key, text = next(iter(v.items()))
        return text if key == "repr" else str(text)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(show_value(x) for x in v)
        if isinstance(v, tuple):
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return f"[{inner}]"
    return repr(v)
