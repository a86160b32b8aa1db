"""Checks for lesson 2, hooks: tensor hooks, node hooks, multi-grad hooks, whole-graph logging.

Each exercise is registered once, here: its reference solution (what solutions/02_hooks.ipynb
writes), the oracle (torch), visible and hidden cases, and the known wrong answers with the
hint each deserves. See docs/authoring.md.

The programs the checks run are lesson content, in ``course/content/lesson02.py``, so the
notebook imports and runs exactly what the check judges: ``clip_forward`` (exercise 2.2),
``MULTI_PROGRAMS`` (exercise 2.3), ``ANY_ACTIONS`` (exercise 2.4) and ``norm_model`` with
``NORM_ACTIONS`` (exercise 2.5). A prediction's truth
(``_hook_order``; ``_which_fire`` and its runner ``_multi_grad_firings``) is private: the
notebook runs the program itself, after the check, and never imports what would answer it.
"""

from __future__ import annotations

import math

import torch
import torch.autograd.graph as tg
from torch.autograd.variable import Variable
from torch.utils.hooks import RemovableHandle

import course.autograd.hooks as course_hooks
import course.autograd_graph as cg
from course.checks import case, exercise, predict, wrong
from course.checks.solutions.lesson02 import (
    any_grad_hook,
    clip_grad_hook,
    grad_norm_monitor,
    predicted_firings,
    predicted_order,
)
from course.content.lesson02 import (
    ANY_ACTIONS,
    MULTI_PROGRAMS,
    NORM_ACTIONS,
    any_graph,
    clip_forward,
    clip_leaves,
    multi_graph,
    norm_model,
)

# --- Exercise 2.1: predict the order in which hooks fire -----------------------------------


def _hook_order():
    """The program of exercise 2.1, run by torch: seven hooks, registered in a scrambled
    order; returns their labels in the order they fired."""
    fired = []
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # ExpBackward0
    z = y * 2  # MulBackward0
    z.grad_fn.register_hook(lambda grad_inputs, grad_outputs: fired.append("mul post"))
    y.register_hook(lambda grad: fired.append("y 1"))
    z.grad_fn.register_prehook(lambda grad_outputs: fired.append("mul pre"))
    x.register_hook(lambda grad: fired.append("x"))
    z.register_hook(lambda grad: fired.append("z"))
    y.grad_fn.register_prehook(lambda grad_outputs: fired.append("exp pre"))
    y.register_hook(lambda grad: fired.append("y 2"))
    z.sum().backward()
    return fired


_RIGHT_ORDER = ["z", "mul pre", "mul post", "y 1", "y 2", "exp pre", "x"]

predict(
    "2.1",
    name="predicted_order",
    title="Predict the order in which seven hooks fire",
    truth=_hook_order,
    solution=predicted_order,
    wrong=[
        wrong(
            ["mul post", "y 1", "mul pre", "x", "z", "exp pre", "y 2"],
            "that is the order of registration. Backward fires hooks node by node, from the "
            "output (z's MulBackward0) to the inputs; registration order only matters among "
            "hooks of the same kind on the same tensor or node.",
        ),
        wrong(
            ["mul pre", "z", "mul post", "exp pre", "y 1", "y 2", "x"],
            "tensor hooks on the tensor a node made come first: the node keeps them in a list "
            "of their own (tensor_pre_hooks_), run before its pre-hooks, so 'z' runs before "
            "'mul pre' (and 'y 1', 'y 2' before 'exp pre').",
        ),
        wrong(
            ["z", "mul pre", "y 1", "y 2", "exp pre", "x", "mul post"],
            "a node's post-hook runs right after that node, before the engine moves on to "
            "the next node: 'mul post' comes before y's hooks, not at the end of backward.",
        ),
        wrong(
            ["z", "mul pre", "mul post", "y 2", "y 1", "exp pre", "x"],
            "hooks on the same tensor run in the order they were registered: 'y 1' first.",
        ),
        wrong(
            ["x", "exp pre", "y 1", "y 2", "mul pre", "mul post", "z"],
            "that is the forward order. Backward starts at the output, z, and ends at the leaf x.",
        ),
    ],
    right=[tuple(_RIGHT_ORDER)],  # a tuple for a list (docs/authoring.md, "How answers compare")
    hint="walk backward from z: for each node, the tensor hooks on the tensor it made, then "
    "its pre-hooks, then (after the node runs) its post-hooks; the leaf x comes last.",
)

# --- Exercise 2.2: clip a gradient by its norm, with a tensor hook --------------------------


def _clip_run(answer, target, max_norm, scale):
    """Register the answer's hook on h or W, run backward, remove it, run backward again.

    W starts with a gradient from an earlier backward (ones), so clipping the accumulated
    .grad differs from clipping this backward's gradient. Two hooks of ours sit around the
    answer's (hooks on one tensor run in registration order): the first keeps a copy of the
    gradient the answer's hook is given, the second tells whether that hook changed it.
    """
    x, W, b = clip_leaves()
    W.grad = torch.ones_like(W)
    h, loss = clip_forward(x, W, b, scale)
    t, given = {"h": h, "W": W}[target], {}
    t.register_hook(lambda grad: given.update(grad=grad, copy=grad.clone()) and None)
    handle = answer(t, max_norm)
    t.register_hook(lambda grad: given.update(untouched=torch.equal(given["grad"], given["copy"])) and None)
    loss.backward()
    seen = {
        "W.grad": W.grad.clone(),
        "b.grad": b.grad.clone(),
        "hook left its argument unchanged": given.get("untouched"),
    }
    handle.remove()  # from now on, no clipping
    W.grad, b.grad = None, None
    clip_forward(x, W, b, scale)[1].backward()
    return {**seen, "W.grad after remove": W.grad, "b.grad after remove": b.grad}


def _clip_oracle(t, max_norm):
    """The same clipping, computed by torch.nn.utils.clip_grad_norm_ on a holder."""

    def hook(grad):
        holder = torch.zeros_like(grad, requires_grad=True)
        holder.grad = grad.clone()
        torch.nn.utils.clip_grad_norm_([holder], max_norm)
        return holder.grad

    return t.register_hook(hook)


def _clip_by_value(t, max_norm):
    return t.register_hook(lambda grad: grad.clamp(-max_norm, max_norm))


def _always_rescale(t, max_norm):
    return t.register_hook(lambda grad: grad * (max_norm / grad.norm()))


def _forgot_return(t, max_norm):
    def hook(grad):
        norm = grad.norm()
        if norm > max_norm:
            grad = grad * (max_norm / norm)  # a new tensor, but nobody returns it

    return t.register_hook(hook)


def _clip(grad, max_norm):
    norm = grad.norm()
    return grad * (max_norm / norm) if norm > max_norm else grad


def _after_accumulation(t, max_norm):
    def hook(p):
        p.grad.copy_(_clip(p.grad, max_norm))  # clips the sum with earlier gradients

    return t.register_post_accumulate_grad_hook(hook)


def _node_post_hook(t, max_norm):
    def hook(grad_inputs, grad_outputs):
        return tuple(None if g is None else _clip(g, max_norm) for g in grad_inputs)

    return t.grad_fn.register_hook(hook)


def _no_handle(t, max_norm):
    clip_grad_hook(t, max_norm)


def _clips_in_place(t, max_norm):
    def hook(grad):
        norm = grad.norm()
        if norm > max_norm:
            grad.mul_(max_norm / norm)  # changes the tensor the engine handed over

    return t.register_hook(hook)


def _scale_at_most_one(t, max_norm):  # right, written differently: one expression, no branch
    return t.register_hook(lambda grad: grad * torch.clamp(max_norm / grad.norm(), max=1.0))


exercise(
    "2.2",
    name="clip_grad_hook",
    title="Clip the gradient flowing into a tensor to a maximum norm",
    solution=clip_grad_hook,
    oracle=_clip_oracle,
    run=_clip_run,
    points=2,
    cases=[case("h", 1.0, 1.0, label="h = x @ W + b, max_norm=1.0 (h's gradient has norm about 5.1)")],
    hidden=[
        case("h", 20.0, 0.25, label="h, max_norm=20.0, small gradients (norm under max_norm)"),
        case("h", 4.0, 1.0, label="h, max_norm=4.0: every entry is under 4, the norm is not"),
        case("W", 2.0, 1.0, label="the leaf W, max_norm=2.0, W.grad already holds ones"),
    ],
    wrong=[
        wrong(
            _clip_by_value,
            "grad.clamp(-max_norm, max_norm) clips each entry (clip by value): it changes the "
            "gradient's direction and leaves a big gradient made of small entries unclipped. "
            "Clip by norm: multiply the whole gradient by max_norm / grad.norm().",
        ),
        wrong(
            _always_rescale,
            "only rescale when the norm is over max_norm: a small gradient stays as it is "
            "(your hook scales it *up* to max_norm).",
        ),
        wrong(
            _forgot_return,
            "a tensor hook changes the gradient only through what it returns: return the "
            "clipped tensor (returning None keeps the gradient unchanged).",
        ),
        wrong(
            _after_accumulation,
            "a post-accumulate-grad hook runs after the gradient was added into .grad, so it "
            "clips the sum with earlier backwards' gradients (and it exists only for leaves). "
            "Use t.register_hook: it sees this backward's gradient before it goes anywhere.",
        ),
        wrong(
            _node_post_hook,
            "a post-hook on t.grad_fn sees what t's node sends on to *its* inputs, one "
            "gradient per input, after the node ran: that is the wrong tensor (and a leaf "
            "has no grad_fn). t.register_hook sees the gradient with respect to t itself.",
        ),
        wrong(
            _no_handle,
            "return the handle that t.register_hook gives you, so the caller can remove the hook.",
        ),
        wrong(
            _clips_in_place,
            "your hook changed its argument in place (grad.mul_): the engine may hand the same "
            "tensor to other consumers (both inputs of an add get one tensor), so an in-place "
            "change leaks into gradients you never meant to clip. Return a new tensor instead.",
        ),
    ],
    right=[_scale_at_most_one],
    hint="a tensor hook replaces the gradient by what it returns (None keeps it); clipping by "
    "norm rescales the whole gradient, and only when its norm is over max_norm.",
)

# --- Exercise 2.3: predict what a mode="all" multi-grad hook receives -----------------------


def _multi_grad_firings(program, register=tg.register_multi_grad_hook):
    """Run ``program`` on a fresh graph with ``register((c, d), fn)`` in mode "all"; return
    one tuple per call of fn: which of (c, d) got a gradient (True) or None (False)."""
    a, b, c, d, e = multi_graph()
    firings = []
    register((c, d), lambda grads: firings.append(tuple(g is not None for g in grads)))
    program(a, b, c, d, e)
    return firings


def _which_fire():
    return {key: _multi_grad_firings(program) for key, program in MULTI_PROGRAMS.items()}


_BOTH_GRADS, _FIRST_GRAD_ONLY, _SECOND_GRAD_ONLY = (True, True), (True, False), (False, True)
_RIGHT_FIRINGS = {
    "e.sum().backward()": [_BOTH_GRADS],
    "c.sum().backward()": [_FIRST_GRAD_ONLY],
    "e.sum().backward(inputs=[a])": [_BOTH_GRADS],
    "autograd.grad(e.sum(), c)": [_FIRST_GRAD_ONLY],
    "autograd.grad(d.sum(), a)": [_SECOND_GRAD_ONLY],
    "(a * 2).sum().backward()": [],
    "e.sum().backward() twice": [_BOTH_GRADS, _BOTH_GRADS],
}

predict(
    "2.3",
    name="predicted_firings",
    title="Predict when a mode='all' multi-grad hook fires, and with which Nones",
    truth=_which_fire,
    solution=predicted_firings,
    points=2,
    wrong=[
        wrong(
            {k: [_BOTH_GRADS] * len(v) if v else [] for k, v in _RIGHT_FIRINGS.items()},
            "fn gets None for a tensor whose gradient this backward does not compute: c.sum() "
            "does not reach d, and autograd.grad computes only what its inputs need.",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "c.sum().backward()": []},
            "mode 'all' does not wait for a gradient that will never come: on the first "
            "gradient it asks the engine which of the group's nodes this backward will run "
            "(torch._C._will_engine_execute_node) and fires when those have arrived, with "
            "None for the others.",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "autograd.grad(e.sum(), c)": [_BOTH_GRADS]},
            "autograd.grad(e.sum(), c) runs only the nodes on the way from e to c: d's "
            "gradient is never computed (d is in the graph, but not needed), so fn gets None.",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "e.sum().backward(inputs=[a])": [(False, False)]},
            "inputs=[a] does not skip c and d: a's gradient flows through them (e = c * d), "
            "so both gradients are computed on the way.",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "(a * 2).sum().backward()": [(False, False)]},
            "the hook is made of tensor hooks on c and d: if neither gets a gradient, nothing "
            "fires at all (fn is never called with all Nones).",
        ),
        wrong(
            {**_RIGHT_FIRINGS, "e.sum().backward() twice": [_BOTH_GRADS]},
            "'once' means once per graph task, and every backward() call is a new graph "
            "task: retain_graph=True lets the second call run, and fn fires again.",
        ),
    ],
    right=[{k: [list(f) for f in v] for k, v in _RIGHT_FIRINGS.items()}],  # lists for tuples
    hint="for each call ask: which of c and d does this backward compute a gradient for? "
    "fn fires once per backward call that computes at least one, with None for the others.",
)

# --- Exercise 2.4: mode "any" from plain tensor hooks ----------------------------------------


def _remove(handles, answer_name="any_grad_hook"):
    if isinstance(handles, (list, tuple)):
        for h in handles:
            h.remove()
    elif hasattr(handles, "remove"):  # one handle for all, like register_multi_grad_hook's
        handles.remove()
    else:
        raise TypeError(f"{answer_name} returned {type(handles).__name__}: return the handles")


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
        _remove(handles)
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

# --- Exercise 2.5: per-parameter norms in hooks, one report in a queued callback -------------


def _grads(params):
    return [None if p.grad is None else p.grad.clone() for p in params]


def _same(before, after):
    return (before is None) == (after is None) and (before is None or torch.equal(before, after))


def _monitor_run(answer, frozen, actions, grads_before=False):
    """Hook the model's parameters, run the actions, remove the handles, run once more.

    Observed, for each call of ``report``: the action it ran in, the total it was given, and
    whether every ``.grad`` already held what it holds once backward returned (a report from
    inside backward sees a ``.grad`` not yet filled). Also each parameter's ``.grad`` norm
    after each action (a hook that changed its gradient shows there).
    """
    model, x = norm_model(frozen)
    params = list(model.parameters())
    if grads_before:  # as if an earlier backward had filled them
        for p in params:
            p.grad = torch.ones_like(p) if p.requires_grad else None
    pending, calls, norms = [], [], []
    handles = answer(params, lambda total: pending.append((float(total), _grads(params))))
    for act in actions:
        NORM_ACTIONS[act](model, x)
        for total, seen in pending:
            final = all(_same(g, p.grad) for g, p in zip(seen, params))
            calls.append((act, total, final))
        pending.clear()
        norms.append([None if p.grad is None else p.grad.norm().item() for p in params])
    _remove(handles, "grad_norm_monitor")
    NORM_ACTIONS["loss.backward"](model, x)
    return {
        "report calls (action, total, every .grad final)": calls,
        ".grad norms after each action": norms,
        "report calls after remove": len(pending),
    }


def _monitor_oracle(params, report):
    """torch's pieces: grads kept per graph task, the engine's own final-callback queue, and
    torch.nn.utils.get_total_norm (what clip_grad_norm_ computes)."""
    grads = {}  # graph task id -> this backward's gradients

    def hook(grad):
        task = torch._C._current_graph_task_id()
        if task not in grads:
            grads[task] = []
            Variable._execution_engine.queue_callback(
                lambda: report(torch.nn.utils.get_total_norm(grads.pop(task)))
            )
        grads[task].append(grad)

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _reduces_in_the_hook(params, report):
    squares = []

    def hook(grad):
        squares.append(grad.norm() ** 2)
        report(torch.stack(squares).sum().sqrt())  # BAD: runs once per parameter, mid-backward

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _queued_outside_backward(params, report):
    squares = []

    def finish():
        report(torch.stack(squares).sum().sqrt())
        squares.clear()

    cg.queue_callback(finish)  # BAD: no backward is running yet
    return [p.register_hook(lambda grad: squares.append(grad.norm() ** 2)) for p in params if p.requires_grad]


def _one_callback_per_parameter(params, report):
    total = [0.0]

    def finish():
        report(total[0] ** 0.5)
        total[0] = 0.0

    def hook(grad):
        total[0] += grad.norm().item() ** 2
        cg.queue_callback(finish)  # BAD: one callback per gradient, not one per backward

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _never_resets(params, report):
    squares, queued = [], [False]

    def finish():
        queued[0] = False
        report(torch.stack(squares).sum().sqrt())  # BAD: squares still holds earlier backwards'

    def hook(grad):
        if not queued[0]:
            queued[0] = True
            cg.queue_callback(finish)
        squares.append(grad.norm() ** 2)

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _sum_of_norms(params, report):
    norms = []

    def finish():
        report(sum(norms))  # BAD: norms do not add up; their squares do
        norms.clear()

    def hook(grad):
        if not norms:
            cg.queue_callback(finish)
        norms.append(grad.norm())

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _norm_of_accumulated_grad(params, report):
    queued = [False]

    def finish():
        queued[0] = False
        grads = [p.grad for p in params if p.grad is not None]  # BAD: .grad holds earlier sums too
        report(torch.stack([g.norm() for g in grads]).norm())

    def hook(grad):
        if not queued[0]:
            queued[0] = True
            cg.queue_callback(finish)

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _reduces_in_a_multi_grad_hook(params, report):
    def fn(grads):  # BAD: fires at the group's last gradient, before it reaches .grad
        report(torch.stack([g.norm() for g in grads if g is not None]).norm())

    handle = tg.register_multi_grad_hook([p for p in params if p.requires_grad], fn)
    return list(handle.handles)


def _hooks_on_frozen_params(params, report):
    squares = []

    def finish():
        report(torch.stack(squares).sum().sqrt())
        squares.clear()

    def hook(grad):
        if not squares:
            cg.queue_callback(finish)
        squares.append(grad.norm() ** 2)

    return [p.register_hook(hook) for p in params]  # BAD: a frozen parameter cannot take a hook


def _squares_in_place(params, report):
    squares = []

    def finish():
        report(torch.stack(squares).sum().sqrt())
        squares.clear()

    def hook(grad):
        if not squares:
            cg.queue_callback(finish)
        squares.append(grad.pow_(2).sum())  # BAD: squares the gradient itself

    return [p.register_hook(hook) for p in params if p.requires_grad]


def _no_monitor_handles(params, report):
    grad_norm_monitor(params, report)


def _keyed_by_graph_task(params, report):  # right, written differently: a float, per-task state
    totals = {}

    def hook(grad):
        task = torch._C._current_graph_task_id()
        if task not in totals:
            totals[task] = 0.0
            Variable._execution_engine.queue_callback(lambda: report(math.sqrt(totals.pop(task))))
        totals[task] += grad.norm().item() ** 2

    return tuple(p.register_hook(hook) for p in params if p.requires_grad)


def _vector_norm_of_norms(params, report):  # right, written differently: a flag and vector_norm
    norms, queued = [], [False]

    def finish():
        queued[0] = False
        report(torch.linalg.vector_norm(torch.stack(norms)))
        norms.clear()

    def hook(grad):
        if not queued[0]:
            queued[0] = True
            cg.queue_callback(finish)
        norms.append(torch.linalg.vector_norm(grad))

    return [p.register_hook(hook) for p in params if p.requires_grad]


_EVERY_ACTION = ["loss.backward", "head only", "grad(loss, 0.weight)", "no parameter", "loss.backward"]

exercise(
    "2.5",
    name="grad_norm_monitor",
    title="Gradient norms in tensor hooks, one report in a queued callback",
    solution=grad_norm_monitor,
    oracle=_monitor_oracle,
    run=_monitor_run,
    points=2,
    cases=[
        case((), ["loss.backward", "loss.backward"], label="two backwards of the loss, no zero_grad between")
    ],
    hidden=[
        case((), _EVERY_ACTION, label="backwards that reach all, some and none of the parameters"),
        case(("0.bias",), ["loss.backward", "loss.backward"], label="0.bias is frozen (needs no grad)"),
        case((), ["loss.backward"], True, label="every .grad already holds ones from an earlier backward"),
    ],
    wrong=[
        wrong(
            _reduces_in_the_hook,
            "a tensor hook runs once per parameter, in the middle of backward: reporting there "
            "reports several partial totals. Record the norm in the hook, and report once, from "
            "a callback the hook queues with queue_callback on the first gradient of a backward.",
        ),
        wrong(
            _queued_outside_backward,
            "queue_callback appends to the list of the backward running on this thread, and "
            "when grad_norm_monitor is called none is running (RuntimeError). Queue it from "
            "the hook, when the first gradient of each backward arrives.",
        ),
        wrong(
            _one_callback_per_parameter,
            "every hook queues a callback, so the callback runs once per parameter (the first "
            "reports the total, the others what is left). Queue it only on the first gradient "
            "of each backward.",
        ),
        wrong(
            _never_resets,
            "the second backward's report includes the first backward's gradients: empty your "
            "list (or total) in the callback, once it has reported.",
        ),
        wrong(
            _sum_of_norms,
            "norms do not add up: the total norm is the square root of the sum of the "
            "*squared* norms, as if all gradients were one long vector.",
        ),
        wrong(
            _norm_of_accumulated_grad,
            "p.grad holds the sum of every backward since it was last cleared: the second "
            "backward (or a .grad filled before) makes it too big. Use the gradient your "
            "hook is given: it is this backward's alone.",
        ),
        wrong(
            _reduces_in_a_multi_grad_hook,
            "register_multi_grad_hook fires at the group's last gradient, inside backward, "
            "before that gradient reaches .grad (and it cannot run over leaves under "
            "autograd.grad). A callback queued with queue_callback runs once every node "
            "has run, every .grad filled.",
        ),
        wrong(
            _hooks_on_frozen_params,
            "register_hook raises on a parameter that does not require grad (a frozen one): "
            "skip those, they never get a gradient.",
        ),
        wrong(
            _squares_in_place,
            "your hook squared the gradient in place (grad.pow_), so .grad holds squares: "
            "compute the norm from grad without changing it.",
        ),
        wrong(
            _no_monitor_handles,
            "return the handles (the list of what register_hook returned), so the caller "
            "can remove the monitor.",
        ),
    ],
    right=[_keyed_by_graph_task, _vector_norm_of_norms],
    hint="a tensor hook on each parameter that requires grad keeps its gradient's norm; the "
    "first gradient of each backward queues one callback, which reports the total norm "
    "(the square root of the sum of squares) once backward is over, and starts again from zero.",
)
