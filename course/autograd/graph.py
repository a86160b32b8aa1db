"""Lesson 1: the autograd graph is made of Nodes joined by GradientEdges.

Every tensor that requires grad points at the place its gradient will be computed:

- a tensor made by an op has a ``grad_fn``, a C++ node such as ``MulBackward0``;
- a leaf tensor (``requires_grad=True``, made by you) has no ``grad_fn``; its gradient
  lands in a hidden ``AccumulateGrad`` node, which adds it into ``tensor.grad``.

A *gradient edge* names one input slot of one node: ``(node, output_nr)``. An op with
several outputs (``torch.unbind``, ``torch.split``) has one node and one ``output_nr``
per output. In the notation this course prints::

    a = torch.ones(2, 3, requires_grad=True)
    b = a * 2
    get_gradient_edge(a)   # GradientEdge(AccumulateGrad(shape=(2, 3)), output_nr=0)
    get_gradient_edge(b)   # GradientEdge(MulBackward0, output_nr=0)
    node_repr(b.grad_fn)   # MulBackward0

The invariants the engine relies on::

    isinstance(b.grad_fn, Node)                              # OK: C++ nodes are Nodes
    torch.autograd.grad(out, get_gradient_edge(b))           # OK: same as grad(out, b)
    torch.autograd.grad(out, (b.grad_fn, 0))                 # BAD: a plain tuple is not an edge
    get_gradient_edge(torch.ones(2))                         # BAD: RuntimeError, no gradient

Index: :class:`Node`, :class:`GradientEdge`, :func:`get_gradient_edge`,
:func:`increment_version`, :func:`node_repr`, :func:`short_type`, and torch's private
helper :func:`_get_grad_fn_or_grad_acc`.

What is ours and what is torch's: the graph itself (nodes, edges, version counters) is
torch's C++ engine; this module is an annotated copy of torch's thin Python layer over it,
with the same names, signatures and calls into ``torch._C``. ``Node`` and
``GradientEdge`` are torch's classes (or a subclass of one), not a second graph. The
explanations, :func:`node_repr` and :func:`short_type` are ours.

Differences from torch:

- torch's ``GradientEdge`` is a ``NamedTuple`` whose repr holds a memory address.
  Ours is a subclass of torch's class (the C++ engine accepts nothing else as an
  ``inputs=`` edge) that only changes the repr to ``GradientEdge(MulBackward0, output_nr=0)``.
- :func:`node_repr` is ours: C++ nodes print as ``<MulBackward0 object at 0x7f...>``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.autograd.graph as _torch_graph
from torch.utils._dtype_abbrs import dtype_abbrs  # torch.float32 -> "f32", as FX prints
from torch.utils.hooks import RemovableHandle

__all__ = ["GradientEdge", "Node", "get_gradient_edge", "increment_version", "node_repr", "short_type"]


class Node(abc.ABC):
    """The abstract interface of a node in the backward graph.

    We never build Nodes in Python: the engine's nodes are C++ objects
    (``torch._C._functions.AccumulateGrad``, ``MulBackward0``...) or, for a custom
    ``torch.autograd.Function``, a ``BackwardCFunction``. ``Node`` is an ABC whose
    ``__subclasshook__`` says "yes" to both, exactly like torch's, so that
    ``isinstance(t.grad_fn, Node)`` is true without the C++ classes inheriting from it.

    Example:
        >>> a = torch.ones(3, requires_grad=True)
        >>> isinstance(a.clone().grad_fn, Node), issubclass(type(a.exp().grad_fn), Node)
        (True, True)
        >>> isinstance(a, Node)
        False
    """

    @abc.abstractmethod
    def name(self) -> str:
        """Return the node's name, e.g. ``CloneBackward0``.

        Example:
            >>> a = torch.tensor([0.0, 0.0, 0.0], requires_grad=True)
            >>> a.clone().grad_fn.name()
            'CloneBackward0'
        """
        raise NotImplementedError

    @property
    @abc.abstractmethod
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        """The outgoing edges, one ``(node, output_nr)`` per input of the forward op.

        ``node`` is None where that input did not require grad.

        Example:
            >>> a = torch.ones(2, requires_grad=True)
            >>> [(node_repr(n), nr) for n, nr in (a * torch.ones(2)).grad_fn.next_functions]
            [('AccumulateGrad(shape=(2,))', 0), ('None', 0)]
        """
        raise NotImplementedError

    @abc.abstractmethod
    def metadata(self) -> dict:
        """Return a dict that lives as long as the node: a place to hang your own notes.

        Torch declares it as a method here, but its C++ nodes (and custom Function
        nodes) expose ``metadata`` as a *property*: write ``node.metadata``, no call.

        Example:
            >>> b = torch.ones(2, requires_grad=True).exp()
            >>> b.grad_fn.metadata["note"] = "made in lesson 1"
            >>> b.grad_fn.metadata
            {'note': 'made in lesson 1'}
        """
        raise NotImplementedError

    @abc.abstractmethod
    def _sequence_nr(self) -> int:
        raise NotImplementedError

    @property
    @abc.abstractmethod
    def _input_metadata(self) -> list[Any]:
        raise NotImplementedError

    @abc.abstractmethod
    def _register_hook_dict(self, tensor: torch.Tensor) -> None:
        raise NotImplementedError

    @abc.abstractmethod
    def register_hook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Register a hook that runs after the node computed its gradients.

        Signature: ``hook(grad_inputs, grad_outputs) -> tuple or None``. ``grad_outputs``
        are the gradients flowing *into* the node (w.r.t. its forward outputs);
        ``grad_inputs`` are what it computed (w.r.t. its forward inputs). Returning a
        tuple replaces ``grad_inputs``.

        Args:
            fn: the hook.

        Returns:
            A handle whose ``remove()`` unregisters the hook.

        Example:
            >>> a = torch.tensor([0.0, 0.0, 0.0], requires_grad=True)
            >>> b = a.clone()
            >>> handle = b.grad_fn.register_hook(lambda gI, gO: (gO[0] * 2,))
            >>> b.sum().backward(retain_graph=True)
            >>> a.grad
            tensor([2., 2., 2.])
            >>> handle.remove()
            >>> a.grad = None
            >>> b.sum().backward(retain_graph=True)
            >>> a.grad
            tensor([1., 1., 1.])
        """
        raise NotImplementedError

    @abc.abstractmethod
    def register_prehook(self, fn: Callable[..., Any]) -> RemovableHandle:
        """Register a hook that runs before the node computes its gradients.

        Signature: ``hook(grad_outputs) -> tuple or None``; returning a tuple replaces
        ``grad_outputs``. Order within one node: tensor pre-hooks (``t.register_hook``
        on the tensor this node made), then node pre-hooks, then the node, then its
        post-hooks (:meth:`register_hook`).

        Args:
            fn: the hook.

        Returns:
            A handle whose ``remove()`` unregisters the hook.

        Example:
            >>> x = torch.ones(2, requires_grad=True)
            >>> y = x * 3
            >>> seen = []
            >>> _ = y.grad_fn.register_prehook(lambda gO: seen.append(gO[0].tolist()))
            >>> y.sum().backward()
            >>> seen, x.grad
            ([[1.0, 1.0]], tensor([3., 3.]))
        """
        raise NotImplementedError

    @classmethod
    def __subclasshook__(cls, subclass: type) -> bool:
        # A C++ node class is exported as torch._C._functions.<Name>; a custom
        # Function's backward class derives from BackwardCFunction.
        if cls is Node and (
            (subclass is not None and subclass is getattr(torch._C._functions, subclass.__name__, None))
            or issubclass(subclass, torch.autograd.function.BackwardCFunction)
        ):
            return True
        return NotImplemented


def node_repr(node: Node | None) -> str:
    """A deterministic one-word name for a node (no memory address).

    Args:
        node: a backward node, or None (a missing edge in ``next_functions``).

    Returns:
        The node's class name (``MulBackward0``, ``MyFnBackward``); for an
        ``AccumulateGrad`` also the shape of the leaf it accumulates into; ``'None'`` for None.

    Example:
        >>> a = torch.ones(2, 3, requires_grad=True)
        >>> node_repr((a * 2).grad_fn), node_repr(_get_grad_fn_or_grad_acc(a)), node_repr(None)
        ('MulBackward0', 'AccumulateGrad(shape=(2, 3))', 'None')
    """
    if node is None:
        return "None"
    name = type(node).__name__
    variable = getattr(node, "variable", None)  # only AccumulateGrad has one
    if isinstance(variable, torch.Tensor):
        return f"{name}(shape={tuple(variable.shape)})"
    return name


def short_type(t: torch.Tensor | None) -> str:
    """A tensor's dtype and shape in the compact notation FX graphs print: ``f32[2, 3]``.

    Args:
        t: a tensor, or None (a gradient that was not computed).

    Returns:
        The dtype's short name and the sizes (``i64[]`` for a 0-d tensor); ``'None'`` for None.

    Example:
        >>> short_type(torch.ones(2, 3)), short_type(torch.tensor(1)), short_type(None)
        ('f32[2, 3]', 'i64[]', 'None')
    """
    if t is None:
        return "None"
    return f"{dtype_abbrs[t.dtype]}[{', '.join(map(str, t.shape))}]"


class GradientEdge(_torch_graph.GradientEdge):
    """One input slot of a backward node: ``(node, output_nr)``, plus an ownership token.

    A subclass of torch's ``NamedTuple`` (same fields, same constructor), so the C++
    engine accepts it in ``torch.autograd.grad(..., inputs=edge)`` and
    ``backward(inputs=[edge])``. Only the repr is ours.

    Example:
        >>> b = torch.ones(2, requires_grad=True) * 2
        >>> edge = GradientEdge(b.grad_fn, 0)
        >>> edge
        GradientEdge(MulBackward0, output_nr=0)
        >>> isinstance(edge, torch.autograd.graph.GradientEdge), edge.ownership_token is None
        (True, True)
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"GradientEdge({node_repr(self.node)}, output_nr={self.output_nr})"


def _get_grad_fn_or_grad_acc(t: torch.Tensor | _torch_graph.GradientEdge) -> Node:
    """The node that receives ``t``'s gradient: its grad_fn, or a leaf's AccumulateGrad.

    A leaf has no ``grad_fn``; its AccumulateGrad node is created lazily and cached
    (weakly) on the tensor. We reach it the way torch does: make a throwaway view,
    whose grad_fn's only edge leads to the leaf's AccumulateGrad.

    Raises:
        AssertionError: ``t`` has no node (it does not require grad), like torch.
    """
    if isinstance(t, _torch_graph.GradientEdge):
        return t.node
    if t.requires_grad and t.grad_fn is None:
        with torch.enable_grad():
            node = t.view_as(t).grad_fn.next_functions[0][0]  # ViewBackward -> AccumulateGrad
    else:
        node = t.grad_fn
    if node is None:
        raise AssertionError("Expected gradient function to be set")  # torch's message (conformance)
    return node


def get_gradient_edge(tensor: torch.Tensor) -> GradientEdge:
    """The edge that feeds ``tensor``'s gradient into the graph: ``(node, output_nr)``.

    ``autograd.grad(loss, tensor)`` and ``autograd.grad(loss, get_gradient_edge(tensor))``
    agree. The edge is useful when the tensor itself is gone or will be changed in
    place: the edge still names the node.

    Args:
        tensor: a tensor that requires grad.

    Returns:
        ``GradientEdge(node, tensor.output_nr, ownership_token)``. For a custom
        Function's node (a Python object the C++ graph owns, not the other way round)
        the token is a fresh view's grad_fn, which keeps the graph alive.

    Raises:
        RuntimeError: ``tensor`` does not require gradients (torch's message).

    Example:
        >>> a = torch.ones(2, 3, requires_grad=True)
        >>> b = a * 2
        >>> get_gradient_edge(a), get_gradient_edge(b)
        (GradientEdge(AccumulateGrad(shape=(2, 3)), output_nr=0), GradientEdge(MulBackward0, output_nr=0))
        >>> torch.autograd.grad((b * b).sum(), get_gradient_edge(b))[0]
        tensor([[4., 4., 4.],
                [4., 4., 4.]])
    """
    if not tensor.requires_grad:
        # Conformance: torch's message, word for word (tests/test_graph.py compares them).
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that does not require gradients",
        )
    grad_fn = _get_grad_fn_or_grad_acc(tensor)
    token = None
    if isinstance(grad_fn, torch._C._FunctionBase):  # a Python (custom Function) node
        with torch.enable_grad():
            token = tensor.view_as(tensor).grad_fn
    # output_nr is 0 for a leaf, which is the right slot of its AccumulateGrad.
    return GradientEdge(grad_fn, tensor.output_nr, ownership_token=token)


def increment_version(tensor: torch.Tensor | Iterable[torch.Tensor]) -> None:
    """Add one to a tensor's version counter, as an in-place op would (or to each tensor's).

    Every in-place op bumps ``t._version``; a node that saved ``t`` remembers the
    version it saw and refuses to run backward if it changed. Call this yourself when
    you modified the memory behind torch's back (a custom kernel through ``data_ptr``).
    Tensors made under ``torch.inference_mode()`` have no counter and are left alone.

    Args:
        tensor: a tensor or an iterable of tensors.

    Raises:
        RuntimeError: not a tensor nor an iterable of tensors (torch's C++ messages).

    Example:
        >>> a = torch.ones(3, requires_grad=True)
        >>> b = a.exp()               # ExpBackward0 saves its output b at version 0
        >>> increment_version(b)
        >>> b._version
        1
        >>> b.sum().backward()
        Traceback (most recent call last):
        ...
        RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: ...
    """
    if isinstance(tensor, torch.Tensor):
        tensor = (tensor,)
    torch._C._increment_version(tensor)
