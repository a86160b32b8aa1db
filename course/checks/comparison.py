"""Comparing two outcomes: the one rule by which every check decides "same" or "not".

Both outcomes are plain data (:mod:`course.checks.outcomes`). :func:`same` says whether they
agree and, when not, why, in a few words that point at the place: the index of a tensor's
largest error, the key of a dict, the position in a list. :func:`differing_part` digs out the
first item where two containers differ, so a verdict shows that item rather than the whole.

The rule, for every lesson (see docs/authoring.md, "How answers compare")::

    same(value_outcome(8), value_outcome(8.0))                        # OK: Python's ==
    same(value_outcome((1, 2)), value_outcome([1, 2]))                # OK: a tuple for a list
    same(value_outcome(40), value_outcome(40.78))                     # BAD: an int is exact
    same(value_outcome(8), value_outcome(torch.tensor(8.0)))          # OK: converts unchanged
    same(value_outcome(torch.tensor([1, 2])), value_outcome(torch.tensor([1.0, 2.0])))  # BAD: dtype
    same(value_outcome("c"), value_outcome("C"))                      # BAD: strings are exact

An outcome that agrees in value but left state behind (its ``left`` entry,
:mod:`course.checks.leftovers`) is not the same either.

Example:
    >>> from course.checks.outcomes import value_outcome
    >>> same(value_outcome(torch.tensor([1.0, 2.0])), value_outcome(torch.tensor([1.0, 3.0])))
    (False, 'max error 1 at index (1,), shape (2,)')
    >>> same(value_outcome({"w": 1, "b": 2}), value_outcome({"b": 2, "w": 1}))
    (True, '')
"""

from __future__ import annotations

import math
from typing import Any

import torch

from course.checks.wording import show_value

__all__ = ["differing_part", "is_number", "kind_of_dtype", "left_text", "same", "same_value"]


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
        ok, why = same_value(yours["value"], expected["value"], rtol, atol)
    if ok and yours.get("left") != expected.get("left"):  # right value, but state left behind
        return False, left_text(yours) or "left nothing behind, unlike the reference"
    return bool(ok), "" if ok else why


def left_text(outcome: dict) -> str:
    """What an answer left behind, in words ("" when nothing): see ``course.checks.leftovers``.

    Example:
        >>> left_text({"kind": "value", "value": 1, "left": [["grad mode", "grad mode turned off"]]})
        'left behind: grad mode turned off'
    """
    sentences = [sentence for _, sentence in outcome.get("left") or []]
    return "left behind: " + "; ".join(sentences) if sentences else ""


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float, complex)) and not isinstance(v, bool)


def _numeric_tree(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_numeric_tree(x) for x in v)
    return is_number(v) or isinstance(v, bool)


_KINDS = ("bool", "integer", "floating", "complex")


def _kind_of_value(v: Any) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex: the widest kind in a number or nested list."""
    if isinstance(v, (list, tuple)):
        return max((_kind_of_value(x) for x in v), default=0)
    return 0 if isinstance(v, bool) else 1 if isinstance(v, int) else 2 if isinstance(v, float) else 3


def kind_of_dtype(dtype: torch.dtype) -> int:
    if dtype == torch.bool:
        return 0
    return 3 if dtype.is_complex else 2 if dtype.is_floating_point else 1


def same_value(a: Any, b: Any, rtol: float, atol: float, where: str = "") -> tuple[bool, str]:
    at = f"at {where}: " if where else ""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        ok, why = _same_tensor(a, b, rtol, atol)
        return ok, "" if ok else at + why
    if isinstance(a, (bool, int, float, complex)) and isinstance(b, (bool, int, float, complex)):
        return _same_number(a, b, rtol, atol, at)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):  # a tuple for a list is fine
        if len(a) != len(b):
            return False, f"{at}length {len(a)}, expected {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            ok, why = same_value(x, y, rtol, atol, f"{where}[{i}]")
            if not ok:
                return ok, why
        return True, ""
    if isinstance(a, dict) and isinstance(b, dict) and "dict" in a and "dict" in b:
        ka, kb = [k for k, _ in a["dict"]], [k for k, _ in b["dict"]]
        if sorted(map(repr, ka)) != sorted(map(repr, kb)):
            missing = sorted(set(map(repr, kb)) - set(map(repr, ka)))
            extra = sorted(set(map(repr, ka)) - set(map(repr, kb)))
            parts = ([f"missing key {missing[0]}"] if missing else []) + (
                [f"unexpected key {extra[0]}"] if extra else []
            )
            return False, at + ", ".join(parts)
        values_b = {repr(k): v for k, v in b["dict"]}
        for k, v in a["dict"]:
            ok, why = same_value(v, values_b[repr(k)], rtol, atol, f"{where}[{show_value(k)}]")
            if not ok:
                return ok, why
        return True, ""
    return (type(a) is type(b) and a == b), at + "values differ"


def _same_number(a: Any, b: Any, rtol: float, atol: float, at: str) -> tuple[bool, str]:
    if isinstance(a, complex) or isinstance(b, complex):
        return (abs(a - b) <= atol + rtol * abs(b)), at + "values differ"
    if not isinstance(a, float) or not isinstance(b, float):  # an int or a bool is exact
        if a == b:
            return True, ""
        if (
            isinstance(b, float)
            and not isinstance(a, float)
            and math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
        ):
            return False, f"{at}{a!r} is an int, compared exactly: write the float with its decimals"
        return False, at + "values differ"
    if math.isnan(a) and math.isnan(b):
        return True, ""
    return math.isclose(a, b, rel_tol=rtol, abs_tol=atol), at + "values differ"


def _same_tensor(a: Any, b: Any, rtol: float, atol: float) -> tuple[bool, str]:
    # A number or nested list may stand for a tensor (a prediction written as `2.0`) when it
    # converts to the tensor's dtype without change; a tensor must have the expected dtype.
    if not isinstance(a, torch.Tensor):
        if not _numeric_tree(a):
            return False, "expected a tensor"
        if _kind_of_value(a) > kind_of_dtype(b.dtype):
            return False, f"{_KINDS[_kind_of_value(a)]} values, expected {b.dtype}"
        try:
            a = torch.as_tensor(a, dtype=b.dtype)
        except (TypeError, ValueError, RuntimeError):
            return False, "not a rectangular list of numbers"
    elif not isinstance(b, torch.Tensor):
        if not _numeric_tree(b):
            return False, "expected no tensor"
        if kind_of_dtype(a.dtype) != _kind_of_value(b):
            return False, f"dtype {a.dtype}, expected {_KINDS[_kind_of_value(b)]} values"
        b = torch.as_tensor(b, dtype=a.dtype)
    if a.shape != b.shape:
        return False, f"shape {tuple(a.shape)}, expected {tuple(b.shape)}"
    if a.dtype != b.dtype:
        return False, f"dtype {a.dtype}, expected {b.dtype}"
    if a.is_floating_point() or a.is_complex():
        if torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            return True, ""
        return False, _max_error(a, b)
    return torch.equal(a, b), _first_difference(a, b)


def _max_error(a: torch.Tensor, b: torch.Tensor) -> str:
    err = (a.double() - b.double()).abs() if not a.is_complex() else (a - b).abs().double()
    err = torch.where(torch.isnan(a) & torch.isnan(b), torch.zeros_like(err), err).nan_to_num(nan=math.inf)
    if err.numel() == 0:
        return "values differ"
    flat = int(err.argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), err.shape)) if err.dim() else ()
    return f"max error {err.max().item():.3g} at index {index}, shape {tuple(a.shape)}"


def _first_difference(a: torch.Tensor, b: torch.Tensor) -> str:
    diff = (a != b).nonzero()
    if len(diff) == 0:
        return "values differ"
    return f"first difference at index {tuple(int(i) for i in diff[0])}, shape {tuple(a.shape)}"


def differing_part(
    yours: dict, expected: dict, rtol: float = 1e-5, atol: float = 1e-6
) -> tuple[dict, dict] | None:
    """The first item (of a tuple, list or dict, however deep) where two value outcomes
    differ, as two value outcomes; None when they do not differ inside a container.

    Example:
        >>> from course.checks.outcomes import show, value_outcome
        >>> a, b = value_outcome({"W.grad": 1.0, "ok": True}), value_outcome({"W.grad": 1.0, "ok": False})
        >>> [show(o) for o in differing_part(a, b)]
        ['True', 'False']
    """
    if yours.get("kind") != "value" or expected.get("kind") != "value":
        return None
    found = _first_differing(yours["value"], expected["value"], rtol, atol)
    return None if found is None else (_encoded_outcome(found[0]), _encoded_outcome(found[1]))


def _encoded_outcome(encoded: Any) -> dict:
    """A value outcome around an already encoded value."""
    return {"kind": "value", "value": encoded}


def _first_differing(a: Any, b: Any, rtol: float, atol: float) -> tuple[Any, Any] | None:
    pairs: list = []
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        pairs = list(zip(a, b))
    elif isinstance(a, dict) and isinstance(b, dict) and "dict" in a and "dict" in b:
        values_b = {repr(k): v for k, v in b["dict"]}
        if sorted(values_b) == sorted(repr(k) for k, _ in a["dict"]):
            pairs = [(v, values_b[repr(k)]) for k, v in a["dict"]]
    for x, y in pairs:
        if not same_value(x, y, rtol, atol)[0]:
            return _first_differing(x, y, rtol, atol) or (x, y)
    return None
