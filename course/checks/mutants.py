"""Mutants of a reference solution: do an exercise's cases test every rule its spec states?

A check is only as good as its cases. A case that fails when one rule of the spec alone is
broken proves the rule is tested; a rule no case exercises lets a wrong answer pass. So we
break the reference solution one rule at a time, as a learner might, and run the check::

    if nbytes >= min_bytes:        # the spec: "at least min_bytes"
    if nbytes > min_bytes:         # mutant "flip a comparison": must fail some case
    [t for t in ts if keep(t)]     # the spec: a filter
    [t for t in ts]                # mutant "drop a filter": must fail some case

A mutant that still passes is a missing case (add one that tells it apart), or an equivalent
mutant (it means the same thing: ``x * 2`` for ``x + x``), which the test that runs this
lists with the reason. mutmut and cosmic-ray do this for a package and its test suite (a
process per mutant, minutes); an exercise is one function and its check, so the glue is a
few :class:`ast.NodeTransformer` classes, one per kind of mistake, over the solution's source.

Example:
    >>> def at_least(n, floor):
    ...     return n >= floor
    >>> for m in mutants(at_least):
    ...     print(m.description)
    flip a comparison at line 2: n >= floor -> n > floor
    negate a condition at line 2: n >= floor -> not n >= floor
    >>> [m.answer(3, 3) for m in mutants(at_least)]
    [False, False]

Differences from torch: torch has no such tool; mutmut and cosmic-ray are the models.
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Mutant", "mutants", "survivors"]

_FLIPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_ARITHMETIC = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
}


@dataclass(frozen=True)
class Mutant:
    """One mistake made on purpose: what was changed, and the answer that results."""

    description: str
    answer: Any


class _Mutator(ast.NodeTransformer):
    """Changes the ``target``-th place this kind of mistake can be made (counting from 0) and
    records what it did; :func:`mutants` runs one per place."""

    kind = ""

    def __init__(self, target: int) -> None:
        self.target, self.seen, self.done = target, 0, ""

    def _here(self, node: ast.AST) -> bool:
        hit = self.seen == self.target and not self.done
        self.seen += 1
        return hit

    def _record(self, before: ast.AST, after: ast.AST) -> None:
        line = getattr(before, "lineno", 0)
        self.done = f"{self.kind} at line {line}: {ast.unparse(before)} -> {ast.unparse(after)}"


class _FlipComparison(_Mutator):
    kind = "flip a comparison"

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if type(node.ops[0]) in _FLIPS and self._here(node):
            new = copy.deepcopy(node)
            new.ops = [_FLIPS[type(node.ops[0])](), *node.ops[1:]]
            self._record(node, new)
            return new
        return node


class _NegateCondition(_Mutator):
    kind = "negate a condition"

    def _negate(self, node: ast.AST, test: ast.expr) -> ast.expr:
        if self._here(node):
            new = ast.UnaryOp(op=ast.Not(), operand=test)
            self._record(test, new)
            return new
        return test

    def visit_If(self, node: ast.If) -> ast.AST:
        self.generic_visit(node)
        node.test = self._negate(node.test, node.test)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        node.test = self._negate(node.test, node.test)
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, (ast.Compare, ast.BoolOp)):
            node.value = self._negate(node.value, node.value)
        return node


class _SwapBoolOp(_Mutator):
    kind = "and for or"

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if self._here(node):
            new = ast.BoolOp(op=ast.Or() if isinstance(node.op, ast.And) else ast.And(), values=node.values)
            self._record(node, new)
            return new
        return node


class _DropFilter(_Mutator):
    kind = "drop a filter"

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        self.generic_visit(node)
        if node.ifs and self._here(node):
            self.done = f"{self.kind}: if {ast.unparse(node.ifs[0])}"
            node.ifs = node.ifs[1:]
        return node

    def visit_If(self, node: ast.If) -> ast.AST:  # `if bad: continue` (or return) guards a loop
        self.generic_visit(node)
        guard = len(node.body) == 1 and isinstance(node.body[0], (ast.Continue, ast.Return, ast.Break))
        if guard and not node.orelse and self._here(node):
            self.done = (
                f"{self.kind} at line {node.lineno}: if {ast.unparse(node.test)}: {ast.unparse(node.body[0])}"
            )
            return ast.Pass()
        return node


class _OffByOne(_Mutator):
    kind = "off by one"

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) is int and self._here(node):
            new = ast.Constant(node.value + 1)
            self._record(node, new)
            return new
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:  # a[-1] -> a[-2], a[i] -> a[i + 1]
        self.generic_visit(node)
        if isinstance(node.slice, ast.Name) and self._here(node):
            new = copy.deepcopy(node)
            new.slice = ast.BinOp(left=node.slice, op=ast.Add(), right=ast.Constant(1))
            self._record(node, new)
            return new
        return node


class _SwapArithmetic(_Mutator):
    kind = "swap an operator"

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if type(node.op) in _ARITHMETIC and self._here(node):
            new = ast.BinOp(left=node.left, op=_ARITHMETIC[type(node.op)](), right=node.right)
            self._record(node, new)
            return new
        return node


class _CopyForInPlace(_Mutator):
    """``t.add_(1)`` becomes ``t.add(1)`` and ``t.copy_(v)`` does nothing: a copy for an edit."""

    kind = "a copy for an in-place edit"

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr.endswith("_")
            and not f.attr.startswith("_")
            and self._here(node)
        ):
            new = copy.deepcopy(node)
            new.func.attr = f.attr[:-1] if f.attr != "copy_" else "clone"
            new.args = new.args if f.attr != "copy_" else []
            self._record(node, new)
            return new
        return node


class _DropStatement(_Mutator):
    """A call made for its effect (``h.remove()``, ``loss.backward()``, ``out.append(x)``) left out."""

    kind = "drop a statement"

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        if isinstance(node.value, ast.Call) and self._here(node):
            self.done = f"{self.kind} at line {node.lineno}: {ast.unparse(node)}"
            return ast.Pass()
        return node


class _DropKeyword(_Mutator):
    """``grad(outs, primals, grad_outputs=tangents)`` becomes ``grad(outs, primals)``: a
    keyword the spec asks for left out, its default taken instead."""

    kind = "drop a keyword argument"

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        for k, keyword in enumerate(node.keywords):
            if keyword.arg is not None and self._here(node):
                new = copy.deepcopy(node)
                del new.keywords[k]
                self._record(node, new)
                return new
        return node


#: Calls that make a tensor's detached twin, copy or storage: leaving one out is a classic mistake
#: (a saved tensor kept in the graph, an alias for a copy, a view's start for its buffer).
_CHAIN_STEPS = frozenset({"detach", "clone", "contiguous", "untyped_storage"})


class _DropChainStep(_Mutator):
    """``t.detach()`` becomes ``t``, ``t.untyped_storage().data_ptr()`` becomes ``t.data_ptr()``."""

    kind = "leave out a step"

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _CHAIN_STEPS and not node.args and self._here(node):
            self._record(node, f.value)
            return f.value
        return node


_KINDS: tuple[type[_Mutator], ...] = (
    _FlipComparison,
    _NegateCondition,
    _SwapBoolOp,
    _DropFilter,
    _OffByOne,
    _SwapArithmetic,
    _CopyForInPlace,
    _DropStatement,
    _DropKeyword,
    _DropChainStep,
)


def _source_tree(obj: Any) -> ast.Module:
    source = textwrap.dedent(inspect.getsource(obj))
    tree = ast.parse(source)
    body = tree.body[0]
    body.decorator_list = []
    if isinstance(body, (ast.FunctionDef, ast.ClassDef)):  # the docstring is no rule
        inner = body.body
        if inner and isinstance(inner[0], ast.Expr) and isinstance(inner[0].value, ast.Constant):
            body.body = inner[1:] or [ast.Pass()]
    return tree


def mutants(solution: Callable | type, kinds: tuple[type[_Mutator], ...] = _KINDS) -> Iterator[Mutant]:
    """Every mutant of ``solution`` (a function or class defined at the top level of its
    module), one change each, compiled in the solution's module (so its helpers resolve)."""
    tree = _source_tree(solution)
    name = tree.body[0].name
    module = inspect.getmodule(solution)
    for kind in kinds:
        target = 0
        while True:
            mutator = kind(target)
            new = ast.fix_missing_locations(mutator.visit(copy.deepcopy(tree)))
            if not mutator.done:
                break
            namespace = dict(vars(module)) if module else {}
            try:
                exec(compile(new, f"<mutant of {name}>", "exec"), namespace)
            except Exception:  # a mutant that does not compile is no answer a learner writes
                target += 1
                continue
            yield Mutant(mutator.done, namespace[name])
            target += 1


def survivors(ex: Any) -> list[str]:
    """The descriptions of the mutants of ``ex.solution`` that pass its check."""
    from course.checks import passes

    return [m.description for m in mutants(ex.solution) if passes(ex, m.answer)]
