"""Does checked_hooks give back autograd's in-place check, exactly where eager has it?

The oracle is torch without hooks: each program runs in eager (no hooks), under plain
torch hooks (the silent wrong gradient this module exists for), and under
``checked_hooks`` around several pack/unpack pairs; the error type and message must be
eager's, and where eager passes, the gradients must be eager's.
"""

from __future__ import annotations

import contextlib
import gc
import weakref

import pytest
import torch
import torch.autograd.graph as torch_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd.mutation as course_mutation
import course.autograd.saved_tensors as course_saved
from course.autograd.version_check import VersionStamp, checked_hooks, stamp

pytestmark = pytest.mark.lesson03


def _detach(t):
    return t.detach()


def _identity(t):
    return t


def _clone(t):
    return t.detach().clone()


def _to_cpu_pair(t):
    return t.device, t.detach().to("cpu", copy=True)


def _from_cpu_pair(p):
    device, t = p
    return t.to(device)


#: pack/unpack pairs that checked_hooks wraps: keep by reference, copy, a save_on_cpu-like pair.
PAIRS = {
    "detach": (_detach, _identity),
    "clone": (_clone, _identity),
    "to_cpu": (_to_cpu_pair, _from_cpu_pair),
}


def no_hooks():
    return contextlib.nullcontext()


def plain_hooks():
    return torch_graph.saved_tensors_hooks(_detach, _identity)


def checked(pair):
    return lambda: course_saved.saved_tensors_hooks(*checked_hooks(*PAIRS[pair]))


def outcome(program, hooks, mutate=True):
    """(error type, message) or ("ok", gradients) of ``program`` under ``hooks``."""
    torch.manual_seed(0)
    try:
        grads = program(hooks, mutate)
    except Exception as e:  # noqa: BLE001 - we compare whatever is raised
        return type(e), str(e)
    return "ok", grads


# ---------------------------------------------------------------- programs where eager raises
# Each runs forward under hooks(), then (when mutate) writes a saved tensor in place, then
# backward; it returns the gradients.


def activation_modified(hooks, mutate):
    x = torch.randn(3, requires_grad=True)
    with hooks():
        y = x.exp()  # saves its output
    if mutate:
        y.add_(1)
    y.sum().backward()
    return (x.grad,)


def input_modified(hooks, mutate):
    x = torch.randn(3, requires_grad=True)
    with hooks():
        a = x * 2
        b = a.sin()  # saves its input a
    if mutate:
        a.add_(1)
    b.sum().backward()
    return (x.grad,)


def parameter_modified(hooks, mutate):
    w = torch.nn.Parameter(torch.randn(2, 3))
    x = torch.randn(4, 3, requires_grad=True)
    with hooks():
        y = x * w[0]  # saves w[0], a view of a leaf
        z = (x * 3) @ w.t()  # saves w.t(), a temporary view
        u = x.sum(0) * w.sum(0)  # saves a non-leaf of w
    if mutate:
        with torch.no_grad():
            w.mul_(0.5)  # an optimizer step between forward and backward
    (y.sum() + z.sum() + u.sum()).backward()
    return x.grad, w.grad


def leaf_modified(hooks, mutate):
    w = torch.nn.Parameter(torch.randn(3))
    x = torch.randn(3, requires_grad=True)
    with hooks():
        y = x * w  # saves the leaf w itself
    if mutate:
        with torch.no_grad():
            w.sub_(0.1)
    y.sum().backward()
    return x.grad, w.grad


def view_base_modified(hooks, mutate):
    x = torch.randn(4, requires_grad=True)
    with hooks():
        a = x * 2
        c = a[1:] * a[1:]  # saves two temporary views of a
    if mutate:
        a.add_(1)
    c.sum().backward()
    return (x.grad,)


def view_modified_through_another_view(hooks, mutate):
    x = torch.randn(4, requires_grad=True)
    with hooks():
        a = x * 2
        v = a[1:]
        c = v.cos()  # saves v
    del v
    if mutate:
        a[2:].mul_(3)
    c.sum().backward()
    return (x.grad,)


def saved_output_modified_through_view(hooks, mutate):
    x = torch.randn(3, requires_grad=True)
    with hooks():
        y = (x * 2).exp()
    if mutate:
        y[0:1].mul_(2)
    y.sum().backward()
    return (x.grad,)


def detached_alias_modified(hooks, mutate):
    x = torch.randn(3, requires_grad=True)
    with hooks():
        y = x.tanh()  # saves its output
    if mutate:
        y.detach().add_(1)  # shares y's version counter
    y.sum().backward()
    return (x.grad,)


class _SaveOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        r = a.exp()
        ctx.save_for_backward(r)
        return r

    @staticmethod
    def backward(ctx, g):
        (r,) = ctx.saved_tensors
        return g * r


def function_output_modified(hooks, mutate):
    x = torch.randn(3, requires_grad=True)
    with hooks():
        r = _SaveOutput.apply(x * 1)
    if mutate:
        r.mul_(2)
    r.sum().backward()
    return (x.grad,)


RAISING = [
    activation_modified,
    input_modified,
    parameter_modified,
    leaf_modified,
    view_base_modified,
    view_modified_through_another_view,
    saved_output_modified_through_view,
    detached_alias_modified,
    function_output_modified,
]
raising = pytest.mark.parametrize("program", RAISING, ids=lambda p: p.__name__)


@raising
def test_eager_raises_and_the_unmutated_program_runs(program):
    """Is each program a real case: eager raises only because of the in-place write?"""
    kind, message = outcome(program, no_hooks)
    assert kind is RuntimeError and "modified by an inplace operation" in message
    assert outcome(program, no_hooks, mutate=False)[0] == "ok"


@raising
def test_plain_torch_hooks_give_a_silent_wrong_gradient(program):
    """Under torch's hooks, does the same program run and give a gradient that is not eager's?"""
    kind, wrong = outcome(program, plain_hooks)
    assert kind == "ok"
    _, right = outcome(program, no_hooks, mutate=False)  # what eager computes before the write
    assert any(not torch.allclose(w, r) for w, r in zip(wrong, right))


@raising
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_checked_hooks_raise_eagers_error(program, pair):
    """With checked_hooks around any pair, is the error eager's, word for word?"""
    assert outcome(program, checked(pair)) == outcome(program, no_hooks)


@raising
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_checked_hooks_change_nothing_without_the_write(program, pair):
    """Without the in-place write, are the gradients eager's?"""
    kind, grads = outcome(program, checked(pair), mutate=False)
    _, eager = outcome(program, no_hooks, mutate=False)
    assert kind == "ok" and all(torch.equal(a, b) for a, b in zip(grads, eager))


def test_the_anomaly_mode_hint_is_eagers_too():
    """Under set_detect_anomaly(True), does the message carry torch's other hint?"""

    def run(hooks):
        with torch.autograd.set_detect_anomaly(True), pytest.warns(UserWarning):
            return outcome(activation_modified, hooks)

    eager = run(no_hooks)
    assert "Good luck!" in eager[1]
    assert run(checked("detach")) == eager


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_reading_a_stale_tensor_outside_backward_raises_eagers_error(pair):
    """``grad_fn._saved_result`` / ``_saved_self`` unpack too, with no node running."""

    def program(hooks, mutate):
        x = torch.randn(3, requires_grad=True)
        with hooks():
            a = x * 2
            y = a.exp()  # saves its output y
            z = a.sin()  # saves its input a
        y.add_(1)
        errors = []
        for read in (lambda: y.grad_fn.next_functions[0][0]._saved_result, lambda: z.grad_fn._saved_self):
            try:
                read()
            except RuntimeError as e:
                errors.append(str(e))
        a.add_(1)
        try:
            z.grad_fn._saved_self  # noqa: B018 (read for its effect)
        except RuntimeError as e:
            errors.append(str(e))
        return errors

    ours, eager = outcome(program, checked(pair)), outcome(program, no_hooks)
    assert len(eager[1]) == 2 and ours == eager


def test_torch_and_course_saved_tensors_hooks_both_take_the_pair():
    """Is the pair usable in torch's saved_tensors_hooks as well as ours?"""
    torch_checked = lambda: torch_graph.saved_tensors_hooks(*checked_hooks(_detach, _identity))  # noqa: E731
    assert outcome(activation_modified, torch_checked) == outcome(activation_modified, no_hooks)


# ---------------------------------------------------------------- no false alarm


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_retain_graph_and_backward_twice(pair):
    def program(hooks, mutate):
        x = torch.randn(3, requires_grad=True)
        with hooks():
            y = (x * 2).exp().sin()
        y.sum().backward(retain_graph=True)
        y.sum().backward()
        return (x.grad,)

    assert outcome(program, checked(pair))[0] == "ok"
    assert torch.equal(outcome(program, checked(pair))[1][0], outcome(program, no_hooks)[1][0])


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_parameters_updated_after_backward(pair):
    """An optimizer step after backward, then the next forward: no alarm, eager's gradients."""

    def program(hooks, mutate):
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        grads = []
        for step in range(3):
            with hooks():
                loss = model(torch.full((2, 3), float(step))).sum()
            opt.zero_grad()
            loss.backward()
            grads += [p.grad.clone() for p in model.parameters()]
            opt.step()
        return tuple(grads)

    kind, ours = outcome(program, checked(pair))
    _, eager = outcome(program, no_hooks)
    assert kind == "ok" and all(torch.equal(a, b) for a, b in zip(ours, eager))


def test_views_saved_and_read_unmodified():
    def program(hooks, mutate):
        x = torch.randn(4, 4, requires_grad=True)
        with hooks():
            a = x * 2
            y = (a[1:] * a[:, 1:].t()).sum() + a.t().exp().sum() + a.view(16).cos().sum()
        y.backward()
        return (x.grad,)

    kind, ours = outcome(program, checked("detach"))
    assert kind == "ok" and torch.equal(ours[0], outcome(program, no_hooks)[1][0])


def test_detached_copies_may_be_written():
    def program(hooks, mutate):
        x = torch.randn(3, requires_grad=True)
        with hooks():
            y = x.exp()
        copy = y.detach().clone()
        copy.add_(1)  # another storage and another counter
        y.data.add_(0)  # .data does not share the counter (eager does not see it either)
        y.sum().backward()
        return (x.grad,)

    assert outcome(program, checked("detach"))[0] == "ok"
    assert outcome(program, no_hooks)[0] == "ok"


@pytest.mark.parametrize("G", [torch_graph, course_mutation], ids=["torch", "course"])
def test_allow_mutation_inside_checked_hooks(G):
    """allow_mutation_on_saved_tensors inside our hooks: its hooks are the innermost, no alarm."""

    def program(hooks, mutate):
        x = torch.randn(3, requires_grad=True)
        with hooks(), G.allow_mutation_on_saved_tensors():
            y = x.exp()
            y.add_(1)
            y.sum().backward()
        return (x.grad,)

    kind, ours = outcome(program, checked("detach"))
    _, eager = outcome(program, no_hooks)
    assert kind == "ok" and torch.equal(ours[0], eager[0])


@pytest.mark.parametrize("G", [torch_graph, course_mutation], ids=["torch", "course"])
def test_checked_hooks_inside_allow_mutation_still_catch_what_it_no_longer_clones(G):
    """Our hooks innermost: allow_mutation never sees the save, so it clones nothing, and
    torch's hooks would hand back the written tensor; we raise eager's error instead."""

    def program(hooks, mutate):
        x = torch.randn(3, requires_grad=True)
        with G.allow_mutation_on_saved_tensors():
            with hooks():
                y = x.exp()
            y.add_(1)
            y.sum().backward()
        return (x.grad,)

    kind, wrong = outcome(program, plain_hooks)
    assert kind == "ok" and not torch.allclose(wrong[0], outcome(activation_modified, no_hooks, False)[1][0])
    assert outcome(program, checked("detach")) == outcome(activation_modified, no_hooks)


# ---------------------------------------------------------------- what pack sees, what we hold


def test_what_pack_receives_on_this_torch():
    """Saved input: the tensor itself; saved output: the output, grad_fn set; view: the view."""
    seen = []

    def pack(t):
        seen.append(t)
        return t.detach()

    x = torch.ones(3, requires_grad=True)
    a = x * 2
    with torch_graph.saved_tensors_hooks(pack, _identity):
        y = a.exp()
        v = a[1:]
        z = v * v
    assert seen[0] is y and type(seen[0].grad_fn).__name__ == "ExpBackward0"
    assert seen[1] is v and seen[2] is v and v._base is a
    del z
    seen.clear()
    with torch_graph.saved_tensors_hooks(pack, _identity):
        a.sin()
    assert seen == [a] and seen[0] is a


def test_the_stamp_does_not_keep_the_tensor_alive():
    """A copying pack hook under checked_hooks lets the saved activation go (offloading works)."""
    x = torch.randn(1000, requires_grad=True)
    with course_saved.saved_tensors_hooks(*checked_hooks(_clone, _identity)):
        a = x.exp()
        ref = weakref.ref(a)
        y = a.sin()
    del a
    gc.collect()
    assert ref() is None
    y.sum().backward()  # the dead stamp passes: nobody can write to that tensor any more
    assert torch.allclose(x.grad, x.exp().cos() * x.exp())


def test_a_view_keeps_its_base_visible():
    """The saved view is a temporary; its base, held by the caller, carries the counter."""
    a = torch.ones(4) * 1
    s = stamp(a[1:])
    gc.collect()
    assert s.current_version == 0
    a.add_(1)
    assert s.current_version == 1
    del a
    gc.collect()
    assert s.current_version is None
    s.check()  # nothing alive: nothing to check


def test_stamp_repr_and_fields():
    w = torch.nn.Parameter(torch.ones(2, 3, dtype=torch.float64))
    s = stamp(w)
    assert (
        repr(s) == "VersionStamp(tensor='[torch.DoubleTensor [2, 3]]', grad_fn=None, output_nr=0, version=0)"
    )
    assert isinstance(s, VersionStamp) and s.version == 0 and s.current_version == 0


def test_the_pair_is_named_after_the_hooks():
    pack, unpack = checked_hooks(_detach, _identity)
    assert (pack.__name__, unpack.__name__) == ("checked__detach", "checked__identity")
    assert (
        repr(course_saved.saved_tensors_hooks(pack, unpack))
        == "saved_tensors_hooks(checked__detach, checked__identity)"
    )


# ---------------------------------------------------------------- op sequences

UNARY = {
    "exp": lambda t: t.exp(),  # saves its output
    "sin": lambda t: t.sin(),  # saves its input
    "mul": lambda t: t * t,  # saves its input twice
    "slice": lambda t: t[1:] * 1.5,  # a view, then a view-free op
    "tanh": lambda t: t.tanh(),  # saves its output
}


def op_sequence(ops, write):
    """A chain of ``UNARY`` ops on ``x * 1``; then (unless ``write`` is None) the value at
    index ``write`` (0 is ``x * 1``) is written in place before backward."""

    def program(hooks, mutate):
        x = torch.linspace(-1, 1, 8, requires_grad=True)
        values = [x * 1]
        with hooks():
            for op in ops:
                values.append(UNARY[op](values[-1]))
        if write is not None and write < len(values):
            values[write].mul_(0.5)
        values[-1].sum().backward()
        return (x.grad,)

    return program


OPS = st.lists(st.sampled_from(sorted(UNARY)), min_size=1, max_size=5)
WRITES = st.one_of(st.none(), st.integers(0, 5))


def same_outcome_as_eager(program, hooks):
    """Where eager raises, the same error; where it runs, the same gradients."""
    ours, eager = outcome(program, hooks), outcome(program, no_hooks)
    if eager[0] == "ok":
        # bit for bit, NaN where eager has NaN (a long chain of exp overflows)
        return ours[0] == "ok" and all(
            torch.allclose(a, b, rtol=0, atol=0, equal_nan=True) for a, b in zip(ours[1], eager[1])
        )
    return ours == eager


@given(ops=OPS, write=WRITES, pair=st.sampled_from(sorted(PAIRS)))
@settings(max_examples=60, deadline=None)
def test_op_sequences_raise_exactly_where_eager_does(ops, write, pair):
    """Any chain of ops, any intermediate written in place (or none): eager's outcome?"""
    assert same_outcome_as_eager(op_sequence(ops, write), checked(pair))
