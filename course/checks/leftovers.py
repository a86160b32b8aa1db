"""What an answer leaves behind: the learner's kernel must come back as the check found it.

A check compares what an answer *returns*. An answer can also change what it was handed or
the process around it, and a later cell of the notebook then pays for it, far from the cause::

    def f(x):
        torch.set_grad_enabled(False)                  # BAD: grad mode stays off for the caller
        ...
    def f(x):
        torch._C._autograd._push_saved_tensors_default_hooks(pack, unpack)   # BAD: never popped
        ...
    def f(model):
        model.weight.requires_grad_(False)             # BAD: the caller's weight is frozen
        model(x).sum().backward()                      # BAD: .grad left on the caller's model
    def f(x):
        x.add_(1); x.sub_(1)                           # BAD: same values, but x._version moved on
    def f(x):
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):   # OK: popped on exit
            ...

:func:`snapshot` records, before a call, the process-wide state (grad mode, inference mode,
anomaly mode, the saved-tensor-hooks stack and whether it is disabled, the torch function
and dispatch mode stacks, and whether a ``course.trace`` recording is open) and, for every
tensor and module handed in (however deep in tuples, lists and dicts, and in the variables
a handed function's closure holds), ``requires_grad``, ``.grad``, ``_version`` and its storage,
the hooks on it, a module's ``training`` flag and attributes (which parameter, buffer,
submodule or setting each name holds), and an fx graph's nodes with their ``args`` and
``meta``. :func:`left_behind` compares after the call, puts
the process-wide state back where it can (so the notebook's next cells run as they would
have), and returns one plain sentence per change, e.g.
``"grad mode turned off (torch.is_grad_enabled() is False; the check turned it back on)"``.

An exercise whose spec lets the answer change something it was handed says so with
``may_leave`` (e.g. ``{"grad"}``). A ``run=`` that builds what it hands the answer (a model
from its name) wraps the call in :func:`handed`, so those objects are watched too::

    def _run_measure(answer, model_name):
        model, x = MODELS[model_name]()
        with handed(model=model, x=x):       # what the answer leaves on them fails the case
            per_layer = answer(model, x)
        ...

Differences from torch: torch has no such check; the stacks are read through the same
``torch._C`` calls torch's own context managers use (``torch.autograd.graph``,
``torch.overrides``, ``torch.utils._python_dispatch``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from typing import Any

import torch

from course import trace

__all__ = ["ADVICE", "collecting", "handed", "left_behind", "snapshot"]

#: Kinds of change an exercise may allow with ``may_leave``.
KINDS = ("requires_grad", "grad", "version", "hooks", "training", "attributes", "graph")

#: What to do about each kind of thing left behind (the check's hint when nothing better fits).
ADVICE = {
    "grad mode": "change grad mode only inside a block (with torch.no_grad(): ...), which "
    "restores it on exit.",
    "inference mode": "use torch.inference_mode() as a with block, which restores it on exit.",
    "anomaly mode": "use torch.autograd.detect_anomaly() as a with block.",
    "saved-tensor hooks": "push hooks with a with block (with saved_tensors_hooks(pack, unpack): "
    "...), which pops them on exit, even when the block raises.",
    "modes": "enter a mode with a with block, which exits it, even when the block raises.",
    "trace": "open a course.trace recording with a with block.",
    "requires_grad": "work on a tensor of your own (x.detach(), x.clone()) instead of changing "
    "requires_grad on the one you were handed.",
    "grad": "compute gradients without writing into the .grad of what you were handed "
    "(torch.autograd.grad returns them instead).",
    "version": "leave the tensors you were handed as they were: an in-place change (even one "
    "undone later) moves their version counter on, and a backward that saved them raises.",
    "hooks": "remove the hooks you register on what you were handed (keep the handle and call "
    "handle.remove()).",
    "training": "leave a module in the mode you found it: if you need eval(), remember "
    "module.training first and call module.train(was_training) before returning.",
    "attributes": "leave the attributes of what you were handed as they were: replacing a "
    "parameter, a buffer, a submodule or a setting changes the caller's object; work on a "
    "copy of your own, or only read.",
    "graph": "leave the graph you were handed as it was (its nodes, their args and their "
    "meta): read it, or work on a copy (copy.deepcopy(gm), or a new torch.fx.Graph).",
    "repeat": "keep no state between calls (no module-level set or counter): the same call "
    "twice must give the same answer.",
}

_DEPTH = 6
_HOOK_ATTRS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_state_dict_hooks",
    "_load_state_dict_pre_hooks",
)


def _hooks_top() -> tuple | None:
    """The innermost (pack, unpack) pair on the saved-tensor-hooks stack, as a tuple of its
    two functions' ids (torch hands back a new tuple each time), or None."""
    top = torch._C._autograd._top_saved_tensors_default_hooks(True)
    return None if top is None else (id(top[0]), id(top[1]))


def _process_state() -> dict[str, Any]:
    return {
        "grad mode": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "anomaly mode": torch.is_anomaly_enabled(),
        "saved-tensor hooks": _hooks_top(),
        "saved-tensor hooks enabled": torch._C._autograd._saved_tensors_hooks_is_enabled(),
        "function modes": torch._C._len_torch_function_stack(),
        "dispatch modes": torch._C._len_torch_dispatch_stack(),
        "trace": trace.ACTIVE,
    }


def _walk(value: Any, name: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(name, watched object) for everything handed in, e.g. ``("W1", t)``, ``("model.fc.weight",
    p)``, ``("plan's closure variable model", m)``, ``("gm.graph", g)``."""
    if depth > _DEPTH:
        return
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, torch.nn.Module):
        yield name, value
        for sub, t in [*value.named_parameters(), *value.named_buffers()]:
            yield f"{name}.{sub}", t
        for sub, m in value.named_modules():
            if sub:
                yield f"{name}.{sub}", m
            graph = getattr(m, "graph", None)
            if isinstance(graph, torch.fx.Graph):
                yield f"{name}.{sub + '.' if sub else ''}graph", graph
    elif isinstance(value, torch.fx.Graph):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, f"{name}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{name}[{k!r}]", depth + 1)
    elif isinstance(value, functools.partial):
        for i, v in enumerate((value.func, *value.args, *value.keywords.values())):
            yield from _walk(v, f"{name}'s argument {i}", depth + 1)
    elif inspect.ismethod(value):
        yield from _walk(value.__self__, f"{name}'s object", depth + 1)
    elif inspect.isfunction(value) and value.__closure__:
        for var, cell in zip(value.__code__.co_freevars, value.__closure__):
            try:
                held = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            yield from _walk(held, f"{name}'s closure variable {var}", depth + 1)


def _hook_count(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return len(obj._backward_hooks or {}) + len(getattr(obj, "_post_accumulate_grad_hooks", None) or {})
    return sum(len(getattr(obj, a, None) or {}) for a in _HOOK_ATTRS)


_NOT_ATTRIBUTES = {
    "training",
    "_is_full_backward_hook",
    *_HOOK_ATTRS,
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks_with_kwargs",
    "_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
    "_non_persistent_buffers_set",
}


def _attributes(module: torch.nn.Module) -> dict[str, int]:
    """What each attribute name of ``module`` holds, by identity: ``{"weight": id(p), "eps": id(1e-5)}``
    (parameters, buffers and submodules by their names; hooks and ``training`` apart)."""
    held: dict[str, int] = {}
    for key, value in vars(module).items():
        if key in _NOT_ATTRIBUTES:
            continue
        if key in ("_parameters", "_buffers", "_modules") and isinstance(value, dict):
            held.update({sub: id(v) for sub, v in value.items()})
        elif not key.startswith("__"):
            held[key] = id(value)
    return held


def _graph_state(graph: torch.fx.Graph) -> tuple:
    """The nodes of ``graph`` in order, each with its op, target, args, kwargs and ``meta`` (by
    identity of each value, so an entry replaced or added shows)."""
    return tuple(
        (
            node.name,
            node.op,
            str(node.target),
            str(node.args),
            str(node.kwargs),
            tuple(sorted((k, id(v)) for k, v in node.meta.items())),
        )
        for node in graph.nodes
    )


def _object_state(obj: Any) -> dict[str, Any]:
    if isinstance(obj, torch.fx.Graph):
        return {"graph": _graph_state(obj)}
    if isinstance(obj, torch.nn.Module):
        return {"hooks": _hook_count(obj), "training": obj.training, "attributes": _attributes(obj)}
    grad = obj.grad if obj.is_leaf else None
    return {
        "requires_grad": obj.requires_grad,
        "grad": None if grad is None else (id(grad), grad._version),
        "version": (obj._version if not obj.is_inference() else 0, _storage(obj)),
        "hooks": _hook_count(obj),
    }


def _storage(t: torch.Tensor) -> Any:
    """Where ``t``'s elements live (``t.data = other`` and ``t.set_(other)`` move it)."""
    try:
        return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
    except (RuntimeError, NotImplementedError):  # a tensor without storage (a functional wrapper)
        return None


def snapshot(names: list[str], args: tuple, kwargs: dict) -> dict:
    """The state to compare after a call of ``answer(*args, **kwargs)``; ``names`` name the
    positional arguments (the answer's parameter names) in messages."""
    handed = [(names[i] if i < len(names) else f"argument {i + 1}", a) for i, a in enumerate(args)]
    handed += list(kwargs.items())
    objects: dict[int, tuple[str, Any, dict]] = {}
    for top, value in handed:
        for name, obj in _walk(value, top):
            objects.setdefault(id(obj), (name, obj, _object_state(obj)))
    return {"process": _process_state(), "objects": list(objects.values())}


def _restore_hooks(before: Any) -> int:
    """Pop the saved-tensor hooks pushed since ``before`` was on top; how many were popped
    (-1 when the stack lost hooks the check had pushed, which cannot be put back)."""
    popped = 0
    while _hooks_top() != before and _hooks_top() is not None and popped < 1000:
        torch._C._autograd._pop_saved_tensors_default_hooks()
        popped += 1
    return popped if _hooks_top() == before else -1


def _restore_modes(kind: str, before: int) -> int:
    length = torch._C._len_torch_function_stack if kind == "function" else torch._C._len_torch_dispatch_stack
    pop = (
        torch._C._pop_torch_function_stack
        if kind == "function"
        else lambda: torch._C._pop_torch_dispatch_stack(None)
    )
    extra = length() - before
    for _ in range(max(extra, 0)):
        pop()
    return extra


def _process_changes(before: dict) -> list[tuple[str, str]]:
    after = _process_state()
    found: list[tuple[str, str]] = []
    for flag, call in (
        ("grad mode", "torch.is_grad_enabled()"),
        ("anomaly mode", "torch.is_anomaly_enabled()"),
    ):
        if after[flag] != before[flag]:
            state = "on" if after[flag] else "off"
            found.append((flag, f"{flag} turned {state} ({call} is {after[flag]}; the check put it back)"))
    torch._C._set_grad_enabled(before["grad mode"])
    torch.set_anomaly_enabled(before["anomaly mode"])
    if after["inference mode"] != before["inference mode"]:
        found.append(("inference mode", f"inference mode left {'on' if after['inference mode'] else 'off'}"))
    if after["saved-tensor hooks"] != before["saved-tensor hooks"]:
        popped = _restore_hooks(before["saved-tensor hooks"])
        what = (
            f"{popped} saved-tensor hook pair{'s' if popped != 1 else ''} pushed and never popped "
            "(the check popped them)"
            if popped > 0
            else "saved-tensor hooks popped that it had not pushed"
        )
        found.append(("saved-tensor hooks", what))
    if after["saved-tensor hooks enabled"] != before["saved-tensor hooks enabled"]:
        found.append(
            (
                "saved-tensor hooks",
                "saved-tensor hooks left disabled"
                if before["saved-tensor hooks enabled"]
                else "saved-tensor hooks left enabled",
            )
        )
        if before["saved-tensor hooks enabled"]:
            torch._C._autograd._saved_tensors_hooks_enable()
    for kind in ("function", "dispatch"):
        extra = _restore_modes(kind, before[f"{kind} modes"])
        if extra:
            what = (
                f"{extra} torch {kind} mode{'s' if extra != 1 else ''} entered and never exited (the check "
                "exited them)"
                if extra > 0
                else f"torch {kind} modes exited that it had not entered"
            )
            found.append(("modes", what))
    if after["trace"] != before["trace"]:
        found.append(
            (
                "trace",
                "a course.trace recording left open" if after["trace"] else "a course.trace recording closed",
            )
        )
    return found


def _attribute_changes(name: str, before: dict, after: dict) -> str:
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    shown = ", ".join(changed[:4]) + (", ..." if len(changed) > 4 else "")
    return f"{name}: attribute{'s' if len(changed) > 1 else ''} {shown} replaced, added or removed"


def _object_changes(objects: list, allowed: frozenset) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    modes: list[str] = []  # the modules whose mode changed, submodules not repeated
    for name, obj, before in objects:
        after = _object_state(obj)
        for key in KINDS:
            if key in allowed or key not in before or after[key] == before[key]:
                continue
            if key == "requires_grad":
                found.append((key, f"{name}.requires_grad changed from {before[key]} to {after[key]}"))
            elif key == "grad":
                what = (
                    "now holds a gradient"
                    if before[key] is None
                    else "was set to None"
                    if after[key] is None
                    else "was changed"
                )
                found.append((key, f"{name}.grad {what}" + (" (was None)" if before[key] is None else "")))
            elif key == "version" and before[key][0] != after[key][0]:
                found.append(
                    (
                        key,
                        f"{name} was changed in place (its _version went from {before[key][0]} to "
                        f"{after[key][0]})",
                    )
                )
            elif key == "version":
                found.append((key, f"{name}'s data was replaced (x.data = ... or set_())"))
            elif key == "training":
                if any(name.startswith(f"{other}.") for other in modes):  # its parent said it
                    continue
                modes.append(name)
                mode = "training" if after[key] else "eval"
                found.append((key, f"{name} was left in {mode} mode ({name}.training is {after[key]})"))
            elif key == "attributes":
                found.append((key, _attribute_changes(name, before[key], after[key])))
            elif key == "graph":
                found.append((key, f"{name} was changed (its nodes, their args or their meta)"))
            else:
                found.append((key, f"{name} has {after[key] - before[key]:+d} hooks registered on it"))
    return found


def left_behind(before: dict, allowed: frozenset = frozenset()) -> list[tuple[str, str]]:
    """What changed since :func:`snapshot` (``(kind, sentence)`` pairs, ``kind`` a key of
    :data:`ADVICE`), with the process-wide state put back where it can be. Changes to the
    handed-in objects of a kind in ``allowed`` are not reported."""
    return _process_changes(before["process"]) + _object_changes(before["objects"], allowed)


_COLLECTORS: list[tuple[frozenset, list]] = []  # one per call being checked (innermost last)


@contextlib.contextmanager
def collecting(allowed: frozenset = frozenset()) -> Iterator[list]:
    """Collect, into the list it yields, what :func:`handed` blocks inside find."""
    found: list = []
    _COLLECTORS.append((frozenset(allowed), found))
    try:
        yield found
    finally:
        _COLLECTORS.pop()


@contextlib.contextmanager
def handed(**objects: Any) -> Iterator[None]:
    """Watch the tensors, modules, graphs and closures a ``run=`` hands the answer in the block:
    what the answer changes on them (``requires_grad``, ``.grad``, ``_version``, hooks,
    ``training``, attributes, graph nodes; the exercise's ``may_leave`` aside) is reported as
    left behind. Outside a check it watches nothing.

    Example:
        >>> w = torch.ones(2, requires_grad=True)
        >>> with collecting() as found:
        ...     with handed(w=w):
        ...         _ = w.requires_grad_(False)
        >>> found
        [('requires_grad', 'w.requires_grad changed from True to False')]
    """
    if not _COLLECTORS:
        yield
        return
    allowed, found = _COLLECTORS[-1]
    before = snapshot(list(objects), tuple(objects.values()), {})["objects"]
    try:
        yield
    finally:
        found.extend(_object_changes(before, allowed))
