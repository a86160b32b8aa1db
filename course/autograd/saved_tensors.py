"""Lesson 3: saved tensors, and the hooks that decide how they are stored.

When an op needs one of its inputs or outputs again in backward (``x * y`` needs both,
``x.exp()`` needs its result), autograd *saves* that tensor on the graph node. A pair of
hooks can take over the storing::

    pack_hook(tensor) -> Any          # runs in forward, each time a tensor is saved
    unpack_hook(packed) -> Tensor     # runs in backward, each time a node reads it back

What is ours and what is torch's: the saving, the hook stack and the checks are torch's
C++; these three context managers are annotated copies of torch's thin Python layer in
``torch.autograd.graph``, making the same calls into ``torch._C``, with a repr and
``course.trace`` events added. The hooks live on a thread-local *stack* in C++
(``torch._C._autograd._push_saved_tensors_default_hooks`` / ``_pop_...``), and a second
piece of thread-local state can switch the whole feature off with a message
(``_saved_tensors_hooks_disable`` / ``_enable`` / ``_get_disabled_error_message``).

What the learner should remember (each one is a test in ``tests/test_saved_tensors.py``)::

    with saved_tensors_hooks(p1, u1):
        with saved_tensors_hooks(p2, u2):
            y = x * x        # OK: only p2 runs; innermost hooks win, there is no chaining
    y.sum().backward()       # u2 runs, once per saved tensor that a node reads

    y.sum().backward(retain_graph=True)
    y.sum().backward()       # OK: unpack runs AGAIN; it may run many times, in any order
                             #     the engine likes (torch promises no order)

    saved_tensors_hooks(lambda t: t, lambda t: t)
                             # BAD: an identity pack hook stores the tensor itself on its
                             #     own node (exp saves its result): tensor -> grad_fn ->
                             #     tensor, a cycle through C++ that Python's garbage
                             #     collector cannot see. If backward never runs, the graph
                             #     outlives the last reference to the output, for good.
                             #     Learners meet it writing their first pack hook in
                             #     lesson 3 (``lambda t: t`` looks harmless); pack
                             #     ``t.detach()`` (or a copy) instead. A weakref shows it:
                             #     tests/test_saved_tensors.py, identity pack hook test.

Bad hooks, and what torch (so also we: the checks are in C++) does about them:

- a pack hook that modifies its input in place raises ``RuntimeError: A saved tensor pack
  hook is modifying its input in place. ...`` in forward, right after the hook returns
  (C++ compares the input's version counter before and after);
- an unpack hook that returns something that is not a tensor raises ``TypeError: Output of
  saved tensor unpack_hook expected to be a Tensor but got result of type int``;
- an unpack hook that returns a tensor of the wrong shape or dtype is *not* checked: a
  wrong dtype is silently cast back by the engine, and a wrong shape either fails inside the
  backward formula (a broadcasting ``RuntimeError``) or, when it broadcasts, is summed down
  to the input's shape and gives a silently wrong gradient.

``course.trace``: when a :func:`course.trace.record` block is open at ``__enter__``, the
hooks pushed are wrapped to emit ``pack`` and ``unpack`` events; otherwise the user's own
hooks are pushed unchanged, so tracing costs nothing when it is off.

Index: :class:`saved_tensors_hooks`, :class:`save_on_cpu`, :func:`disable_saved_tensors_hooks`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from typing import Any

import torch

from course import trace

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks"]


def _traced(pack_hook: Callable, unpack_hook: Callable) -> tuple[Callable, Callable]:
    """Wrap a hook pair so each call emits a trace event; the packed value is unchanged
    except that it travels with the stable name the tensor had when it was packed. A packed
    value with a ``trace_detail()`` method adds its entries to the unpack event."""
    pack_name = getattr(pack_hook, "__name__", type(pack_hook).__name__)
    unpack_name = getattr(unpack_hook, "__name__", type(unpack_hook).__name__)

    def pack(tensor: torch.Tensor) -> tuple[str | None, Any]:
        if trace.ACTIVE:
            trace.emit("pack", name=pack_name, tensor=tensor)
        # Only the name is kept, never the tensor: the wrapper must not extend lifetimes.
        return trace.tensor_name(tensor), pack_hook(tensor)

    def unpack(named: tuple[str | None, Any]) -> torch.Tensor:
        saved_as, packed = named
        result = unpack_hook(packed)
        if trace.ACTIVE:
            node = torch._C._current_autograd_node()  # None outside backward
            name = node.name() if node is not None else unpack_name
            # A packed value may say more about itself (mutation's handles: handle=h0).
            more = packed.trace_detail() if hasattr(packed, "trace_detail") else {}
            trace.emit("unpack", name=name, tensor=result, saved=saved_as, **more)
        return result

    return pack, unpack


class saved_tensors_hooks:
    """Inside the ``with`` block, tensors saved for backward go through your two hooks.

    Inside the block, ``pack_hook`` runs every time an op saves a tensor for backward (built-in
    ops and ``ctx.save_for_backward`` alike) and its result is stored on the graph instead of
    the tensor. ``unpack_hook`` runs every time backward (or ``grad_fn._saved_*``) reads the
    saved value back; it gets the packed object and must return a tensor with the content of
    the original. It may run more than once per pack (``retain_graph=True``, double backward)
    and in no promised order. Only the innermost pair is active (no chaining).

    Args:
        pack_hook: ``(Tensor) -> Any``. Must not modify its input in place, and should not
            return the input itself (a reference cycle; see the module docstring).
        unpack_hook: ``(Any) -> Tensor``.

    Returns:
        The context manager; ``__enter__`` returns None, as torch's does.

    Raises:
        RuntimeError: on ``__enter__`` inside :func:`disable_saved_tensors_hooks` (its
            message); in forward, when the pack hook mutated its input.
        TypeError: from backward, when the unpack hook returns a non-tensor.

    Example:
        >>> import torch
        >>> log = []
        >>> def pack_hook(t):
        ...     log.append(("pack", tuple(t.shape)))
        ...     return t.detach()
        >>> def unpack_hook(t):
        ...     log.append(("unpack", tuple(t.shape)))
        ...     return t
        >>> a = torch.ones(5, requires_grad=True)
        >>> b = torch.ones(5, requires_grad=True) * 2
        >>> with saved_tensors_hooks(pack_hook, unpack_hook):
        ...     y = a * b
        >>> y.sum().backward()
        >>> [kind for kind, _ in log]
        ['pack', 'pack', 'unpack', 'unpack']
        >>> a.grad
        tensor([2., 2., 2., 2., 2.])
    """

    def __init__(
        self,
        pack_hook: Callable[[torch.Tensor], Any],
        unpack_hook: Callable[[Any], torch.Tensor],
    ) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        pack, unpack = self.pack_hook, self.unpack_hook
        if trace.ACTIVE:  # decided once, here: no per-tensor cost when tracing is off
            pack, unpack = _traced(pack, unpack)
        torch._C._autograd._push_saved_tensors_default_hooks(pack, unpack)

    def __exit__(self, *args: object) -> None:
        torch._C._autograd._pop_saved_tensors_default_hooks()

    def __repr__(self) -> str:
        def name(f: Callable) -> str:
            return getattr(f, "__name__", type(f).__name__)

        return f"{type(self).__name__}({name(self.pack_hook)}, {name(self.unpack_hook)})"


class save_on_cpu(saved_tensors_hooks):
    """Context manager under which saved tensors are stored on the CPU and copied back to
    their device for backward (GPU memory traded for copies). On a CPU-only graph ``.cpu()``
    returns the tensor itself: nothing is copied.

    Args:
        pin_memory: save into pinned CPU memory and copy asynchronously (``non_blocking``);
            only pins when ``device_type``'s module reports a device and the tensor is dense.
        device_type: the accelerator whose ``is_available()`` decides pinning, as in torch.

    Returns:
        The context manager (a :class:`saved_tensors_hooks` whose hooks are
        ``pack_to_cpu`` / ``unpack_from_cpu``).

    Raises:
        RuntimeError: on ``__enter__`` inside :func:`disable_saved_tensors_hooks`.

    Example:
        >>> import torch
        >>> x = torch.randn(4, requires_grad=True)
        >>> with save_on_cpu():
        ...     y = (x * x).sum()
        >>> y.backward()
        >>> torch.allclose(x.grad, 2 * x)
        True
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        device_module = getattr(torch, device_type, torch.cuda)

        def pack_to_cpu(tensor: torch.Tensor) -> tuple[torch.device, torch.Tensor]:
            if not pin_memory:
                return (tensor.device, tensor.cpu())
            is_pinnable = device_module.is_available() and not tensor.is_sparse
            packed = torch.empty(
                tensor.size(), dtype=tensor.dtype, layout=tensor.layout, pin_memory=is_pinnable
            )
            packed.copy_(tensor, non_blocking=is_pinnable)
            return (tensor.device, packed)

        def unpack_from_cpu(packed: tuple[torch.device, torch.Tensor]) -> torch.Tensor:
            device, tensor = packed
            return tensor.to(device, non_blocking=pin_memory)

        super().__init__(pack_to_cpu, unpack_from_cpu)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str) -> Generator[None, None, None]:
    """A ``with`` block in which saved-tensor hooks are refused, with your message.

    Inside it, entering :class:`saved_tensors_hooks` (or :class:`save_on_cpu`) raises
    ``RuntimeError(error_message)``. On exit, the state *before* the block comes back, even
    after an exception: enabled, or disabled with the outer block's message (blocks nest).
    The block cannot start while hooks are already pushed: entering it inside a
    :class:`saved_tensors_hooks` block raises at once (torch's C++ checks the hook stack).

    Args:
        error_message: the message of the RuntimeError raised on a push while disabled.

    Returns:
        A context manager yielding None.

    Raises:
        RuntimeError: ``RuntimeError(error_message)`` on entering, when saved-tensor hooks
            are active (pushed and not yet popped); the previous state is kept.

    Example:
        >>> import torch
        >>> with disable_saved_tensors_hooks("no hooks in here"):
        ...     try:
        ...         with save_on_cpu():
        ...             pass
        ...     except RuntimeError as e:
        ...         print(e)
        no hooks in here
        >>> torch._C._autograd._saved_tensors_hooks_is_enabled()
        True
        >>> with saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        ...     with disable_saved_tensors_hooks("not while hooks are on"):
        ...         pass
        Traceback (most recent call last):
        ...
        RuntimeError: not while hooks are on
    """
    maybe_prev_message = None
    try:
        # None means "currently enabled"; otherwise the message of the enclosing block.
        maybe_prev_message = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()
        torch._C._autograd._saved_tensors_hooks_disable(error_message)
        yield
    finally:
        if maybe_prev_message is None:
            torch._C._autograd._saved_tensors_hooks_enable()
        else:
            torch._C._autograd._saved_tensors_hooks_disable(maybe_prev_message)
