"""Lesson 2's claims, checked against torch beyond the generic exercise tests.

- Is the order hooks fire in fixed by kind (tensor hooks, node pre-hooks, post-hooks, node by
  node), whatever order we register them in, as exercise 2.1 teaches?
- Is exercise 2.2's oracle (torch's clip_grad_norm_ inside a hook) the same as clipping by
  hand (take the gradient at t, clip it, backpropagate the clipped gradient)?
- Do course's and torch's register_multi_grad_hook(mode="all") fire alike on exercise 2.3's
  programs and on any group of its tensors?
- Does the reference any_grad_hook of exercise 2.4 call fn exactly when torch's and course's
  mode="any" do, over any group and any sequence of backward calls, while the check tells the
  library's own mode "any" apart?
- Does an add hand the same gradient tensor to both its inputs, so that a hook changing its
  argument in place changes the other input's gradient too (what lesson 2 shows)?
- Is exercise 2.5's oracle torch's total norm (clip_grad_norm_ over this backward's .grad),
  and does the reference grad_norm_monitor report when, and what, the oracle reports, over
  any sequence of backward calls and any frozen parameters?
"""

import pytest
import torch
import torch.autograd.graph as tg
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd_graph as cg
from course.checks import get
from course.checks.lesson02.ex2_4_any_grad_hook import _any_run
from course.checks.lesson02.ex2_5_grad_norm_monitor import _monitor_oracle, _monitor_run
from course.checks.solutions.lesson02 import any_grad_hook, clip_grad_hook, grad_norm_monitor
from course.content.lesson02 import (
    ANY_ACTIONS,
    MULTI_PROGRAMS,
    NORM_ACTIONS,
    clip_forward,
    clip_leaves,
    multi_graph,
    norm_model,
)

pytestmark = pytest.mark.lesson02

# --- 2.1: the order is decided by kind, not by registration --------------------------------

REGISTRATIONS = {  # label -> how exercise 2.1's program registers it on (x, y, z)
    "mul post": lambda x, y, z, log: z.grad_fn.register_hook(lambda gi, go: log.append("mul post")),
    "y 1": lambda x, y, z, log: y.register_hook(lambda g: log.append("y 1")),
    "mul pre": lambda x, y, z, log: z.grad_fn.register_prehook(lambda go: log.append("mul pre")),
    "x": lambda x, y, z, log: x.register_hook(lambda g: log.append("x")),
    "z": lambda x, y, z, log: z.register_hook(lambda g: log.append("z")),
    "exp pre": lambda x, y, z, log: y.grad_fn.register_prehook(lambda go: log.append("exp pre")),
    "y 2": lambda x, y, z, log: y.register_hook(lambda g: log.append("y 2")),
}


@settings(max_examples=30, deadline=None)
@given(order=st.permutations(sorted(REGISTRATIONS)))
def test_hooks_fire_by_kind_whatever_the_registration_order(order):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = y * 2
    log = []
    for label in order:
        REGISTRATIONS[label](x, y, z, log)
    z.sum().backward()
    ys = [label for label in order if label.startswith("y ")]  # same tensor: registration order
    assert log == ["z", "mul pre", "mul post", *ys, "exp pre", "x"]


def test_exercise_2_1_truth_is_that_order():
    assert get("2.1").oracle() == get("2.1").solution


# --- 2.2: the oracle is clipping by hand ----------------------------------------------------


def _clip_by_hand(target, max_norm, scale):
    """W.grad and b.grad when the gradient at ``target`` is clipped, without any hook."""
    x, W, b = clip_leaves()
    prior = torch.ones_like(W)
    h, loss = clip_forward(x, W, b, scale)
    t = {"h": h, "W": W}[target]
    (g,) = torch.autograd.grad(loss, t, retain_graph=True)
    clipped = g * (max_norm / g.norm()) if g.norm() > max_norm else g
    if target == "W":  # W's gradient goes straight into W.grad; b's is unchanged
        (gb,) = torch.autograd.grad(loss, b)
        return prior + clipped, gb
    gW, gb = torch.autograd.grad(h, (W, b), clipped)  # backpropagate the clipped gradient
    return prior + gW, gb


def _with_hook(register, target, max_norm, scale):
    x, W, b = clip_leaves()
    W.grad = torch.ones_like(W)
    h, loss = clip_forward(x, W, b, scale)
    register({"h": h, "W": W}[target], max_norm)
    loss.backward()
    return W.grad, b.grad


@settings(max_examples=40, deadline=None)
@given(target=st.sampled_from(["h", "W"]), max_norm=st.floats(0.05, 30.0), scale=st.floats(0.05, 3.0))
def test_clip_oracle_and_reference_equal_clipping_by_hand(target, max_norm, scale):
    want = _clip_by_hand(target, max_norm, scale)
    for register in (get("2.2").oracle, clip_grad_hook):
        got = _with_hook(register, target, max_norm, scale)
        for g, w in zip(got, want):
            assert torch.allclose(g, w, rtol=1e-4, atol=1e-5)


# --- 2.3: mode "all", course against torch --------------------------------------------------


@pytest.mark.parametrize("key", sorted(MULTI_PROGRAMS))
def test_mode_all_fires_alike_on_the_programs_of_exercise_2_3(key):
    assert (
        _firings_on_group(cg.register_multi_grad_hook, "cd", key)
        == _firings_on_group(tg.register_multi_grad_hook, "cd", key)
        == get("2.3").solution[key]
    )


def _firings_on_group(register, group, key):
    a, b, c, d, e = tensors = multi_graph()
    named = dict(zip("abcde", tensors))
    firings = []
    register([named[k] for k in group], lambda grads: firings.append(tuple(g is not None for g in grads)))
    try:
        MULTI_PROGRAMS[key](a, b, c, d, e)
    except RuntimeError as err:  # a leaf under autograd.grad: both must raise
        firings.append(type(err).__name__)
    return firings


@settings(max_examples=40, deadline=None)
@given(
    group=st.lists(st.sampled_from("abcde"), min_size=1, max_size=4),
    key=st.sampled_from(sorted(MULTI_PROGRAMS)),
)
def test_mode_all_fires_alike_on_any_group(group, key):
    assert _firings_on_group(cg.register_multi_grad_hook, group, key) == _firings_on_group(
        tg.register_multi_grad_hook, group, key
    )


# --- 2.4: any_grad_hook against mode "any" --------------------------------------------------


def _mode_any(register):
    return lambda tensors, fn: register(tensors, fn, mode="any")


@settings(max_examples=40, deadline=None)
@given(
    group=st.lists(st.sampled_from("abcdf"), min_size=1, max_size=4, unique=True),
    actions=st.lists(st.sampled_from(sorted(set(ANY_ACTIONS) - {"b.backward"})), max_size=5),
)
def test_any_grad_hook_calls_fn_when_mode_any_does(group, actions):
    actions = actions + ["b.backward"]  # the last one frees the graph
    seen = _any_run(any_grad_hook, group, actions)
    ours = seen["calls of fn"]
    assert ours == _any_run(_mode_any(tg.register_multi_grad_hook), group, actions)["calls of fn"]
    assert ours == _any_run(_mode_any(cg.register_multi_grad_hook), group, actions)["calls of fn"]
    assert all(when != "after remove" for when, _ in ours)  # the handles did remove it
    assert seen["returned a list of tensor-hook handles"] and seen["hooks are its own"]
    # the library's own mode "any" is seen for what it is, torch's and course's alike
    if set(group) != {"f"}:  # f needs no grad: with only f, no hook at all is registered
        for register in (tg.register_multi_grad_hook, cg.register_multi_grad_hook):
            theirs = _any_run(_mode_any(register), group, actions)
            assert not theirs["returned a list of tensor-hook handles"] and not theirs["hooks are its own"]


# --- 2.2: why a hook must not change its argument ------------------------------------------


@settings(max_examples=30, deadline=None)
@given(scale=st.floats(0.1, 10.0), weights=st.lists(st.floats(-3, 3), min_size=3, max_size=3))
def test_an_add_hands_one_gradient_tensor_to_both_inputs_so_an_in_place_hook_leaks(scale, weights):
    def grads(hook):
        a, b = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
        a2, b2 = a * 1, b * 1
        given = []
        a2.register_hook(given.append)
        b2.register_hook(given.append)
        b2.register_hook(hook)  # b2 was made after a2, so its node runs first
        ((a2 + b2) * torch.tensor(weights)).sum().backward()
        return a.grad, b.grad, given[0] is given[1]

    def in_place(g):
        g.mul_(scale)

    w = torch.tensor(weights)
    a_new, b_new, shared = grads(lambda g: g * scale)
    a_inplace, b_inplace, shared_too = grads(in_place)
    assert shared and shared_too
    assert torch.allclose(a_new, w) and torch.allclose(b_new, w * scale)
    assert torch.allclose(a_inplace, w * scale) and torch.allclose(b_inplace, w * scale)  # a's leaked


# --- 2.5: one report per backward, after it ------------------------------------------------


@pytest.mark.parametrize("action", sorted(NORM_ACTIONS))
def test_the_monitor_oracle_reports_clip_grad_norms_total_once_per_backward(action):
    model, x = norm_model()
    params = list(model.parameters())
    reports = []
    handles = _monitor_oracle(params, reports.append)
    NORM_ACTIONS[action](model, x)
    for handle in handles:
        handle.remove()
    reached = [p for p in params if p.grad is not None]
    if action == "grad(loss, 0.weight)":  # autograd.grad fills no .grad: ask torch again
        (g,) = torch.autograd.grad(model(x).pow(2).sum(), model[0].weight)
        model[0].weight.grad, reached = g, [model[0].weight]
    if not reached:
        assert reports == []
        return
    total = torch.nn.utils.clip_grad_norm_(reached, max_norm=float("inf"))
    assert len(reports) == 1 and torch.allclose(torch.as_tensor(reports[0]), total)


@settings(max_examples=25, deadline=None)
@given(
    # the biases only: with 0.weight frozen, grad(loss, 0.weight) has nothing to differentiate
    frozen=st.lists(st.sampled_from(["0.bias", "2.bias"]), max_size=2, unique=True).map(tuple),
    actions=st.lists(st.sampled_from(sorted(NORM_ACTIONS)), min_size=1, max_size=5),
    grads_before=st.booleans(),
)
def test_grad_norm_monitor_reports_what_and_when_the_oracle_does(frozen, actions, grads_before):
    ours = _monitor_run(grad_norm_monitor, frozen, actions, grads_before)
    theirs = _monitor_run(_monitor_oracle, frozen, actions, grads_before)
    calls, expected = (
        ours.pop("report calls (action, total, every .grad final)"),
        theirs.pop("report calls (action, total, every .grad final)"),
    )
    assert [(a, final) for a, _, final in calls] == [(a, final) for a, _, final in expected]
    assert all(final for _, _, final in calls)  # reported after backward, every .grad final
    assert torch.allclose(torch.tensor([t for _, t, _ in calls]), torch.tensor([t for _, t, _ in expected]))
    assert ours == theirs  # .grad norms after each action, and no call after remove
