"""Lesson 9, memory policies: are the reference solutions and the checks' truths right, judged by torch?

The generic tests (tests/test_checks.py, tests/test_catalogue_grade.py) show that each
registered solution passes its own check and every known wrong answer fails with its hint;
these ask whether the oracles agree with torch on more programs, by other routes.
"""

from __future__ import annotations

import collections
import gc
import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.autograd.graph import saved_tensors_hooks
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts, set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode

from course.checks import get
from course.checks.lesson09 import ex9_1_recompute_hooks as ex9_1
from course.checks.lesson09 import ex9_2_predicted_reruns as ex9_2
from course.checks.lesson09 import ex9_3_budget_policy as ex9_3
from course.checks.solutions import lesson09 as solutions
from course.content import lesson09 as C

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# A program is a chain of ops on a (rows, 8) activation, drawn by Hypothesis.
_OPS = {
    "linear": lambda h, w: h @ w,
    "sin": lambda h, w: h.sin(),
    "tanh": lambda h, w: torch.tanh(h),
    "mul": lambda h, w: h * h,
    "gelu": lambda h, w: torch.nn.functional.gelu(h),
}


def _program(ops, rows, seed):
    torch.manual_seed(seed)
    x = torch.randn(rows, 8, requires_grad=True)
    ws = [(0.5 * torch.randn(8, 8)).requires_grad_() if op == "linear" else None for op in ops]

    def fn(x):
        h = x
        for op, w in zip(ops, ws):
            h = _OPS[op](h, w)
        return h.sum()

    return fn, x, [x, *(w for w in ws if w is not None)]


_programs = st.tuples(
    st.lists(st.sampled_from(sorted(_OPS)), min_size=1, max_size=5), st.integers(1, 5), st.integers(0, 100)
)


def _grads_and_backward_ops(run_forward, fn, x, leaves):
    forward_out = run_forward(fn, x)
    with C.OpCounter() as bwd:
        grads = torch.autograd.grad(forward_out, leaves)
    return grads, bwd.counts


@settings(max_examples=20, deadline=None)
@given(_programs)
def test_do_the_recompute_hooks_do_what_torchs_checkpoint_does(program):
    """Same gradients, and the same ops in backward, as torch's checkpoint with early stop off."""
    ops, rows, seed = program
    fn, x, leaves = _program(ops, rows, seed)

    def with_hooks(fn, x):
        with saved_tensors_hooks(*solutions.recompute_hooks(fn, x)):
            return fn(x)

    def with_torch(fn, x):
        return checkpoint(fn, x, use_reentrant=False)

    with set_checkpoint_early_stop(False):
        ours, our_ops = _grads_and_backward_ops(with_hooks, fn, x, leaves)
        theirs, their_ops = _grads_and_backward_ops(with_torch, fn, x, leaves)
    plain = torch.autograd.grad(fn(x), leaves)
    assert our_ops == their_ops
    for a, b, c in zip(ours, theirs, plain):
        assert torch.allclose(a, b) and torch.allclose(a, c, atol=1e-6)


class _GradModeOps(TorchDispatchMode):
    """Counts the ops that run with grad mode on: inside backward, only a recomputation does."""

    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.is_grad_enabled():
            self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def test_is_the_rerun_prediction_what_runs_with_grad_mode_on_in_backward():
    fn, args, leaves = C.PROGRAMS["block"]()
    out = checkpoint(fn, *args, use_reentrant=False)
    seed = torch.ones_like(out)
    with _GradModeOps() as seen:
        torch.autograd.grad(out, leaves, seed)
    assert (
        ex9_2._rerun_in_backward()
        == {op: seen.counts[op] for op in ex9_2.PREDICTED_OPS}
        == {"addmm": 1, "gelu": 1, "sum": 0}
    )


def _under_policy(policy, fn, x, leaves):
    """(bytes the policy stored, FLOPs backward runs, gradients) of fn(x) under torch's checkpoint."""
    modes = []

    def context_fn():
        pair = create_selective_checkpoint_contexts(policy)
        modes.append(pair[0])
        return pair

    out = checkpoint(fn, x, use_reentrant=False, context_fn=context_fn)
    stored = C.stored_bytes(modes[0], leaves)
    with FlopCounterMode(display=False) as flops:
        grads = torch.autograd.grad(out, leaves)
    return stored, flops.get_total_flops(), grads


@settings(max_examples=8, deadline=None)
@given(_programs, st.integers(0, 700))
def test_is_the_budget_policy_the_cheapest_choice_torch_measures_within_the_budget(program, budget):
    """Every subset of the products, each run through torch: the reference's choice stays within
    the budget and reruns as few FLOPs as the best of them, with plain autograd's gradients."""
    ops, rows, seed = program
    fn, x, leaves = _program(ops, rows, seed)
    plain = torch.autograd.grad(fn(x), leaves)
    n = len(ex9_3._products(fn, (x,)))
    measured = [
        _under_policy(ex9_3._by_position(set(keep)), fn, x, leaves)[:2]
        for size in range(n + 1)
        for keep in itertools.combinations(range(n), size)
    ]
    stored, flops, grads = _under_policy(solutions.budget_policy(fn, (x,), budget), fn, x, leaves)
    assert stored <= budget
    assert flops == min(f for b, f in measured if b <= budget)
    for a, b in zip(grads, plain):
        assert torch.allclose(a, b, atol=1e-6)


def test_does_torch_store_and_rerun_what_the_products_profile_counts_for_addmm_bmm_and_mm():
    """On the program with all three kinds of product (inner sizes unlike the results' columns):
    every subset saved through torch stores the profiled bytes and reruns the profiled FLOPs
    (2*m*k*n, k the left factor's columns) of the products left out."""
    fn, args, _ = C.PROGRAMS["addmm, bmm and mm"]()
    products = ex9_3._products(fn, args)
    assert len(products) == 3
    for size in range(len(products) + 1):
        for keep in itertools.combinations(range(len(products)), size):
            r = C.run_policy(ex9_3._by_position(set(keep)), "addmm, bmm and mm")
            assert r["bytes the policy stored"] == sum(products[i][0] for i in keep)
            assert r["FLOPs rerun"] == sum(f for i, (_, f) in enumerate(products) if i not in keep)


def test_does_the_budget_policy_run_through_torch_within_each_cases_budget():
    """Each 9.3 case runs (an error outcome would compare equal to any answer's same error) and
    the reference stores at most that case's budget, which the cost line's cap is not below."""
    for c in get("9.3").all_cases:
        name, budget = c.args
        assert budget <= C.BUDGET
        r = C.run_policy(("for", lambda fn, args: solutions.budget_policy(fn, args, budget)), name)  # noqa: B023
        assert r["bytes the policy stored"] <= budget


def _alive_after_three_steps(make_forward, name="exp"):
    """Tensors made in backward that outlive three steps of program ``name`` and a gc.collect()."""
    made = []
    for _ in range(3):
        fn, args, leaves = C.PROGRAMS[name]()
        out = make_forward(fn, args)
        with C.OpCounter() as bwd:
            torch.autograd.grad(out, leaves)
        made.extend(bwd.results)
        del fn, args, leaves, out
    gc.collect()
    return sum(r() is not None for r in made)


def _under_hooks(make_hooks):
    def forward(fn, args):
        with saved_tensors_hooks(*make_hooks(fn, *args)):
            return fn(*args)

    return forward


@pytest.mark.parametrize("name", ["exp", "pointwise", "block"])
def test_do_the_recompute_hooks_leave_nothing_alive_after_backward_as_torchs_checkpoint(name):
    """9.1's reference keeps nothing of its rerun after backward, as torch's checkpoint (whose
    recomputation pack detaches); the same hooks without the detach leak every step."""
    with set_checkpoint_early_stop(False):
        by_torch = _alive_after_three_steps(lambda fn, args: checkpoint(fn, *args, use_reentrant=False), name)
        ours = _alive_after_three_steps(_under_hooks(solutions.recompute_hooks), name)
        by_dict = _alive_after_three_steps(_under_hooks(ex9_1._recompute_hooks_by_dict), name)
        leaky = _alive_after_three_steps(_under_hooks(ex9_1._rerun_keeping_its_graph), name)
    assert by_torch == ours == by_dict == 0
    assert leaky >= 3  # at least one a step


def test_does_exp_alone_leak_through_the_cycle_lesson_3_shows():
    """The exp case: kept detached but handed to the rerun's nodes with its graph, exp's output
    still leaks (it holds the node that holds it), one a step. The cycle runs through autograd's
    C++ node, so the garbage collector never finds it (lesson 09's last cell shows that
    torch.utils.viz's cycle watcher, which reads what the collector found, cannot report it)."""

    def kept_detached_returned_attached(fn, *args):
        counter, kept = itertools.count(), []

        def unpack(i):
            if not kept:

                def record(t):
                    kept.append(t.detach())
                    return t  # the rerun's node keeps t itself, graph and all

                with torch.enable_grad(), saved_tensors_hooks(record, lambda t: t):
                    fn(*args)
            return kept[i]

        return (lambda t: next(counter)), unpack

    assert _alive_after_three_steps(_under_hooks(kept_detached_returned_attached), "exp") == 3
    assert _alive_after_three_steps(_under_hooks(kept_detached_returned_attached), "block") == 0
