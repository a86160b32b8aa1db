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

How values compare (one rule for every lesson, see docs/authoring.md, "How answers compare"):

- plain Python data compares as Python's ``==`` does: ``8`` for ``8.0``, ``1`` for ``True``,
  a tuple for a list; floats within the exercise's tolerance, but an int or a bool is
  exact (``40`` is not ``40.78``, whatever the tolerance);
- a tensor carries its dtype: a tensor answer must have the expected dtype (against a plain
  value, its kind: bool, integer, floating or complex); a plain value may stand for a tensor
  when it converts to the tensor's dtype without change (``8`` for ``tensor(8.)``);
- strings, exception classes and dict keys are exact. When a value is right but written in
  another form (``"RuntimeError"`` for the class, ``"c"`` for ``"C"``, an int tensor for a
  float one), :func:`same_but_for_form` says so and the check names the form it expects.

Encoded values: tensors become plain detached CPU tensors; ``torch.Size`` a tuple; an
exception class (a predicted error, e.g. ``RuntimeError``) ``{"exception": "RuntimeError"}``;
dtypes and devices their ``str``; anything else ``{"repr": repr(obj)}``.

Example:
    >>> import torch
    >>> a = value_outcome(torch.tensor([1.0, 2.0]))
    >>> same(a, value_outcome([1.0, 2.0]))
    (True, '')
    >>> same(a, value_outcome(torch.tensor([1.0, 3.0])))
    (False, 'max error 1 at index (1,), shape (2,)')
    >>> show(value_outcome(RuntimeError))
    'raises RuntimeError'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

import torch

__all__ = [
    "describe_form",
    "differing_part",
    "encode",
    "is_not_attempted_error",
    "item_options",
    "left_text",
    "outside_domain",
    "raised_outcome",
    "same",
    "same_but_for_form",
    "show",
    "value_outcome",
    "wrong_places",
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
    if value is None:
        return None
    for plain in (bool, int, float, complex, str):  # drop subclasses (numpy.float64 is a float)
        if isinstance(value, plain):
            return plain(value)
    if type(value).__module__ == "numpy" and hasattr(value, "dtype"):  # without importing numpy
        return _encode_numpy(value, _depth)
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


def _encode_numpy(value: Any, depth: int) -> Any:
    """A NumPy scalar as the Python number it holds (``numpy.float32(8)`` is ``8.0``,
    ``numpy.bool_(True)`` is ``True``); an array as a tensor of its dtype."""
    try:
        if getattr(value, "ndim", 0) == 0:
            return encode(value.item(), depth + 1)
        return _encode_tensor(torch.as_tensor(value))
    except Exception:  # an object array, a dtype torch does not have
        return {"repr": repr(value)[:_MAX_REPR]}


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


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, complex)) and not isinstance(v, bool)


def _numeric_tree(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_numeric_tree(x) for x in v)
    return _is_number(v) or isinstance(v, bool)


_KINDS = ("bool", "integer", "floating", "complex")


def _kind_of_value(v: Any) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex: the widest kind in a number or nested list."""
    if isinstance(v, (list, tuple)):
        return max((_kind_of_value(x) for x in v), default=0)
    return 0 if isinstance(v, bool) else 1 if isinstance(v, int) else 2 if isinstance(v, float) else 3


def _kind_of_dtype(dtype: torch.dtype) -> int:
    if dtype == torch.bool:
        return 0
    return 3 if dtype.is_complex else 2 if dtype.is_floating_point else 1


def _same_value(a: Any, b: Any, rtol: float, atol: float, where: str = "") -> tuple[bool, str]:
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
            ok, why = _same_value(x, y, rtol, atol, f"{where}[{i}]")
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
            ok, why = _same_value(v, values_b[repr(k)], rtol, atol, f"{where}[{_show_value(k)}]")
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
        if _kind_of_value(a) > _kind_of_dtype(b.dtype):
            return False, f"{_KINDS[_kind_of_value(a)]} values, expected {b.dtype}"
        try:
            a = torch.as_tensor(a, dtype=b.dtype)
        except (TypeError, ValueError, RuntimeError):
            return False, "not a rectangular list of numbers"
    elif not isinstance(b, torch.Tensor):
        if not _numeric_tree(b):
            return False, "expected no tensor"
        if _kind_of_dtype(a.dtype) != _kind_of_value(b):
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
        if not _same_value(x, y, rtol, atol)[0]:
            return _first_differing(x, y, rtol, atol) or (x, y)
    return None


# --- right value, other form ------------------------------------------------------------------


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


# --- a prediction's domain: what each item may be ----------------------------------------------


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
                yield from _outside(x, theirs[repr(k)], options, f"the value of {_show_value(k)}")
        return
    if options and any(type(b) is type(o) and b == o for o in options):
        if not any(_same_value(a, o, 0.0, 0.0)[0] for o in options):
            yield f"{where} is {_show_value(a)}, not one of {_option_text(options)}"
    elif isinstance(a, str) and (_is_number(b) or isinstance(b, torch.Tensor)):
        yield f"{where} is the string {a!r}, not a number: write the number itself, without quotes"
    elif a is None and (_is_number(b) or isinstance(b, torch.Tensor)):
        yield f"{where} is None, not a number"


def outside_domain(yours: dict, expected: dict, options: tuple = ()) -> str:
    """Why ``yours`` (a prediction) is not a possible answer at all, judged against the form
    of the truth and never its value ("" when every item may be an answer): an item that is not
    one of ``options``, a string or None where a number belongs.

    Example:
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
        bad = [f"[{i}]" for i, (x, y) in enumerate(zip(a, b)) if not _same_value(x, y, rtol, atol)[0]]
        return _places(bad, len(b), "items", "positions" if which else "")
    if isinstance(a, dict) and isinstance(b, dict) and "dict" in a and "dict" in b:
        mine, theirs = {repr(k): (k, v) for k, v in a["dict"]}, {repr(k): (k, v) for k, v in b["dict"]}
        missing = [_show_value(theirs[k][0]) for k in theirs if k not in mine]
        extra = [_show_value(mine[k][0]) for k in mine if k not in theirs]
        if missing or extra:
            parts = [f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}"] if missing else []
            parts += (
                [f"key{'s' if len(extra) > 1 else ''} torch's answer does not have: {', '.join(extra)}"]
                if extra
                else []
            )
            return "; ".join(parts)
        bad = [
            _show_value(theirs[k][0])
            for k in theirs
            if not _same_value(mine[k][1], theirs[k][1], rtol, atol)[0]
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


def _plural(form: str) -> str:
    word = form.split(" ", 1)[1] if form.startswith(("a ", "an ")) else form
    return word + ("es" if word.endswith("ss") else "s") if " " not in word else word


def _form(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        plain = ("a bool (True or False)", "an int", "a float", "a complex number")[_kind_of_dtype(v.dtype)]
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


_SHOWN_ELEMENTS = 12  # a tensor with more elements is summarized, never printed whole


def _show_value(v: Any) -> str:
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
            return "{" + ", ".join(f"{_show_value(k)}: {_show_value(x)}" for k, x in v["dict"]) + "}"
        key, text = next(iter(v.items()))
        return text if key == "repr" else str(text)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_show_value(x) for x in v)
        if isinstance(v, tuple):
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        return f"[{inner}]"
    return repr(v)
