"""Exercise 2.4, mode "any" from plain tensor hooks: how a call is run and observed, the oracle, the
visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import torch
import torch.autograd.graph as tg
from torch.utils.hooks import RemovableHandle

import course.autograd.hooks as course_hooks
from course.checks import case, exercise, wrong
from course.checks.lesson02._shared import remove_handles
from course.checks.solutions.lesson02 import any_grad_hook
from course.content.lesson02 import (
    ANY_ACTIONS,
    any_graph,
)

_LIBRARY_FILES = {tg.__file__, course_hooks.__file__}  # where register_multi_grad_hook is written


def _written_in(fn) -> str:
    """The file whose code ``fn`` runs (functools.wraps copies a name, not the code)."""
    return getattr(getattr(fn, "__code__", None), "co_filename", "")


def _any_run(answer, group, actions):
    """Hook the group, run the actions, remove the handles, run once more; list fn's calls.

    Also observed: whether the answer returned a list of plain tensor-hook handles, one per
    tensor that requires grad, and whether the hooks it hung on the group are its own (the
    exercise is to build mode "any", not to call the library's; the oracle is the library's).
    """
    g = any_graph()
    calls, now = [], ["before"]
    groups = group if isinstance(group[0], tuple) else (group,)  # several groups hooked at once
    plain, own_hooks, all_handles = True, True, []
    for k, names in enumerate(groups):
        tensors = [g[n] for n in names]
        tag = () if len(groups) == 1 else (k,)  # which group's fn was called
        handles = answer(tensors, lambda grad, tag=tag: calls.append((now[0], *tag, grad.tolist())))
        ok = isinstance(handles, (list, tuple)) and all(isinstance(h, RemovableHandle) for h in handles)
        plain = plain and ok and len(handles) == sum(t.requires_grad for t in tensors)
        hooks = [fn for t in tensors for fn in (t._backward_hooks or {}).values()]
        library = any(_written_in(fn) in _LIBRARY_FILES for fn in hooks)
        own_hooks = own_hooks and (answer is _any_oracle or not library)
        all_handles.append(handles)
    for act in actions:
        now[0] = act
        ANY_ACTIONS[act](g)
    for handles in all_handles:
        remove_handles(handles)
    now[0] = "after remove"
    (g["a"] * g["b"]).sum().backward()
    return {
        "calls of fn": calls,
        "returned a list of tensor-hook handles": plain,
        "hooks are its own": own_hooks,
    }


def _any_oracle(tensors, fn):
    """torch's own mode "any"; its per-tensor handles, as the exercise asks for."""
    return list(tg.register_multi_grad_hook(tensors, fn, mode="any").handles)


def _the_library_itself(tensors, fn):
    return tg.register_multi_grad_hook(tensors, fn, mode="any")


def _the_library_handles(tensors, fn):
    return list(tg.register_multi_grad_hook(tensors, fn, mode="any").handles)


def _last_task_only(tensors, fn):  # right, written differently: task ids only grow
    last = [None]

    def hook(grad):
        task = torch._C._current_graph_task_id()
        if task != last[0]:
            last[0] = task
            fn(grad)

    return [t.register_hook(hook) for t in tensors if t.requires_grad]


def _once_per_tensor(tensors, fn):
    return [t.register_hook(fn) for t in tensors if t.requires_grad]


def _once_ever(tensors, fn):
    fired = [False]

    def hook(grad):
        if not fired[0]:
            fired[0] = True
            fn(grad)

    return [t.register_hook(hook) for t in tensors if t.requires_grad]


def _every_nth(tensors, fn):
    tensors = [t for t in tensors if t.requires_grad]
    count = [0]

    def hook(grad):
        if count[0] % len(tensors) == 0:  # assumes every backward reaches every tensor
            fn(grad)
        count[0] += 1

    return [t.register_hook(hook) for t in tensors]


def _hooks_on_every_tensor(tensors, fn):
    fired = set()

    def hook(grad):
        id = torch._C._current_graph_task_id()
        if id not in fired:
            fired.add(id)
            fn(grad)

    return [t.register_hook(hook) for t in tensors]


_FIRED_ANYWHERE = set()  # BAD: one set of graph task ids for every group ever hooked


def _one_set_for_all_groups(tensors, fn):
    def hook(grad):
        task = torch._C._current_graph_task_id()
        if task not in _FIRED_ANYWHERE:
            _FIRED_ANYWHERE.add(task)
            fn(grad)

    return [t.register_hook(hook) for t in tensors if t.requires_grad]


def _no_handles(tensors, fn):
    any_grad_hook(tensors, fn)


_ALL_ACTIONS = ["loss.backward", "loss.backward", "c.backward", "grad(d, b)", "b.backward"]

exercise(
    "2.4",
    name="any_grad_hook",
    title="Build mode='any' out of plain tensor hooks",
    solution=any_grad_hook,
    oracle=_any_oracle,
    run=_any_run,
    points=2,
    cases=[
        case(
            ("a", "c", "d"),
            ["loss.backward", "loss.backward"],
            label="group (a, c, d), two backwards of loss = (2c + 3d).sum()",
        )
    ],
    hidden=[
        case(("a", "c", "d"), _ALL_ACTIONS, label="group (a, c, d), five different backward calls"),
        case(("c", "d", "f"), _ALL_ACTIONS, label="group (c, d, f), f does not require grad"),
        case(("a",), _ALL_ACTIONS, label="a group of one leaf"),
        case((("a", "c"), ("b", "d")), _ALL_ACTIONS, label="two groups, (a, c) and (b, d), hooked at once"),
    ],
    wrong=[
        wrong(
            _once_per_tensor,
            "fn must run once per backward, not once per tensor: remember which graph tasks "
            "already called it (torch._C._current_graph_task_id() names the current one).",
        ),
        wrong(
            _once_ever,
            "a single flag makes fn run once, ever: every backward() or autograd.grad() call "
            "is a new graph task and must call fn again. Key the flag by "
            "torch._C._current_graph_task_id().",
        ),
        wrong(
            _every_nth,
            "counting gradients assumes every backward reaches every tensor of the group; "
            "c.sum().backward() reaches c and a but not d. Key by the graph task id instead.",
        ),
        wrong(
            _hooks_on_every_tensor,
            "register_hook raises on a tensor that does not require grad: skip such tensors "
            "(they never get a gradient), as register_multi_grad_hook(mode='any') does.",
        ),
        wrong(
            _one_set_for_all_groups,
            "the graph tasks that already called fn are remembered in one set shared by every "
            "group: when two groups are hooked, the second group's fn never runs in a backward "
            "that reached the first. Keep the set inside the call, one per group.",
        ),
        wrong(
            _no_handles,
            "return the handles (the list of what register_hook returned), so "
            "the caller can remove the hook.",
        ),
        wrong(
            _the_library_itself,
            "that is register_multi_grad_hook(mode='any') itself, the function this exercise "
            "rebuilds: write it from t.register_hook and torch._C._current_graph_task_id(), and "
            "return the list of handles.",
        ),
        wrong(
            _the_library_handles,
            "those handles belong to register_multi_grad_hook's own hooks: the exercise is to "
            "build mode 'any' yourself, from t.register_hook and the graph task id.",
        ),
    ],
    right=[_last_task_only],
    hint="one shared tensor hook on every tensor that requires grad; it calls fn only for the "
    "first gradient of each backward call, which it recognises by the graph task's id.",
)
