"""Outcomes: what running an answer produced, in a form two processes can agree on.

A check never compares a learner's objects directly. It first turns what happened into an
*outcome* made of plain data (tensors, numbers, strings, tuples, lists, dicts), then compares
two outcomes. The same functions serve the notebook's instant :func:`course.checks.check`
(everything in one process) and the grader (the learner's answer runs in a worker process,
the outcome travels back through ``torch.save``/``torch.load(weights_only=True)``, and the
grading process compares it with the expected outcome it computed itself).

An outcome is a dict with a ``kind``::

    {"kind": "value", "value": <encoded value>}     # the answer returned (or is) a value
    {"kind": "raised", "type": "RuntimeError", "message": "..."}
    {"kind": "not attempted"}                       # the stub's NotImplementedError
    {"kind": "timeout", "seconds": 10.0}

Encoded values: tensors become plain detached CPU tensors; ``torch.Size`` a tuple; an
exception class (a predicted error, e.g. ``RuntimeError``) ``{"exception": "RuntimeError"}``;
dtypes and devices their ``str``; anything else ``{"repr": repr(obj)}``.

Example:
    >>> import torch
    >>> a = value_outcome(torch.tensor([1.0, 2.0]))
    >>> same(a, value_outcome([1.0, 2.0]))
    (True, '')
    >>> same(a, value_outcome(torch.tensor([1.0, 3.0])))
    (False, 'values differ')
    >>> show(value_outcome(RuntimeError))
    'raises RuntimeError'
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch

__all__ = [
    "encode",
    "is_not_attempted_error",
    "raised_outcome",
    "same",
    "show",
    "value_outcome",
]

_MAX_ITEMS = 10_000  # longest sequence we encode item by item
_MAX_DEPTH = 20
_MAX_REPR = 300
_STUB = re.compile(r"^exercise \d+\.\d+")


def encode(value: Any, _depth: int = 0) -> Any:
    """Turn ``value`` into plain data that ``torch.load(weights_only=True)`` accepts.

    Args:
        value: whatever an answer returned.

    Returns:
        The encoded value (see the module docstring).

    Example:
        >>> encode((torch.Size([2, 3]), torch.float32, ValueError))
        ((2, 3), {'dtype': 'torch.float32'}, {'exception': 'ValueError'})
    """
    if _depth > _MAX_DEPTH:
        return {"repr": "<nested too deep>"}
    if isinstance(value, torch.Tensor):
        return _encode_tensor(value)
    if value is None or isinstance(value, (bool, int, float, complex, str)):
        return value.__class__(value) if value is not None else None  # drop subclasses
    if isinstance(value, type) and issubclass(value, BaseException):
        return {"exception": value.__name__}
    if isinstance(value, BaseException):
        return {"exception": type(value).__name__}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value)}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, (tuple, list)) and len(value) <= _MAX_ITEMS:
        items = [encode(v, _depth + 1) for v in value]
        return list(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, dict) and len(value) <= _MAX_ITEMS:
        return {"dict": [(encode(k, _depth + 1), encode(v, _depth + 1)) for k, v in value.items()]}
    if isinstance(value, type):
        return {"type": value.__qualname__}
    try:
        text = repr(value)
    except Exception as e:  # a learner's object with a broken __repr__
        text = f"<unrepresentable {type(e).__name__}>"
    return {"repr": text[:_MAX_REPR]}


def _encode_tensor(t: torch.Tensor) -> Any:
    try:
        plain = t.detach()
        if plain.layout != torch.strided:
            plain = plain.to_dense()
        plain = plain.cpu()
        if type(plain) is not torch.Tensor:
            plain = plain.as_subclass(torch.Tensor)
        return plain.clone()
    except Exception:
        return {"repr": f"<tensor that cannot be copied: {type(t).__name__}>"}


def value_outcome(value: Any) -> dict:
    """The outcome of an answer that returned (or is) ``value``."""
    return {"kind": "value", "value": encode(value)}


def raised_outcome(error: BaseException) -> dict:
    """The outcome of an answer that raised ``error``."""
    return {"kind": "raised", "type": type(error).__name__, "message": str(error)[:_MAX_REPR]}


def is_not_attempted_error(error: BaseException) -> bool:
    """Is ``error`` the stub's ``NotImplementedError("exercise N.M")`` (or a bare one)?

    Example:
        >>> is_not_attempted_error(NotImplementedError("exercise 2.3"))
        True
        >>> is_not_attempted_error(NotImplementedError("aten::foo has no CPU kernel"))
        False
    """
    if not isinstance(error, NotImplementedError):
        return False
    return not error.args or bool(_STUB.match(str(error.args[0])))


def same(yours: dict, expected: dict, rtol: float = 1e-5, atol: float = 1e-6) -> tuple[bool, str]:
    """Compare two outcomes.

    Args:
        yours: the learner's outcome.
        expected: the oracle's outcome.
        rtol, atol: tolerances for floating-point values (``torch.allclose``'s meaning).

    Returns:
        ``(True, "")`` when they agree, else ``(False, reason)``.
    """
    if yours.get("kind") != expected.get("kind"):
        return False, "different outcome"
    if expected["kind"] == "raised":
        ok, why = yours["type"] == expected["type"], "a different exception"
    elif expected["kind"] != "value":
        ok, why = True, ""
    else:
        ok, why = _same_value(yours["value"], expected["value"], rtol, atol)
    return bool(ok), "" if ok else why


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, complex)) and not isinstance(v, bool)


def _numeric_tree(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_numeric_tree(x) for x in v)
    return _is_number(v) or isinstance(v, bool)


def _same_value(a: Any, b: Any, rtol: float, atol: float) -> tuple[bool, str]:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return _same_tensor(a, b, rtol, atol)
    if _is_number(a) and _is_number(b):
        if isinstance(a, complex) or isinstance(b, complex):
            return (abs(a - b) <= atol + rtol * abs(b)), "values differ"
        if math.isnan(a) and math.isnan(b):
            return True, ""
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol), "values differ"
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return False, f"length {len(a)}, expected {len(b)}"
        for x, y in zip(a, b):
            ok, why = _same_value(x, y, rtol, atol)
            if not ok:
                return ok, why
        return True, ""
    if isinstance(a, dict) and isinstance(b, dict) and "dict" in a and "dict" in b:
        ka, kb = [k for k, _ in a["dict"]], [k for k, _ in b["dict"]]
        if sorted(map(repr, ka)) != sorted(map(repr, kb)):
            return False, "different keys"
        values_b = {repr(k): v for k, v in b["dict"]}
        return _same_value([v for _, v in a["dict"]], [values_b[repr(k)] for k in ka], rtol, atol)
    return (type(a) is type(b) and a == b), "values differ"


def _same_tensor(a: Any, b: Any, rtol: float, atol: float) -> tuple[bool, str]:
    # A number or nested list may stand for a tensor (a prediction written as `2.0`).
    if not isinstance(a, torch.Tensor):
        if not _numeric_tree(a):
            return False, "expected a tensor"
        a = torch.as_tensor(a, dtype=b.dtype)
    elif not isinstance(b, torch.Tensor):
        if not _numeric_tree(b):
            return False, "expected no tensor"
        b = torch.as_tensor(b, dtype=a.dtype)
    if a.shape != b.shape:
        return False, f"shape {tuple(a.shape)}, expected {tuple(b.shape)}"
    if a.dtype != b.dtype:
        return False, f"dtype {a.dtype}, expected {b.dtype}"
    if a.is_floating_point() or a.is_complex():
        return torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True), "values differ"
    return torch.equal(a, b), "values differ"


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
    return _show_value(outcome.get("value"))


def _show_value(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return repr(v)
    if isinstance(v, dict):
        if "exception" in v:
            return f"raises {v['exception']}"
        if "dict" in v:
            return "{" + ", ".join(f"{_show_value(k)}: {_show_value(x)}" for k, x in v["dict"]) + "}"
        key, text = next(iter(v.items()))
        return text if key == "repr" else str(text)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_show_value(x) for x in v)
        if isinstance(v, tuple):
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return f"[{inner}]"
    return repr(v)
