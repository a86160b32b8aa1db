"""Saved-tensor hooks that keep autograd's check for tensors modified in place.

Without hooks, autograd refuses a saved tensor that was written after it was saved::

    y = x.exp()              # ExpBackward0 saves y at version 0
    y.add_(1)                # y is now at version 1
    y.sum().backward()       # RuntimeError: one of the variables needed for gradient
                             #   computation has been modified by an inplace operation: ...

With *any* pair of saved-tensor hooks active, the same program runs and gives a wrong
gradient: torch's ``SavedVariable::unpack`` (torch/csrc/autograd/saved_variable.cpp)
compares the version counter only when no hooks are set, since what the unpack hook
returns need not be the tensor that was saved. :func:`checked_hooks` wraps a pair and puts
the check back, with torch's message::

    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        y = x.exp()
    y.add_(1); y.sum().backward()     # BAD: no error, x.grad = e + 1 instead of e

    with saved_tensors_hooks(*checked_hooks(lambda t: t.detach(), lambda t: t)):
        y = x.exp()
    y.add_(1); y.sum().backward()     # OK: the same RuntimeError as without hooks

How we see the version counter without keeping the tensor: pack records a
:class:`VersionStamp`, a *weak* reference to the tensor it received and, for a view, to
its base, with the ``_version`` they had. Every tensor that shares a version counter in
a way we can follow keeps one of the two alive: a view holds its base, and while the
Python object of a tensor's ``TensorImpl`` is referenced from C++ (by a view) torch keeps
that same object alive. So when both references are dead, nobody can write to the saved
bytes any more, and the check passes; holding nothing strongly, we never keep an
offloaded storage on the device.

What pack receives (torch 2.13, tests/test_version_check.py): for a saved input, the
input tensor itself; for a saved output (``exp``'s result), the output itself, its
``grad_fn`` already set; for a saved view, the view (its ``_base`` set).

The message names the node as torch does: a saved output by the node that saved it (the
one unpacking it), a saved input by its *current* ``grad_fn`` (an in-place op replaced
it), a view whose base changed by ``AsStrided`` (torch regenerates the view's node), a
leaf by nothing.

Index: :class:`VersionStamp`, :func:`stamp`, :func:`checked_hooks`.

Differences from torch:

- torch has no such check with hooks at all; this module is the course's own code.
- A tensor that shares the counter without being a view (``t.detach()``) does not keep
  ``t`` alive: once ``t`` and its views are gone, writing through the detached alias goes
  unnoticed (eager, which holds ``t``, would raise).
- The node's name in the message is worked out from what pack saw; for a view that is no
  longer alive we say ``AsStrided``, which is what torch 2.13 prints for CPU and CUDA
  tensors (a subclass with its own view replay may differ).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["VersionStamp", "checked_hooks", "stamp"]


def _node_label(name: str) -> str:
    """The node as torch 2.13's message names it: ``ExpBackward0`` -> ``Exp``, ``FBackward`` -> ``F``."""
    return re.sub(r"Backward\d*$", "", name)


class VersionStamp:
    """What pack remembers about one saved tensor: where its version counter is, and its value.

    Made by :func:`stamp`. It holds weak references only; :meth:`check` raises the
    ``RuntimeError`` autograd raises without hooks when the counter has moved on.

    Example:
        >>> from course.autograd.saved_tensors import saved_tensors_hooks
        >>> stamps = []
        >>> def pack_hook(t):
        ...     stamps.append(stamp(t))
        ...     return t.detach()
        >>> x = torch.ones(3, requires_grad=True)
        >>> with saved_tensors_hooks(pack_hook, lambda t: t):
        ...     y = x.exp()             # exp saves its output
        >>> stamps
        [VersionStamp(tensor='[torch.FloatTensor [3]]', grad_fn='ExpBackward0', output_nr=0, version=0)]
        >>> stamps[0].check()           # OK: unchanged
        >>> _ = y.add_(1)
        >>> stamps[0].current_version
        1
        >>> stamps[0].check()           # BAD: written after it was saved
        Traceback (most recent call last):
        ...
        RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [3]], which is output 0 of Exp, is at version 1; expected version 0 instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).
    """

    __slots__ = ("_tensor", "_base", "version", "_meta", "grad_fn_name", "output_nr", "_output", "_view")

    def __init__(self, tensor: torch.Tensor) -> None:
        self._tensor = weakref.ref(tensor)
        base = tensor._base  # a view: its base shares the counter and outlives the view
        self._view = base is not None
        self._base = weakref.ref(base) if self._view else None
        self.version = tensor._version
        try:
            shape = list(tensor.shape)
        except RuntimeError:  # a nested tensor of strided layout has sizes per component
            shape = tensor._nested_tensor_size().tolist()
        self._meta = (tensor.dtype, tensor.device, tensor.layout, shape)  # the words, later
        node = tensor.grad_fn  # None for a leaf
        self.grad_fn_name = node.name() if node is not None else None
        # Saving its output, an op has just made the output's node: the newest one (nodes
        # are numbered as they are made, per thread). Its inputs' nodes are older.
        self._output = node is not None and node._sequence_nr() == torch._C._autograd._get_sequence_nr() - 1
        self.output_nr = tensor.output_nr

    @property
    def description(self) -> str:
        """The saved tensor as torch's message shows it: ``[torch.FloatTensor [3]]``."""
        dtype, device, layout, shape = self._meta
        kind = torch.empty(0, dtype=dtype, device=device, layout=layout).type()  # e.g. torch.cuda.HalfTensor
        return f"[{kind} {shape}]"

    def _alive(self) -> torch.Tensor | None:
        tensor = self._tensor()
        if tensor is None and self._base is not None:
            tensor = self._base()
        return tensor

    @property
    def current_version(self) -> int | None:
        """The counter's value now, or None when nothing that shares it is alive."""
        tensor = self._alive()
        return None if tensor is None else tensor._version

    def _node_words(self) -> str:
        """``, which is output N of X,`` as torch writes it, or nothing for a leaf."""
        if self.grad_fn_name is None:
            return ""
        tensor = self._tensor()
        if self._output:
            name = self.grad_fn_name  # a saved output: named by the node that saved it
        elif tensor is not None and tensor.grad_fn is not None:
            name = tensor.grad_fn.name()  # a saved input: its grad_fn now
        elif self._view:
            name = "AsStridedBackward0"  # the node torch regenerates for a view whose base changed
        else:
            name = self.grad_fn_name
        return f", which is output {self.output_nr} of {_node_label(name)},"

    def check(self) -> None:
        """Raise autograd's ``RuntimeError`` if the saved tensor was modified in place.

        Raises:
            RuntimeError: the counter is not at the version pack saw.
        """
        now = self.current_version
        if now is None or now == self.version:
            return
        if torch.is_anomaly_enabled():
            hint = (
                " Hint: the backtrace further above shows the operation that failed to compute its"
                " gradient. The variable in question was changed in there or anywhere later. Good luck!"
            )
        else:
            hint = (
                " Hint: enable anomaly detection to find the operation that failed to compute its"
                " gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False)."
            )
        # torch's text word for word (saved_variable.cpp), so that code and lessons that match
        # on it see one message whether hooks are set or not.
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an inplace"
            f" operation: {self.description}{self._node_words()} is at version {now};"
            f" expected version {self.version} instead.{hint}"
        )

    def __repr__(self) -> str:
        return (
            f"VersionStamp(tensor={self.description!r}, grad_fn={self.grad_fn_name!r}, "
            f"output_nr={self.output_nr}, version={self.version})"
        )


def stamp(tensor: torch.Tensor) -> VersionStamp:
    """Record ``tensor``'s version counter (weakly) and its value now.

    Call it from a pack hook: there, a tensor whose ``grad_fn`` is the newest node is the
    output being saved, which decides how the error names it. Outside a pack hook the
    version check is the same, only that name may differ from torch's.

    Example:
        >>> w = torch.nn.Parameter(torch.ones(2, 3))
        >>> stamp(w.t())            # a view of a leaf: its base is held weakly too
        VersionStamp(tensor='[torch.FloatTensor [3, 2]]', grad_fn='TBackward0', output_nr=0, version=0)
    """
    return VersionStamp(tensor)


def checked_hooks(
    pack_hook: Callable[[torch.Tensor], Any],
    unpack_hook: Callable[[Any], torch.Tensor],
) -> tuple[
    Callable[[torch.Tensor], tuple[VersionStamp, Any]], Callable[[tuple[VersionStamp, Any]], torch.Tensor]
]:
    """A pair that runs yours and checks versions: ``saved_tensors_hooks(*checked_hooks(p, u))``.

    Pack stamps the tensor and then calls ``pack_hook``; unpack checks the stamp *before*
    calling ``unpack_hook`` (a stale tensor is not fetched back).

    Args:
        pack_hook: ``(Tensor) -> Any``, as for :class:`~course.autograd.saved_tensors.saved_tensors_hooks`.
        unpack_hook: ``(Any) -> Tensor``.

    Returns:
        ``(pack, unpack)``, named ``checked_<your hook's name>``.

    Raises:
        RuntimeError: from backward (or ``grad_fn._saved_*``), autograd's in-place message.

    Example:
        >>> from course.autograd.saved_tensors import saved_tensors_hooks
        >>> x = torch.ones(3, requires_grad=True)
        >>> def pack_hook(t):
        ...     return t.detach()
        >>> def unpack_hook(t):
        ...     return t
        >>> hooks = saved_tensors_hooks(*checked_hooks(pack_hook, unpack_hook))
        >>> hooks
        saved_tensors_hooks(checked_pack_hook, checked_unpack_hook)
        >>> with hooks:
        ...     y = x.exp()
        >>> _ = y.add_(1)
        >>> y.sum().backward()
        Traceback (most recent call last):
        ...
        RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [3]], which is output 0 of Exp, is at version 1; expected version 0 instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).
    """

    def pack(tensor: torch.Tensor) -> tuple[VersionStamp, Any]:
        return VersionStamp(tensor), pack_hook(tensor)

    def unpack(packed: tuple[VersionStamp, Any]) -> torch.Tensor:
        version_stamp, inner = packed
        version_stamp.check()
        return unpack_hook(inner)

    pack.__name__ = f"checked_{getattr(pack_hook, '__name__', type(pack_hook).__name__)}"
    unpack.__name__ = f"checked_{getattr(unpack_hook, '__name__', type(unpack_hook).__name__)}"
    return pack, unpack
