"""Reading a learner's descriptor predictions in whatever spelling they chose.

A prediction such as "the placeholders of this joint graph" is a list of descriptors. A
learner may write them as strings with double quotes, extra spaces, positional fields, or
hand over the descriptor objects themselves (course's or torch's). All of these mean the
same thing, so a check compares their *canonical reprs*, the notation torch and course print:

>>> descriptor_reprs(['ParamAOTInput(target="w")', "PlainAOTInput( 0 )"])
["ParamAOTInput(target='w')", 'PlainAOTInput(idx=0)']
>>> descriptor_reprs(["TangentAOTInput(PlainAOTOutput(idx = 1))"])
['TangentAOTInput(output=PlainAOTOutput(idx=1))']
>>> import course.descriptors as cd
>>> descriptor_reprs((cd.BufferAOTInput("scale"), "cd.PlainAOTInput(idx=0)"))
["BufferAOTInput(target='scale')", 'PlainAOTInput(idx=0)']
>>> descriptor_reprs(["ParamAOTInput(target=w)"]) is None   # w is a name, not a string
True

Learner text is never evaluated: each string is parsed with :mod:`ast` and only a call of
a known descriptor class, with string/integer constants or further such calls as its fields,
is read. The reprs are rebuilt from the dataclass fields of :mod:`course.aot.descriptors`,
so they are exactly what ``repr`` of the real object prints. No object is constructed,
which means a nesting torch would refuse (say ``TangentAOTInput(PlainAOTInput(0))``) is
still *read*; judging it is the check's job.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from course.aot import descriptors as cd

__all__ = ["descriptor_repr", "descriptor_reprs", "read_descriptors"]

#: Every concrete descriptor class of the course, by name.
_CLASSES: dict[str, type] = {
    name: obj
    for name, obj in vars(cd).items()
    if isinstance(obj, type)
    and dataclasses.is_dataclass(obj)
    and name.endswith(("AOTInput", "AOTOutput"))
    and name not in ("AOTInput", "AOTOutput", "DifferentiableAOTInput", "DifferentiableAOTOutput")
}


class _Unreadable(ValueError):
    """The text is not a call of a known descriptor class with constant fields."""


def _class_name(func: ast.expr) -> str:
    # PlainAOTInput(...), cd.PlainAOTInput(...) and course.descriptors.PlainAOTInput(...) all name it
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    raise _Unreadable("not a class name")


def _field(node: ast.expr, kind: type) -> str:
    """The repr of one field's value, which must be of the field's declared ``kind``
    (``str``, ``int`` or a descriptor base); nested descriptors are read recursively."""
    if kind in (str, int):
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and kind is int
            and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) is int
        ):
            return repr(-node.operand.value)
        if isinstance(node, ast.Constant) and type(node.value) is kind:
            return repr(node.value)
        raise _Unreadable(f"this field is a {kind.__name__}")
    return _call(node)


def _call(node: ast.expr) -> str:
    """The canonical repr of ``Name(field, name=field, ...)``."""
    if not isinstance(node, ast.Call):
        raise _Unreadable("not a call")
    cls = _CLASSES.get(_class_name(node.func))
    if cls is None:
        raise _Unreadable("not a descriptor class")
    kinds = {f.name: f.type for f in dataclasses.fields(cls)}
    fields = list(kinds)
    if len(node.args) > len(fields) or any(isinstance(a, ast.Starred) for a in node.args):
        raise _Unreadable("too many fields")
    given = dict(zip(fields, node.args))
    for kw in node.keywords:
        if kw.arg not in fields or kw.arg in given:
            raise _Unreadable("unknown or repeated field")
        given[kw.arg] = kw.value
    if set(given) != set(fields):
        raise _Unreadable("missing field")
    inner = ", ".join(f"{name}={_field(given[name], kinds[name])}" for name in fields)
    return f"{cls.__name__}({inner})"


def descriptor_repr(item: Any) -> str | None:
    """The canonical repr of one descriptor (a string in any spelling, or a course or torch
    descriptor object), or None when ``item`` cannot be read as one.

    >>> descriptor_repr("GradAOTOutput( grad_of = ParamAOTInput( 'w' ) )")
    "GradAOTOutput(grad_of=ParamAOTInput(target='w'))"
    """
    if isinstance(item, str):
        try:
            return _call(ast.parse(item.strip(), mode="eval").body)
        except (SyntaxError, ValueError, RecursionError):  # _Unreadable is a ValueError
            return None
    if isinstance(item, (cd.AOTInput, cd.AOTOutput)):
        return repr(item)
    try:  # one of torch's descriptor objects
        return repr(cd.from_torch(item))
    except Exception:  # from_torch refuses anything that is not a descriptor
        return None


def descriptor_reprs(answer: Any) -> list[str] | None:
    """Canonical reprs of a list or tuple of descriptors, each item a string in any quote
    style or spacing, or a course or torch descriptor; None if any item cannot be read
    (or ``answer`` is not a list or tuple).

    Args:
        answer: what the learner wrote, e.g. ``["ParamAOTInput(target=\\"w\\")", ...]``.

    Returns:
        The reprs as ``repr(descriptor)`` prints them, in the answer's order, or None.
    """
    if not isinstance(answer, (list, tuple)):
        return None
    reprs = [descriptor_repr(item) for item in answer]
    return None if any(r is None for r in reprs) else reprs


def read_descriptors(answer: Any) -> list[str]:
    """:func:`descriptor_reprs`, for an exercise's ``parse=``: raises ``ValueError`` with a
    message for the learner when the answer cannot be read.

    >>> read_descriptors(("PlainAOTInput(0)",))
    ['PlainAOTInput(idx=0)']
    """
    reprs = descriptor_reprs(answer)
    if reprs is None:
        raise ValueError(
            "give a list of descriptors, each written as torch prints it "
            '("PlainAOTInput(idx=0)") or as a descriptor object'
        )
    return reprs
