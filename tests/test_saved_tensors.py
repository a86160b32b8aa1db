"""Does course.autograd.saved_tensors behave like torch.autograd.graph's saved-tensor hooks?

Every test runs one program twice, through torch's module and through ours, and compares
what a learner can observe: gradients, which hook ran on which tensor and in what order,
errors (type and message).
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
import torch.autograd.graph as torch_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd.saved_tensors as course_graph
from course import trace

pytestmark = pytest.mark.lesson03

APIS = pytest.mark.parametrize("G", [torch_graph, course_graph], ids=["torch", "course"])


def differential(program):
    """Run ``program(G)`` through torch and course; return both observations."""
    torch.manual_seed(0)
    theirs = program(torch_graph)
    torch.manual_seed(0)
    ours = program(course_graph)
    return theirs, ours


def logging_hooks(log, tag=""):
    """A pack/unpack pair that records (event, tag, shape) and packs a detached tensor."""

    def pack(t):
        log.append(("pack" + tag, tuple(t.shape)))
        return t.detach()

    def unpack(t):
        log.append(("unpack" + tag, tuple(t.shape)))
        return t

    return pack, unpack


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - we compare whatever torch raises
        return type(e), str(e)
    return None


# ---------------------------------------------------------------- saved_tensors_hooks


def test_do_nested_hooks_let_the_innermost_win():
    def program(G):
        log = []
        x = torch.randn(3, requires_grad=True)
        with G.saved_tensors_hooks(*logging_hooks(log, "-outer")):
            y = x.exp()  # saved by the outer pair
            with G.saved_tensors_hooks(*logging_hooks(log, "-inner")):
                z = (y * x).sum()  # saved by the inner pair only
            w = z * y.sum()
        w.backward()
        return log, x.grad

    (log_t, g_t), (log_c, g_c) = differential(program)
    assert log_t == log_c
    assert ("pack-inner", (3,)) in log_c and ("pack-outer", (3,)) in log_c
    torch.testing.assert_close(g_t, g_c)


def test_does_unpack_run_again_on_retain_graph_and_double_backward():
    def program(G):
        log = []
        x = torch.randn(4, requires_grad=True)
        with G.saved_tensors_hooks(*logging_hooks(log)):
            y = (x.sin() * x).sum()
            (g,) = torch.autograd.grad(y, x, create_graph=True)  # saves more, for 2nd order
            g.sum().backward(retain_graph=True)
            g.sum().backward()
        packs = sum(kind == "pack" for kind, _ in log)
        unpacks = sum(kind == "unpack" for kind, _ in log)
        return log, packs, unpacks, x.grad

    (log_t, *rest_t), (log_c, *rest_c) = differential(program)
    assert log_t == log_c  # same events, same order
    assert rest_c[1] > rest_c[0]  # unpack ran more often than pack
    torch.testing.assert_close(rest_t[2], rest_c[2])


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w, grad * x


def test_do_hooks_see_save_for_backward_of_a_custom_function():
    def program(G):
        log = []
        x = torch.randn(2, 3, requires_grad=True)
        w = torch.randn(3, requires_grad=True)
        with G.saved_tensors_hooks(*logging_hooks(log)):
            _Scale.apply(x, w).sum().backward()
        return log, x.grad, w.grad

    (log_t, *g_t), (log_c, *g_c) = differential(program)
    assert log_t == log_c == [("pack", (2, 3)), ("pack", (3,)), ("unpack", (2, 3)), ("unpack", (3,))]
    for a, b in zip(g_t, g_c):
        torch.testing.assert_close(a, b)


def test_do_hooks_see_views_and_inplace_ops_alike():
    def program(G):
        log = []
        x = torch.randn(4, 3, requires_grad=True)
        with G.saved_tensors_hooks(*logging_hooks(log)):
            b = x.clone()
            v = b[1:]  # a view
            v.mul_(v.detach().sign() + 2)  # in place through the view
            y = (b.t() * b.t()).sum() + v.sigmoid_().sum()
        y.backward()
        return log, x.grad

    (log_t, g_t), (log_c, g_c) = differential(program)
    assert log_t == log_c and len(log_c) > 4
    torch.testing.assert_close(g_t, g_c)


@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple),
    ops=st.lists(
        st.sampled_from(["mul", "exp", "sin", "pow", "div", "mul_", "sigmoid_"]), min_size=1, max_size=8
    ),
)
@settings(max_examples=30, deadline=None)
def test_do_random_programs_pack_and_unpack_the_same_way(shape, ops):
    def program(G):
        log = []
        x = torch.randn(shape, requires_grad=True)
        with G.saved_tensors_hooks(*logging_hooks(log)):
            h = x.clone()
            for op in ops:
                if op == "mul":
                    h = h * x
                elif op == "pow":
                    h = h**2
                elif op == "div":
                    h = h / (x.detach().abs() + 1)
                elif op.endswith("_"):
                    h = getattr(h.clone(), op)(*([0.5] if op == "mul_" else []))
                else:
                    h = getattr(h, op)()
            h.sum().backward()
        return log, x.grad

    (log_t, g_t), (log_c, g_c) = differential(program)
    assert log_t == log_c
    torch.testing.assert_close(g_t, g_c, equal_nan=True)


@APIS
def test_does_an_identity_pack_hook_keep_the_graph_alive(G):
    # The output's node saves the output itself (exp saves its result). An identity pack
    # hook stores that tensor on its own node: tensor -> grad_fn -> tensor. The cycle runs
    # through C++, where Python's garbage collector cannot see it: it is never freed.
    def dropped_output_is_freed(pack):
        gc.collect()
        x = torch.randn(3, requires_grad=True)
        with G.saved_tensors_hooks(pack, lambda t: t):
            out = x.exp()
        ref = weakref.ref(out)
        del out
        freed_at_once = ref() is None
        gc.collect()
        return freed_at_once, ref() is None

    gc.disable()
    try:
        assert dropped_output_is_freed(lambda t: t) == (False, False)  # leaked for good
        assert dropped_output_is_freed(lambda t: t.detach()) == (True, True)
    finally:
        gc.enable()


# ---------------------------------------------------------------- bad hooks


def _bad_program(G, pack, unpack, phase=None):
    x = torch.randn(3, requires_grad=True)
    phase = [] if phase is None else phase
    phase.append("forward")
    with G.saved_tensors_hooks(pack, unpack):
        y = (x * x).sum()
    phase.append("backward")
    y.backward()
    return x.grad


def _mutating_pack(t):
    with torch.no_grad():
        t.add_(1)
    return t.detach()


@pytest.mark.parametrize(
    "pack, unpack, expected_type, expected_phase",
    [
        (_mutating_pack, lambda t: t, RuntimeError, "forward"),
        (lambda t: t.detach(), lambda t: 3, TypeError, "backward"),
        (lambda t: t.detach(), lambda t: None, TypeError, "backward"),
        (lambda t: t.detach(), lambda t: t[:2], RuntimeError, "backward"),
    ],
    ids=["pack-mutates-input", "unpack-returns-int", "unpack-returns-None", "unpack-bad-shape"],
)
def test_do_bad_hooks_raise_what_torch_raises(pack, unpack, expected_type, expected_phase):
    def program(G):
        phase = []
        return error_of(lambda: _bad_program(G, pack, unpack, phase)), phase[-1]

    theirs, ours = differential(program)
    assert theirs == ours
    assert ours[0][0] is expected_type and ours[1] == expected_phase


def test_is_a_wrong_dtype_or_broadcastable_shape_from_unpack_silently_accepted():
    # torch checks neither: a float64 result is cast back; a (3, 1) result broadcasts and
    # is summed down to x's shape, so the gradient is silently wrong.
    def program(G, unpack):
        return _bad_program(G, lambda t: t.detach(), unpack)

    for unpack in (lambda t: t.double(), lambda t: t.reshape(3, 1)):
        theirs, ours = differential(lambda G: program(G, unpack))  # noqa: B023 (called in this iteration)
        assert ours.dtype == theirs.dtype == torch.float32
        torch.testing.assert_close(theirs, ours)
    torch.manual_seed(0)
    right = _bad_program(course_graph, lambda t: t.detach(), lambda t: t)
    torch.manual_seed(0)
    wrong = _bad_program(course_graph, lambda t: t.detach(), lambda t: t.reshape(3, 1))
    assert not torch.allclose(right, wrong)


# ---------------------------------------------------------------- disable_saved_tensors_hooks


def _hook_state():
    return (
        torch._C._autograd._saved_tensors_hooks_is_enabled(),
        torch._C._autograd._saved_tensors_hooks_get_disabled_error_message(),
    )


def test_does_disable_nest_and_restore_the_previous_message_after_an_exception():
    def program(G):
        seen = [_hook_state()]
        with G.disable_saved_tensors_hooks("outer"):
            seen.append(_hook_state())
            with pytest.raises(ZeroDivisionError):
                with G.disable_saved_tensors_hooks("inner"):
                    seen.append(_hook_state())
                    seen.append(error_of(lambda: G.saved_tensors_hooks(id, id).__enter__()))
                    1 / 0  # noqa: B018 (read for its effect)
            seen.append(_hook_state())  # back to "outer", despite the exception
            seen.append(error_of(lambda: G.save_on_cpu().__enter__()))
        seen.append(_hook_state())
        return seen

    theirs, ours = differential(program)
    assert theirs == ours
    assert ours == [
        (True, None),
        (False, "outer"),
        (False, "inner"),
        (RuntimeError, "inner"),
        (False, "outer"),
        (RuntimeError, "outer"),
        (True, None),
    ]


def test_does_disable_refuse_while_hooks_are_pushed():
    # torch's C++ refuses to disable with hooks on the stack, raising the new message,
    # and the finally block leaves the feature enabled with the hooks still working.
    def program(G):
        log = []
        x = torch.randn(2, requires_grad=True)
        with G.saved_tensors_hooks(*logging_hooks(log)):
            with pytest.raises(RuntimeError) as info:
                with G.disable_saved_tensors_hooks("off"):
                    pass
            state = _hook_state()
            (x * x).sum().backward()
        return type(info.value), str(info.value), state, log

    theirs, ours = differential(program)
    assert theirs == ours
    assert ours[:3] == (RuntimeError, "off", (True, None))
    assert ours[3] == [("pack", (2,)), ("pack", (2,)), ("unpack", (2,)), ("unpack", (2,))]


# ---------------------------------------------------------------- save_on_cpu


@pytest.mark.parametrize("pin_memory", [False, True])
def test_does_save_on_cpu_give_torchs_gradients_on_cpu(pin_memory):
    def program(G):
        x = torch.randn(3, 4, requires_grad=True)
        w = torch.randn(4, 2, requires_grad=True)
        with G.save_on_cpu(pin_memory=pin_memory, device_type="cuda"):
            y = torch.tanh(x @ w).pow(2).sum()
        y.backward()
        return x.grad, w.grad

    theirs, ours = differential(program)
    for a, b in zip(theirs, ours):
        torch.testing.assert_close(a, b)


def test_does_save_on_cpu_avoid_copies_on_cpu():
    # pack_to_cpu(t) returns (device, t.cpu()), and t.cpu() is t itself on the CPU.
    hooks = course_graph.save_on_cpu()
    x = torch.randn(3)
    device, packed = hooks.pack_hook(x)
    assert device == x.device and packed is x
    assert hooks.unpack_hook((device, packed)) is x
    assert repr(hooks) == "save_on_cpu(pack_to_cpu, unpack_from_cpu)"


# ---------------------------------------------------------------- course.trace


def test_are_raw_hooks_pushed_when_tracing_is_off(monkeypatch):
    pushed = []
    real = torch._C._autograd._push_saved_tensors_default_hooks
    monkeypatch.setattr(
        torch._C._autograd,
        "_push_saved_tensors_default_hooks",
        lambda p, u: (pushed.append((p, u)), real(p, u)),
    )
    pack, unpack = logging_hooks([])
    with course_graph.saved_tensors_hooks(pack, unpack):
        pass
    with trace.record():
        with course_graph.saved_tensors_hooks(pack, unpack):
            pass
    assert pushed[0] == (pack, unpack)  # off: zero cost, the user's own functions
    assert pushed[1][0] is not pack and pushed[1][1] is not unpack  # on: wrapped


def test_does_the_trace_show_each_pack_and_unpack_in_torchs_order():
    def program(G, log):
        a = torch.ones(2, 1, requires_grad=True)
        b = torch.ones(3, requires_grad=True) * 2
        with G.saved_tensors_hooks(*logging_hooks(log)):
            y = a * b
        y.sum().backward()
        return a, b

    torch_log, log = [], []
    program(torch_graph, torch_log)
    with trace.record() as events:
        program(course_graph, log)
    assert log == torch_log  # tracing changes nothing the hooks see
    # MulBackward0 saves other (b) before self (a), so b is t0; unpacked tensors get
    # names of their own, and saved= links each one to its pack.
    assert events.lines() == [
        "pack pack t0 (3,)",
        "pack pack t1 (2, 1)",
        "unpack MulBackward0 t2 (3,) saved=t0",
        "unpack MulBackward0 t3 (2, 1) saved=t1",
    ]
    assert [(e.kind, e.shape) for e in events] == torch_log


# ---------------------------------------------------------------- docs


def test_does_the_facade_export_these_objects():
    from course import autograd_graph

    for name in course_graph.__all__:
        assert getattr(autograd_graph, name) is getattr(course_graph, name)
