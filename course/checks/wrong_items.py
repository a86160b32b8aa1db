"""Where a prediction is wrong, said without giving away the truth.

A failed prediction must not show torch's answer (the learner would copy it), yet "wrong"
alone teaches nothing. So the check says what it can from the truth's *form* and the *places*
that differ:

- :func:`item_options`: what each item may be (the exercise's options, or True/False when every
  item of the truth is a bool);
- :func:`outside_domain`: an item that is no possible answer at all ("item [1] is 'yes', not
  one of True, False", a string where a number belongs);
- :func:`wrong_places`: which items, keys or elements are wrong and how many; for items that
  take one of two values only how many (naming them would name the answer).

Example:
    >>> from course.checks.outcomes import value_outcome
    >>> wrong_places(value_outcome(["a", "b", "c"]), value_outcome(["a", "x", "y"]))
    '2 of 3 items are wrong: positions [1], [2]'
    >>> wrong_places(value_outcome([True, True]), value_outcome([True, False]), which=False)
    '1 of 2 items is wrong'
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from course.checks.comparison import is_number, same_value
from course.checks.wording import show_value

__all__ = ["item_options", "outside_domain", "wrong_places"]


def _leaves(v: Any) -> Iterator[Any]:
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _leaves(x)
    elif isinstance(v, dict) and "dict" in v:
        for _, x in v["dict"]:
            yield from _leaves(x)
    else:
        yield v


def item_options(expected: dict, options: tuple = ()) -> tuple:
    """The values each item of a prediction may take: ``options`` when the exercise gives them,
    ``(True, False)`` when every item of the truth is a bool, else ``()`` (any value).

    Example:
        >>> from course.checks.outcomes import value_outcome
        >>> item_options(value_outcome({"a": True, "b": False}))
        (True, False)
        >>> item_options(value_outcome([3, 3, 1]))
        ()
    """
    if options:
        return tuple(options)
    leaves = list(_leaves(expected.get("value"))) if expected.get("kind") == "value" else []
    return (True, False) if leaves and all(isinstance(v, bool) for v in leaves) else ()


def _option_text(options: tuple) -> str:
    return ", ".join(repr(o) for o in options)


def _outside(a: Any, b: Any, options: tuple, where: str) -> Iterator[str]:
    if isinstance(b, (list, tuple)) and isinstance(a, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _outside(x, y, options, f"item [{i}]")
        return
    if isinstance(b, dict) and "dict" in b and isinstance(a, dict) and "dict" in a:
        theirs = {repr(k): v for k, v in b["dict"]}
        for k, x in a["dict"]:
            if repr(k) in theirs:
                yield from _outside(x, theirs[repr(k)], options, f"the value of {show_value(k)}")
        return
    if options and any(type(b) is type(o) and b == o for o in options):
        if not any(same_value(a, o, 0.0, 0.0)[0] for o in options):
            yield f"{where} is {show_value(a)}, not one of {_option_text(options)}"
    elif isinstance(a, str) and (is_number(b) or isinstance(b, torch.Tensor)):
        yield f"{where} is the string {a!r}, not a number: write the number itself, without quotes"
    elif a is None and (is_number(b) or isinstance(b, torch.Tensor)):
        yield f"{where} is None, not a number"


def outside_domain(yours: dict, expected: dict, options: tuple = ()) -> str:
    """Why ``yours`` (a prediction) is not a possible answer at all, judged against the form
    of the truth and never its value ("" when every item may be an answer): an item that is not
    one of ``options``, a string or None where a number belongs.

    Example:
        >>> from course.checks.outcomes import value_outcome
        >>> outside_domain(value_outcome([True, "yes"]), value_outcome([True, False]), (True, False))
        "item [1] is 'yes', not one of True, False"
        >>> outside_domain(value_outcome("8.0"), value_outcome(torch.tensor(8.0)))
        "your answer is the string '8.0', not a number: write the number itself, without quotes"
        >>> outside_domain(value_outcome([False, 1]), value_outcome([True, False]), (True, False))
        ''
    """
    if yours.get("kind") != "value" or expected.get("kind") != "value":
        return ""
    found = list(_outside(yours["value"], expected["value"], tuple(options), "your answer"))
    return "; ".join(found[:3]) + ("; ..." if len(found) > 3 else "")


def wrong_places(
    yours: dict, expected: dict, rtol: float = 1e-5, atol: float = 1e-6, which: bool = True
) -> str:
    """Where a prediction differs from the truth, without the truth's values: which items,
    keys or elements are wrong, and how many ("" for a single wrong value). With ``which``
    False (items that take one of two values, where naming the wrong ones names the answer),
    only how many.

    Example:
        >>> from course.checks.outcomes import value_outcome
        >>> wrong_places(value_outcome(["a", "b", "c"]), value_outcome(["a", "x", "y"]))
        '2 of 3 items are wrong: positions [1], [2]'
        >>> wrong_places(value_outcome({"w": 1.0, "b": 2.0}), value_outcome({"w": 1.0, "b": 3.0}))
        "1 of 2 values are wrong: key 'b'"
        >>> wrong_places(value_outcome({"w": 1.0}), value_outcome({"w": 1.0, "b": 3.0}))
        "missing key 'b'"
        >>> wrong_places(value_outcome([True, True, True]), value_outcome([True, False, False]), which=False)
        '2 of 3 items are wrong'
    """
    if yours.get("kind") != "value" or expected.get("kind") != "value":
        return ""
    a, b = yours["value"], expected["value"]
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return _wrong_elements(a, b, rtol, atol)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{len(a)} items; torch's answer has {'more' if len(b) > len(a) else 'fewer'}"
        bad = [f"[{i}]" for i, (x, y) in enumerate(zip(a, b)) if not same_value(x, y, rtol, atol)[0]]
        return _places(bad, len(b), "items", "positions" if which else "")
    if isinstance(a, dict) and isinstance(b, dict) and "dict" in a and "dict" in b:
        mine, theirs = {repr(k): (k, v) for k, v in a["dict"]}, {repr(k): (k, v) for k, v in b["dict"]}
        missing = [show_value(theirs[k][0]) for k in theirs if k not in mine]
        extra = [show_value(mine[k][0]) for k in mine if k not in theirs]
        if missing or extra:
            parts = [f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}"] if missing else []
            parts += (
                [f"key{'s' if len(extra) > 1 else ''} torch's answer does not have: {', '.join(extra)}"]
                if extra
                else []
            )
            return "; ".join(parts)
        bad = [
            show_value(theirs[k][0])
            for k in theirs
            if not same_value(mine[k][1], theirs[k][1], rtol, atol)[0]
        ]
        return _places(bad, len(theirs), "values", ("key" if len(bad) == 1 else "keys") if which else "")
    return ""


def _places(bad: list[str], total: int, what: str, where: str) -> str:
    """ "2 of 5 values are wrong: keys 'a', 'b'" (no ``where``: only how many)."""
    if not bad:
        return ""
    if not where:
        return f"{len(bad)} of {total} {what} {'is' if len(bad) == 1 else 'are'} wrong"
    shown = ", ".join(bad[:8]) + (", ..." if len(bad) > 8 else "")
    return f"{len(bad)} of {total} {what} are wrong: {where} {shown}"


def _wrong_elements(a: Any, b: Any, rtol: float, atol: float) -> str:
    try:
        ta, tb = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    except Exception:
        return ""
    if ta.shape != tb.shape:
        return f"shape {tuple(ta.shape)} is not the shape of torch's answer"
    if ta.dim() == 0:
        return ""
    bad = (~torch.isclose(ta, tb, rtol=rtol, atol=atol, equal_nan=True)).nonzero().tolist()
    where = [str(tuple(i)) if len(i) > 1 else f"[{i[0]}]" for i in bad]
    return _places(where, ta.numel(), "elements", "at")
