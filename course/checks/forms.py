"""Right value, other form: how a check tells a learner what form to give an answer in.

An answer can hold the expected value yet fail :func:`course.checks.comparison.same`: the
string ``"runtimeerror"`` for the class ``RuntimeError``, an int tensor for a float one,
``"c"`` for ``"C"``, a dict where a list belongs. :func:`same_but_for_form` recognizes such an
answer by forgetting the form of both values (tensors as nested floats, strings folded, keys
folded) and comparing what is left; :func:`describe_form` then names the form the check expects
("a list of 7 strings", "a float"), never the value itself.

Example:
    >>> from course.checks.outcomes import value_outcome
    >>> same_but_for_form(value_outcome("runtimeerror"), value_outcome(RuntimeError))
    True
    >>> describe_form(value_outcome(RuntimeError))
    'the exception class RuntimeError (not a string)'
"""

from __future__ import annotations

import math
from typing import Any

import torch

from course.checks.comparison import kind_of_dtype, same

__all__ = ["describe_form", "same_but_for_form"]


def _loose(v: Any) -> Any:
    """``v`` with its form forgotten: tensors as nested lists of floats, strings folded,
    exception classes as their names, sequences as lists, dicts with folded keys."""
    if isinstance(v, torch.Tensor):
        try:
            return _loose(v.double().tolist() if not v.is_complex() else v.tolist())
        except Exception:
            return v
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)  # "8.0" for 8.0
        except ValueError:
            return "".join(v.split()).casefold().replace('"', "'")
    if isinstance(v, (list, tuple)):
        if v and all(isinstance(x, (list, tuple)) and len(x) == 2 for x in v):  # pairs: maybe a dict
            keys = [_loose(k) for k, _ in v]
            if all(isinstance(k, (str, float)) for k in keys) and len(set(map(repr, keys))) == len(keys):
                return {"pairs": sorted((repr(k), repr(_loose(x))) for (_, x), k in zip(v, keys))}
        return [_loose(x) for x in v]
    if isinstance(v, dict):
        if "exception" in v:
            return _loose(v["exception"])
        if "repr" in v:
            return _loose(v["repr"])
        if "dict" in v:
            return {"pairs": sorted((repr(_loose(k)), repr(_loose(x))) for k, x in v["dict"])}
        key, text = next(iter(v.items()))
        return _loose(text)
    return v


def _loosely_equal(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_loosely_equal(x, y, rtol, atol) for x, y in zip(a, b))
    return a == b


def same_but_for_form(yours: dict, expected: dict, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """Is ``yours`` the expected value written in another form (type, dtype, spelling)?

    Example:
        >>> from course.checks.outcomes import value_outcome
        >>> same_but_for_form(value_outcome("runtimeerror"), value_outcome(RuntimeError))
        True
        >>> same_but_for_form(value_outcome(torch.tensor([1, 2])), value_outcome(torch.tensor([1.0, 2.0])))
        True
        >>> same_but_for_form(value_outcome(3), value_outcome(4.0))
        False
    """
    if yours.get("kind") != "value" or expected.get("kind") != "value":
        return False
    if same(yours, expected, rtol, atol)[0]:
        return False
    return _loosely_equal(_loose(yours["value"]), _loose(expected["value"]), rtol, atol)


def describe_form(outcome: dict, secret: bool = False) -> str:
    """How the expected value is written, in words ("a list of 7 strings", "a float").
    With ``secret`` (a prediction), a string is described without its letters.

    Example:
        >>> from course.checks.outcomes import value_outcome
        >>> describe_form(value_outcome(["z", "x"]))
        'a list of 2 strings'
        >>> describe_form(value_outcome({"a": True}))
        'a dict from strings to bools'
        >>> describe_form(value_outcome("mul pre"), secret=True)
        'a string, spelled exactly as the exercise spells it'
    """
    value = outcome.get("value")
    if secret and isinstance(value, str):
        return "a string, spelled exactly as the exercise spells it"
    return _form(value)


def _plural(form: str) -> str:
    word = form.split(" ", 1)[1] if form.startswith(("a ", "an ")) else form
    return word + ("es" if word.endswith("ss") else "s") if " " not in word else word


def _form(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        plain = ("a bool (True or False)", "an int", "a float", "a complex number")[kind_of_dtype(v.dtype)]
        if v.dim() == 0:
            return f"{plain} (or a {str(v.dtype).replace('torch.', '')} tensor)"
        return f"a {str(v.dtype).replace('torch.', '')} tensor of shape {tuple(v.shape)}"
    if isinstance(v, bool):
        return "a bool (True or False)"
    if isinstance(v, int):
        return "an int"
    if isinstance(v, float):
        return "a float"
    if isinstance(v, str):
        return f"the string {v!r}"
    if isinstance(v, (list, tuple)):
        kind = "list" if isinstance(v, list) else "tuple"
        forms = {_form(x).split(" (")[0] if not isinstance(x, str) else "a string" for x in v}
        if len(forms) == 1:
            return f"a {kind} of {len(v)} {_plural(forms.pop())}"
        return f"a {kind} of {len(v)} items"
    if isinstance(v, dict):
        if "exception" in v:
            return f"the exception class {v['exception']} (not a string)"
        if "dict" in v:
            keys = {"strings" if isinstance(k, str) else _plural(_form(k)) for k, _ in v["dict"]}
            values = {
                "strings" if isinstance(x, str) else _plural(_form(x).split(" (")[0]) for _, x in v["dict"]
            }
            if len(keys) == 1 and len(values) == 1:
                return f"a dict from {keys.pop()} to {values.pop()}"
            return "a dict"
        key, text = next(iter(v.items()))
        return f"a {key} value"
    return "a value like the example in the exercise"
