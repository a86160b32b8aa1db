"""Does course.autograd.mutation.allow_mutation_on_saved_tensors behave like torch's, and is it right
where torch is wrong?

Each program runs through torch.autograd.graph and through course.autograd.mutation; we compare
gradients, which saved tensors were cloned (by save order), and errors. The oracle for
"right" is the same program without the context, where every mutation first copies the
tensor (``b = b.clone()``), so no saved tensor is ever overwritten.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import weakref
from pathlib import Path

import pytest
import torch
import torch.autograd.graph as torch_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd.mutation as course_graph
from course import trace
from course.autograd import overlap

pytestmark = pytest.mark.lesson05

ROOT = Path(__file__).resolve().parents[1]


class Observer:
    """Numbers the context's handles in save order and reports which ones were cloned.

    Works on torch's context and ours alike (same attribute names); holds only weakrefs,
    so it changes no lifetime.
    """

    def __init__(self, ctx):
        self.ctx, self.order = ctx, []

    def look(self):
        known = {id(r()) for r in self.order if r() is not None}
        for h in list(self.ctx.original.keys()) + list(self.ctx.cloned.keys()):
            if id(h) not in known:
                self.order.append(weakref.ref(h))
                known.add(id(h))

    def cloned(self):
        self.look()
        live = [r() for r in self.order]
        return sorted(i for i, h in enumerate(live) if h is not None and h in self.ctx.cloned)


def run(G, program, *args, shape=(3, 4)):
    """Run ``program(obs, *args)`` inside G's context; return (grad, cloned indices)."""
    torch.manual_seed(0)
    a = torch.randn(shape, requires_grad=True)
    with G.allow_mutation_on_saved_tensors() as ctx:
        obs = Observer(ctx)
        out = program(a, obs, *args)
        cloned = obs.cloned()
        out.backward()
    return a.grad, cloned


def oracle(program, *args, shape=(3, 4)):
    """The same program, no context, every mutation on a fresh copy."""
    torch.manual_seed(0)
    a = torch.randn(shape, requires_grad=True)
    program(a, None, *args).backward()
    return a.grad


def fresh(b, obs):
    """Inside the context: mutate b itself. In the oracle: mutate a copy."""
    return b if obs is not None else b.clone()


def watch(obs):
    if obs is not None:
        obs.look()


# ---------------------------------------------------------------- programs torch gets right


def p_whole(a, obs):
    b = a.clone()
    out = (b**2).sum()
    watch(obs)
    b = fresh(b, obs)
    b.sin_()
    return out + b.sum()


def p_view_at_offset_zero(a, obs):
    b = a.clone()
    out = (b * b).sum() + b[0].exp().sum()  # b saved twice, b[0] saved by exp (its result)
    watch(obs)
    b = fresh(b, obs)
    b[0].mul_(2)  # same first element as b: torch finds it
    return out + b.sum()


def p_out(a, obs):
    w = a.detach() * 0.5 + 1  # needs no grad, but a * w saves it (for a's grad)
    out = (a * w).sum()
    watch(obs)
    w = fresh(w, obs)
    torch.mul(a.detach(), 2, out=w)  # out= cannot write a tensor that requires grad
    return out + (a * w).sum()


def p_foreach(a, obs):
    b, c = a.clone(), a.clone() * 2
    out = (b**2).sum() + (c**2).sum() + (b * c).sum()
    watch(obs)
    b, c = fresh(b, obs), fresh(c, obs)
    torch._foreach_mul_([b, c], 3.0)
    return out + (b + c).sum()


def p_untouched_sibling(a, obs):
    b = a.clone()
    out = (b[0] * b[0]).sum()  # saves the view b[0]
    watch(obs)
    b = fresh(b, obs)
    b[2].mul_(5)  # other bytes: nothing needs cloning
    return out + b.sum()


@pytest.mark.parametrize("program", [p_whole, p_view_at_offset_zero, p_out, p_foreach, p_untouched_sibling])
def test_do_we_clone_what_torch_clones_and_get_its_gradients(program):
    g_t, cloned_t = run(torch_graph, program)
    g_c, cloned_c = run(course_graph, program)
    torch.testing.assert_close(g_c, g_t)
    torch.testing.assert_close(g_c, oracle(program))
    assert cloned_c == cloned_t


def test_do_retain_graph_and_mutation_after_backward_behave_like_torch():
    def program(G):
        torch.manual_seed(0)
        a = torch.randn(2, 3, requires_grad=True)
        with G.allow_mutation_on_saved_tensors() as ctx:
            obs = Observer(ctx)
            b = a.clone()
            out = (b**2).sum()
            b.mul_(2)  # clones the saved b
            out.backward(retain_graph=True)
            cloned = obs.cloned()
            out.backward()  # the clone is read again; then the graph and handle h0 die
            b.sin_()  # nothing left to clone; sin_ saves b's old value as a new handle
            after = len(ctx.cloned), len(ctx.original)
        return a.grad, cloned, after

    (g_t, *rest_t), (g_c, *rest_c) = program(torch_graph), program(course_graph)
    torch.testing.assert_close(g_c, g_t)
    assert rest_c == rest_t == [[0], (0, 1)]


# ---------------------------------------------------------------- where torch is wrong


def p_offset_view(a, obs):  # the program from the lesson: a = randn(3, 4)
    b = a.clone()
    out = (b**2).sum()
    b = fresh(b, obs)
    b[1].mul_(3)
    return out


def p_saved_offset_view_base_mutated(a, obs):
    b = a.clone()
    out = (b[1:] ** 2).sum()  # saves a view that starts at row 1
    b = fresh(b, obs)
    b.mul_(3)
    return out


def p_version_drift(a, obs):
    b = a.clone()
    out = (b[0] ** 2).sum()  # saves b[0] at version v
    b = fresh(b, obs)
    b[1].mul_(2)  # other bytes: rightly no clone, but the shared version is now v + 1
    b[0].mul_(3)  # the saved bytes; torch looks for (data_ptr, v + 1) and misses b[0]
    return out


@pytest.mark.parametrize("program", [p_offset_view, p_saved_offset_view_base_mutated, p_version_drift])
def test_are_offset_views_right_in_course_and_wrong_in_torch(program):
    right = oracle(program)
    g_c, cloned_c = run(course_graph, program)
    torch.testing.assert_close(g_c, right)
    assert cloned_c == [0]
    # torch misses the alias (different data_ptr): it clones nothing and reads the
    # mutated values. If this starts failing, torch fixed it: update the lesson.
    g_t, cloned_t = run(torch_graph, program)
    assert cloned_t == []
    assert not torch.allclose(g_t, right)


def test_is_torchs_row_exactly_three_times_too_large():
    g_t, _ = run(torch_graph, p_offset_view)
    ratio = g_t / oracle(p_offset_view)
    torch.testing.assert_close(ratio, torch.tensor([[1.0] * 4, [3.0] * 4, [1.0] * 4]))


def test_do_multi_output_out_ops_work_in_course_and_break_torch():
    def program(G):
        x = torch.randn(4, 3, requires_grad=True)
        with G.allow_mutation_on_saved_tensors():
            b = x.clone()
            out = (b**2).sum()
            values, indices = torch.empty(3), torch.empty(3, dtype=torch.long)
            torch.max(b.detach(), 0, out=(values, indices))
            out.backward()
        return x, values, indices

    with pytest.raises(KeyError, match="out"):
        program(torch_graph)
    x, values, indices = program(course_graph)
    expected = torch.max(x.detach(), 0)
    assert torch.equal(values, expected.values) and torch.equal(indices, expected.indices)
    torch.testing.assert_close(x.grad, 2 * x.detach())


# ---------------------------------------------------------------- errors


def test_does_backward_outside_the_context_raise_torchs_error():
    messages = []
    for G in (torch_graph, course_graph):
        a = torch.randn(3, requires_grad=True)
        with G.allow_mutation_on_saved_tensors():
            out = (a.clone() ** 2).sum()
        with pytest.raises(AssertionError, match="outside of the 'allow_mutation") as info:
            out.backward()
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_does_nesting_raise_torchs_error_and_leave_the_outer_context_working():
    messages = []
    for G in (torch_graph, course_graph):
        a = torch.randn(3, requires_grad=True)
        with G.allow_mutation_on_saved_tensors():
            out = (a.clone() ** 2).sum()
            with pytest.raises(RuntimeError) as info:
                with G.allow_mutation_on_saved_tensors():
                    pass
            messages.append(str(info.value))
            if G is torch_graph:
                # torch's failed entry resets its global flag and breaks the outer context
                with pytest.raises(AssertionError, match="outside of the"):
                    out.backward()
            else:
                out.backward()  # ours keeps working
                torch.testing.assert_close(a.grad, 2 * a.detach())
    assert messages == ["allow_mutation_on_saved_tensors contexts cannot be nested"] * 2


# ---------------------------------------------------------------- random programs

VIEWS = {
    "all": lambda b: b,
    "row0": lambda b: b[0],
    "row1": lambda b: b[1],  # offset view
    "cols": lambda b: b[:, 1:],  # offset, strided
    "col0": lambda b: b[:, 0],  # offset 0, strided
    "col2": lambda b: b[:, 2],  # offset, interleaved with col0
    "t": lambda b: b.t(),
    "even": lambda b: b[::2],
}
OFFSET_VIEWS = {"row1", "cols", "col2"}
STEP = st.tuples(
    st.sampled_from(["save_pow", "save_mul", "save_exp", "mul_", "sin_", "add_"]),
    st.sampled_from(sorted(VIEWS)),
)


def p_random(a, obs, steps):
    b = a.clone()
    out = a.sum() * 0
    for kind, view in steps:
        if kind.startswith("save"):
            v = VIEWS[view](b)
            if kind == "save_pow":
                out = out + (v**2).sum()
            elif kind == "save_mul":
                out = out + (v * b[2, 3]).sum()
            else:
                out = out + v.exp().sum()
        else:
            watch(obs)
            b = fresh(b, obs)
            v = VIEWS[view](b)
            {"mul_": lambda: v.mul_(1.5), "sin_": v.sin_, "add_": lambda: v.add_(1.0)}[kind]()  # noqa: B023 (called in this iteration)
    return out + (b * b).sum()


@given(
    steps=st.lists(STEP, min_size=1, max_size=8),
    shape=st.tuples(st.integers(3, 5), st.integers(4, 6)),  # room for b[2, 3] and b[:, 2]
)
@settings(max_examples=40, deadline=None)
def test_do_random_mutation_programs_match_the_unmutated_oracle(steps, shape):
    right = oracle(p_random, steps, shape=shape)
    g_c, cloned_c = run(course_graph, p_random, steps, shape=shape)
    torch.testing.assert_close(g_c, right)
    g_t, cloned_t = run(torch_graph, p_random, steps, shape=shape)
    assert set(cloned_t) <= set(cloned_c)  # we clone all torch clones, maybe more
    # save_mul also saves b[2, 3], a view at an offset
    if not any(view in OFFSET_VIEWS or kind == "save_mul" for kind, view in steps):
        # no offset view anywhere: torch is right, and we behave exactly as it does
        assert cloned_c == cloned_t
        torch.testing.assert_close(g_t, right)
    elif not torch.allclose(g_t, right):
        assert cloned_t != cloned_c  # torch was wrong because it missed a clone


# ---------------------------------------------------------------- lessons: repr, trace, docs


def test_is_the_context_repr_deterministic():
    a = torch.ones(2, 3, requires_grad=True)
    with course_graph.allow_mutation_on_saved_tensors() as ctx:
        empty = repr(ctx)
        b = a.clone()
        out = (b**2).sum() + b[1].exp().sum()
        before = repr(ctx)
        b[1].mul_(2)
        after = repr(ctx)
        out.backward()
    assert empty == "_AllowMutationOnSavedContext(saved=0)"
    assert before == (
        "_AllowMutationOnSavedContext(saved=2)\n"
        "  h0: saved at version 0, original f32[2, 3]\n"
        "  h1: saved at version 0, original f32[3]"
    )
    assert after == (
        "_AllowMutationOnSavedContext(saved=2)\n"
        "  h0: saved at version 0, cloned f32[2, 3]\n"
        "  h1: saved at version 0, original f32[3]"
    )
    assert repr(ctx) == empty  # cleared on exit


def test_does_the_trace_show_each_clone():
    a = torch.ones(2, 3, requires_grad=True)
    with trace.record() as events:
        with course_graph.allow_mutation_on_saved_tensors():
            b = a.clone()
            out = (b**2).sum()
            b[1].mul_(2)
            out.backward()
    # b is t0 when packed; the write to b[1] (t1) clones it into t2; backward reads t2 via h0.
    assert events.lines() == [
        "pack pack_hook t0 (2, 3)",
        "clone aten.mul_.Tensor t0 (2, 3) clone=t2 handle=h0 mutated=t1 version=0",
        "unpack PowBackward0 t2 (2, 3) handle=h0 saved=t0",
    ]


def _lesson_program(G, record: bool):
    """Lesson 5's stepper program: b saved at versions 0 and 1, each version cloned once."""
    a = torch.ones(2, 3, requires_grad=True)
    with contextlib.ExitStack() as stack:
        events = stack.enter_context(trace.record()) if record else None
        ctx = stack.enter_context(G.allow_mutation_on_saved_tensors())
        b = a.clone()
        y = b.sin()  # h0: b at version 0
        b.mul_(2)  # clones h0
        z = (b * b).sum()  # h1: b at version 1, saved twice
        b[0].add_(1)  # clones h1
        states = repr(ctx)
        (y.sum() + z).backward()
    return a.grad, events, states


def test_does_each_clone_event_name_its_clone_handle_and_version():
    _, events, _ = _lesson_program(course_graph, record=True)
    clones = [e for e in events if e.kind == "clone"]
    details = [dict(e.detail) for e in clones]
    assert [e.tensor for e in clones] == ["t0", "t0"]  # b, one tensor at two versions
    assert [(d["handle"], d["version"], d["clone"]) for d in details] == [
        ("h0", 0, "t1"),
        ("h1", 1, "t3"),
    ]
    assert [d["mutated"] for d in details] == ["t0", "t2"]  # b, then the view b[0]


def test_does_each_unpack_name_the_handle_whose_clone_it_read():
    _, events, _ = _lesson_program(course_graph, record=True)
    clone_of = {dict(e.detail)["handle"]: dict(e.detail)["clone"] for e in events if e.kind == "clone"}
    read = [(e.name, dict(e.detail)["handle"], e.tensor) for e in events if e.kind == "unpack"]
    assert sorted(read) == [
        ("MulBackward0", "h1", clone_of["h1"]),  # b * b reads its one handle twice
        ("MulBackward0", "h1", clone_of["h1"]),
        ("SinBackward0", "h0", clone_of["h0"]),
    ]
    assert all(dict(e.detail)["saved"] == "t0" for e in events if e.kind == "unpack")


def test_does_the_repr_name_versions_and_clones():
    _, _, traced = _lesson_program(course_graph, record=True)
    _, _, plain = _lesson_program(course_graph, record=False)
    assert traced == (
        "_AllowMutationOnSavedContext(saved=2)\n"
        "  h0: t0 saved at version 0, cloned (t1) f32[2, 3]\n"
        "  h1: t0 saved at version 1, cloned (t3) f32[2, 3]"
    )
    assert plain == (
        "_AllowMutationOnSavedContext(saved=2)\n"
        "  h0: saved at version 0, cloned f32[2, 3]\n"
        "  h1: saved at version 1, cloned f32[2, 3]"
    )
    assert "0x" not in traced + plain


def test_does_naming_the_clones_leave_the_gradient_as_torchs():
    theirs, _, _ = _lesson_program(torch_graph, record=False)
    for record in (False, True):
        ours, _, _ = _lesson_program(course_graph, record=record)
        torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(theirs, torch.ones(2, 3).cos() + 8)  # sin(a) + (2a)^2


def test_does_a_handle_hold_no_tensor():
    with trace.record(), course_graph.allow_mutation_on_saved_tensors() as ctx:
        b = torch.ones(3, requires_grad=True).clone()
        out = b.sin()
        b.mul_(2)
        (handle,) = ctx.cloned.keys()
        assert not any(isinstance(v, torch.Tensor) for v in vars(handle).values())
        del out, handle  # the graph let go of the handle: its clone and entry go with it
        assert len(ctx.cloned) == len(ctx.tid_to_weakhandle) == 0


def test_is_the_schema_scan_cached_per_op():
    course_graph.mutable_args.cache_clear()
    x = torch.ones(3)
    with course_graph.allow_mutation_on_saved_tensors():
        for _ in range(3):
            x.mul_(2)
            x = x + x
    info = course_graph.mutable_args.cache_info()
    assert (info.misses, info.currsize, info.hits) == (2, 2, 4)  # mul_ and add scanned once each
    assert course_graph.mutable_args(torch.ops.aten.mul_.Tensor)[1] == ((0, "self", False),)
    assert course_graph.mutable_args(torch.ops.aten.add.Tensor)[1] == ()


def test_does_overlap_tell_views_apart():
    b = torch.zeros(4, 6)
    ov = overlap.overlaps
    assert ov(b, b[1]) and ov(b[1], b[:, 2]) and ov(b[1:3], b[2])
    assert not ov(b[0], b[1]) and not ov(b[:, 0], b[:, 1]) and not ov(b[::2], b[1])
    assert ov(b[:, ::2], b[:, 2]) and not ov(b[:, ::2], b[:, 1::2])
    assert ov(b.t()[1:], b[:, 3]) and not ov(b.t()[1:], b[:, 0])
    expanded = b[1, :1].expand(3, 4)  # stride 0: one element, many times
    assert ov(expanded, b[1, 0]) and not ov(expanded, b[1, 1:])
    halves = b.view(torch.int16)  # two int16 per float32: bytes, not elements, decide
    assert ov(halves[0, 1], b[0, 0]) and not ov(halves[0, 2], b[0, 0])
    assert overlap.offsets(b[1:, ::2]).tolist() == [6, 8, 10, 12, 14, 16, 18, 20, 22]


# One storage of 1024 bytes; every view fits in it whatever its dtype.
STORAGE_BYTES = 1024
DTYPES = [torch.uint8, torch.int16, torch.float32, torch.float64]


@st.composite
def strided_views(draw, storage):
    """Any strided view of ``storage``: sizes 1-5, strides 0-9 (overlapping itself or not)."""
    dtype = draw(st.sampled_from(DTYPES))
    ndim = draw(st.integers(1, 3))
    size = draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim))
    stride = draw(st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim))
    span = sum((n - 1) * s for n, s in zip(size, stride)) + 1  # in elements
    capacity = STORAGE_BYTES // torch.empty(0, dtype=dtype).element_size()
    offset = draw(st.integers(0, capacity - span))
    return torch.empty(0, dtype=dtype).set_(storage, offset, size, stride)


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_does_the_stride_test_agree_with_listing_every_offset(data):
    storage = torch.zeros(STORAGE_BYTES, dtype=torch.uint8).untyped_storage()
    a, b = data.draw(strided_views(storage)), data.draw(strided_views(storage))
    listed = overlap.overlaps_elementwise(a, b)
    assert listed == overlap.overlaps_elementwise(b, a)  # the reference is symmetric
    assert overlap.overlaps(a, b) == listed
    decided = overlap.lattice_overlap(a, b)
    assert decided in (None, listed)  # when the cheap test answers, it is right
    assert overlap.lattice_overlap(a, b, budget=10**6) == listed  # and it can always


VIEW_OPS = st.sampled_from(
    ["slice", "step", "select", "transpose", "diagonal", "unfold", "expand", "narrow_last"]
)


def apply_view(t, op, k):
    """One view op on ``t``; ``k`` (any int) picks the dim / start / step. Never copies."""
    dim = k % t.dim()
    n = t.shape[dim]
    if op == "slice":
        return t.narrow(dim, k % n, n - k % n)
    if op == "step":
        return t[(slice(None),) * dim + (slice(k % 2, None, 2 + k % 2),)] if n > 1 else t
    if op == "select" and t.dim() > 1:
        return t.select(dim, k % n)
    if op == "transpose" and t.dim() > 1:
        return t.transpose(dim, (dim + 1) % t.dim())
    if op == "diagonal" and t.dim() > 1:
        return t.diagonal(k % 3 - 1, dim, (dim + 1) % t.dim())
    if op == "unfold":
        return t.unfold(dim, 1 + k % n, 1 + k % 2)  # windows that overlap each other
    if op == "expand":
        return t.unsqueeze(0).expand(2, *t.shape)
    if op == "narrow_last" and t.shape[-1] > 1:
        return t[..., 1:]
    return t


@st.composite
def made_views(draw, base):
    view = base
    for op, k in draw(st.lists(st.tuples(VIEW_OPS, st.integers(0, 7)), max_size=3)):
        nxt = apply_view(view, op, k)
        view = nxt if nxt.numel() else view
    return view


@given(data=st.data(), shape=st.sampled_from([(6, 8), (4, 5, 6), (64,)]))
@settings(max_examples=200, deadline=None)
def test_does_the_stride_test_decide_every_view_that_view_ops_make(data, shape):
    base = torch.zeros(shape)
    a, b = data.draw(made_views(base)), data.draw(made_views(base))
    assert a.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()  # no copies
    decided = overlap.lattice_overlap(a, b)
    assert decided is not None and decided == overlap.overlaps_elementwise(a, b)


def test_do_large_views_never_list_their_offsets(monkeypatch):
    """The workloads of issue 15: answered from strides, without one offset per element."""

    def listing(a, b):
        raise AssertionError(f"listed {a.numel() + b.numel()} offsets")

    monkeypatch.setattr(overlap, "overlaps_elementwise", listing)
    w, x = torch.zeros(2048, 2048), torch.zeros(1024, 1024)
    ov = overlap.overlaps
    assert ov(w.t(), w)  # addmm saved weight.t(); weight.mul_(0.999) writes all of it
    assert not ov(x[:, ::2], x[:, 1::2]) and ov(x[:, ::2], x[:, 2:3])
    assert ov(w.diagonal(), w[:, 7]) and not ov(w.diagonal(), w[1:, 0])
    assert not ov(w.diagonal(), w[1::2, ::2])  # the slowest layout we know: still decided


def test_does_an_undecided_large_pair_clone_rather_than_list(monkeypatch):
    monkeypatch.setattr(overlap, "lattice_overlap", lambda a, b: None)
    monkeypatch.setattr(overlap, "_SMALL", 4)  # the pair has 8 elements
    x = torch.zeros(4, 6)
    assert overlap.overlaps(x[:, 0], x[:, 1])  # a spare clone, never a missed one
    monkeypatch.setattr(overlap, "_SMALL", 1 << 16)
    assert not overlap.overlaps(x[:, 0], x[:, 1])  # small: the element test decides


@pytest.mark.slow
def test_does_the_benchmark_still_run():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "autograd_graph.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "allow_mutation_on_saved_tensors" in done.stdout
    # the large workloads: course's gradients equal the unmutated program's ("course right")
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines() if line.strip()}
    assert [rows[w][-1] for w in ("linear2048", "odd_columns", "encoder512")] == ["yes"] * 3


def test_does_the_facade_export_it():
    from course import autograd_graph

    assert autograd_graph.allow_mutation_on_saved_tensors is (course_graph.allow_mutation_on_saved_tensors)


def test_a_trace_recording_keeps_no_handle_or_clone_alive():
    """Recording a trace must not change what the context holds after backward frees the graph."""

    def cloned_after_backward(record: bool) -> int:
        with contextlib.ExitStack() as stack:
            if record:
                stack.enter_context(trace.record())
            ctx = stack.enter_context(course_graph.allow_mutation_on_saved_tensors())
            a = torch.ones(2, 3, requires_grad=True)
            b = a.clone()
            y = b.sin()
            b.mul_(2)
            y.sum().backward()
            return len(ctx.cloned)

    assert cloned_after_backward(record=True) == cloned_after_backward(record=False) == 0


def test_do_the_mutation_frames_say_which_clone_an_unpack_read():
    from course.show.frames import mutation_frames

    _, events, _ = _lesson_program(course_graph, record=True)
    frames = mutation_frames(events)
    assert '"clone of t0" (t1, for h0)' in frames[2].description  # pack, then the clone
    said = [f.description for f in frames if f.title.split(": ", 1)[1].startswith("unpack")]
    gave = "backward asked for t0, saved as {}; the unpack hook gave back its clone {}."
    assert said == [gave.format("h1", "t3")] * 2 + [gave.format("h0", "t1")]
