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

This module makes outcomes (:func:`encode`, :func:`value_outcome`, :func:`raised_outcome`) and
hands on, under the same names as ever, what its neighbours do with them:

- :mod:`course.checks.comparison`: :func:`same`, :func:`differing_part`, :func:`left_text`;
- :mod:`course.checks.forms`: :func:`same_but_for_form`, :func:`describe_form`;
- :mod:`course.checks.wrong_items`: :func:`item_options`, :func:`outside_domain`,
  :func:`wrong_places` (a prediction's faults, without its truth);
- :mod:`course.checks.wording`: :func:`show`.

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

import re
from typing import Any

import torch

from course.checks.comparison import differing_part, left_text, same
from course.checks.forms import describe_form, same_but_for_form
from course.checks.wording import show
from course.checks.wrong_items import item_options, outside_domain, wrong_places

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
