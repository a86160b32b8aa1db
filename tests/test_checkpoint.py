"""Does course.checkpoint recompute, save, differentiate and fail as torch.utils.checkpoint does?

Torch is the oracle: every program runs twice, once through
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` and once through
``course.checkpoint.checkpoint``, from the same seed, and we compare what can be observed:

- outputs and gradients (exactly: same ops, same order, same RNG);
- how many times each aten op runs in the forward and in the backward (a counting
  ``TorchDispatchMode`` under everything, so a cached op that does not run is not counted);
- what reaches an outer pair of saved-tensor hooks (packs and unpacks: the checkpoint hides
  what it recomputes, and shows its inputs);
- errors: the type, and the facts the message carries (counts, positions, metadata); our
  messages are in our own words.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from unittest import mock

import pytest
import torch
import torch.utils.checkpoint as torch_ckpt
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import course.checkpoint as course_ckpt

LIBS = {"torch": torch_ckpt, "course": course_ckpt}
P = torch_ckpt.CheckpointPolicy


class OpCounter(TorchDispatchMode):
    """Counts every aten op that runs, apart for the forward and for the backward."""

    def __init__(self) -> None:
        super().__init__()
        self.forward: Counter[str] = Counter()
        self.backward: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        in_backward = torch._C._current_graph_task_id() != -1
        (self.backward if in_backward else self.forward)[str(func)] += 1
        return func(*args, **(kwargs or {}))


@dataclass
class Seen:
    """What one run of a program showed."""

    outputs: list = field(default_factory=list)
    grads: list = field(default_factory=list)
    forward_ops: Counter = field(default_factory=Counter)
    backward_ops: Counter = field(default_factory=Counter)
    packs: int = 0
    unpacks: int = 0
    error: tuple | None = None


def observe(lib, program, make_inputs, backward=lambda out: out.sum().backward(), seed=0) -> Seen:
    """Run ``program(lib, *inputs)`` then ``backward(out)`` under the counters; all it showed."""
    torch.manual_seed(seed)
    inputs = make_inputs()
    seen = Seen()

    def pack(t):
        seen.packs += 1
        return t

    def unpack(t):
        seen.unpacks += 1
        return t

    counter = OpCounter()
    try:
        with counter, torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            torch.manual_seed(seed + 1)
            out = program(lib, *inputs)
            backward(out)
    except Exception as e:  # noqa: BLE001 - the error is what we compare
        seen.error = (type(e), str(e))
    else:
        outs = out if isinstance(out, (tuple, list)) else [out]
        seen.outputs = [o.detach() if isinstance(o, torch.Tensor) else o for o in outs]
    seen.grads = [t.grad for t in _leaves(inputs)]
    seen.forward_ops, seen.backward_ops = counter.forward, counter.backward
    return seen


def _leaves(inputs):
    for t in inputs:
        if isinstance(t, torch.nn.Module):
            yield from t.parameters()
        elif isinstance(t, torch.Tensor) and t.requires_grad:
            yield t


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit, NaN where torch has NaN (a chain of exp overflows)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)


def assert_same(theirs: Seen, ours: Seen) -> None:
    assert (ours.error is None) == (theirs.error is None), (theirs.error, ours.error)
    if theirs.error is not None:
        assert ours.error[0] is theirs.error[0]
    assert len(ours.outputs) == len(theirs.outputs)
    for a, b in zip(theirs.outputs, ours.outputs):
        assert bits_equal(a, b) if isinstance(a, torch.Tensor) else a == b
    for a, b in zip(theirs.grads, ours.grads, strict=True):
        assert (a is None and b is None) or bits_equal(a, b)
    assert ours.forward_ops == theirs.forward_ops
    assert ours.backward_ops == theirs.backward_ops
    assert (ours.packs, ours.unpacks) == (theirs.packs, theirs.unpacks)


def both(program, make_inputs, **kw) -> tuple[Seen, Seen]:
    theirs, ours = (observe(LIBS[name], program, make_inputs, **kw) for name in ("torch", "course"))
    assert_same(theirs, ours)
    return theirs, ours


# ---- the programs -------------------------------------------------------------------------


def mlp_inputs():
    net = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8), torch.nn.Tanh()
    )
    return net, torch.randn(4, 8, requires_grad=True)


def checkpointed_mlp(lib, net, x, **kw):
    return lib.checkpoint(net, x, use_reentrant=False, **kw)


def block_inputs():
    block = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.25, batch_first=True)
    return block, torch.randn(2, 5, 16, requires_grad=True)


def test_an_mlp_recomputes_like_torch():
    """MLP: same output, gradients, op counts per phase, packs and unpacks?"""
    theirs, ours = both(checkpointed_mlp, mlp_inputs)
    assert theirs.backward_ops["aten.addmm.default"] == 2  # the forward ran again in backward
    assert theirs.packs == 1  # the outer hooks see only the checkpoint's input


def test_a_transformer_block_with_dropout_gets_the_same_mask_and_gradients():
    """Dropout in a block: the recomputation draws the forward's mask (RNG stashed), like torch?"""
    theirs, ours = both(checkpointed_mlp, block_inputs)
    plain = observe(None, lambda _, block, x: block(x), block_inputs)
    for a, b in zip(plain.grads, ours.grads, strict=True):
        torch.testing.assert_close(a, b)  # the gradients of the un-checkpointed block


def test_without_preserved_rng_the_mask_differs_as_in_torch():
    """preserve_rng_state=False: a fresh mask in the recomputation, in both?"""
    theirs, ours = both(functools.partial(checkpointed_mlp, preserve_rng_state=False), block_inputs)
    plain = observe(None, lambda _, block, x: block(x), block_inputs)
    assert not all(torch.allclose(a, b) for a, b in zip(plain.grads, ours.grads))


def nested(lib, x):
    def inner(t):
        return t.sin().exp()

    def outer(t):
        return lib.checkpoint(inner, t.cos(), use_reentrant=False) * t

    return lib.checkpoint(outer, x, use_reentrant=False)


def test_nested_checkpoints_recompute_like_torch():
    """A checkpoint inside a checkpoint: same recomputations, same outer saves?"""
    both(nested, lambda: [torch.randn(5, requires_grad=True)])


def kwargs_and_objects(lib, x):
    def fn(t, *, scale, tag):
        return t * scale, tag, 3, {"y": t.sin()}["y"]

    return lib.checkpoint(fn, x, use_reentrant=False, scale=2.0, tag="tag")


def test_kwargs_and_non_tensor_outputs_pass_through():
    """Keyword arguments reach fn; non-tensor outputs come back unchanged?"""
    theirs, ours = both(
        kwargs_and_objects,
        lambda: [torch.randn(3, requires_grad=True)],
        backward=lambda out: (out[0].sum() + out[3].sum()).backward(),
    )
    assert ours.outputs[1:3] == ["tag", 3]


@pytest.mark.parametrize("early_stop", [True, False])
def test_early_stop_on_and_off(early_stop):
    """early_stop=False runs the whole function again; True stops at the last saved tensor?"""

    def program(lib, x):
        return lib.checkpoint(
            lambda t: t.sin().exp().sum().cos() + t.sum(), x, use_reentrant=False, early_stop=early_stop
        )

    theirs, _ = both(program, lambda: [torch.randn(4, requires_grad=True)])
    assert (
        theirs.backward_ops["aten.add.Tensor"] == 1
    ) is early_stop  # the final add runs again only without


def test_set_checkpoint_early_stop_overrides_the_argument():
    """The context manager wins over early_stop=True, in both?"""

    def program(lib, x):
        with lib.set_checkpoint_early_stop(False):
            return lib.checkpoint(lambda t: t.sin().exp() * 2, x, use_reentrant=False)

    theirs, _ = both(program, lambda: [torch.randn(4, requires_grad=True)])
    assert theirs.backward_ops["aten.mul.Tensor"] >= 2


def test_retain_graph_then_a_second_backward_recomputes_again():
    """backward(retain_graph=True) twice: two recomputations, summed gradients, like torch?"""

    def twice(out):
        out.sum().backward(retain_graph=True)
        out.sum().backward()

    theirs, _ = both(checkpointed_mlp, mlp_inputs, backward=twice)
    assert theirs.backward_ops["aten.addmm.default"] == 4


def test_double_backward_through_a_checkpoint():
    """grad of grad (create_graph=True) through the checkpoint, as torch allows it?"""

    def double(out):
        (g,) = torch.autograd.grad(out.sum(), DOUBLE_INPUT, create_graph=True)
        g.sum().backward()

    def program(lib, x):
        DOUBLE_INPUT[:] = [x]
        return lib.checkpoint(lambda t: t.sin() * t, x, use_reentrant=False)

    DOUBLE_INPUT: list = []
    both(program, lambda: [torch.randn(4, requires_grad=True)], backward=double)


@pytest.mark.parametrize("early_stop", [True, False])
@pytest.mark.parametrize("retain", [True, False])
def test_a_backward_inside_the_checkpointed_function(early_stop, retain):
    """torch.autograd.grad inside fn (torch's Rule 6): recomputes inside the forward, skips freed holders?"""

    def program(lib, x):
        def fn(t):
            z = t.sin().cos()
            (gx,) = torch.autograd.grad(z.sum(), t, retain_graph=retain)
            return t.cos() * gx

        return lib.checkpoint(fn, x, use_reentrant=False, early_stop=early_stop)

    both(program, lambda: [torch.randn(4, requires_grad=True)])


def test_backward_twice_without_retain_graph_fails_like_torch():
    """A second backward after the graph was freed: RuntimeError in both?"""

    def twice(out):
        out.sum().backward()
        out.sum().backward()

    theirs, ours = both(checkpointed_mlp, mlp_inputs, backward=twice)
    assert theirs.error[0] is RuntimeError


def test_without_grad_mode_the_function_just_runs():
    """Under no_grad nothing is saved or recomputed: one plain call, no graph?"""

    def program(lib, x):
        with torch.no_grad():
            return lib.checkpoint(torch.sin, x, use_reentrant=False)

    theirs, ours = both(program, lambda: [torch.randn(3, requires_grad=True)], backward=lambda out: None)
    assert ours.outputs[0].grad_fn is None


# ---- selective checkpointing ------------------------------------------------------------


def sac_program(policy):
    def program(lib, x, w):
        ctx_fn = functools.partial(lib.create_selective_checkpoint_contexts, policy)
        return lib.checkpoint(
            lambda a, b: torch.sigmoid((a @ b) @ b) * b, x, w, use_reentrant=False, context_fn=ctx_fn
        )

    return program


def sac_inputs():
    return [torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)]


def test_sac_with_a_list_saves_those_ops():
    """A list of ops: mm is cached (never runs again), the rest recomputed?"""
    theirs, _ = both(sac_program([torch.ops.aten.mm.default]), sac_inputs)
    plain, _ = both(sac_program(lambda ctx, op, *a, **k: P.PREFER_RECOMPUTE), sac_inputs)
    assert theirs.backward_ops["aten.mm.default"] == plain.backward_ops["aten.mm.default"] - 2


@pytest.mark.parametrize("policy", list(P) + [True, False, None, "MUST_SAVE", 7])
def test_sac_with_a_policy_function(policy):
    """Every CheckpointPolicy, bools, and values that are none of them: same as torch?"""
    both(
        sac_program(
            lambda ctx, op, *a, **k: policy if op == torch.ops.aten.mm.default else P.PREFER_RECOMPUTE
        ),
        sac_inputs,
    )


def test_sac_backward_twice_is_refused_like_torch():
    """A second backward through cached outputs: RuntimeError in both?"""

    def twice(out):
        out.sum().backward(retain_graph=True)
        out.sum().backward()

    theirs, ours = both(sac_program([torch.ops.aten.mm.default]), sac_inputs, backward=twice)
    assert theirs.error[0] is RuntimeError and "backward" in ours.error[1]


def test_sac_sees_cache_mutation_like_torch():
    """A cached output modified in place before backward: RuntimeError, unless allowed?"""
    for allow in (False, True):

        def program(lib, x, w, allow=allow):
            ctx_fn = functools.partial(
                lib.create_selective_checkpoint_contexts,
                [torch.ops.aten.mm.default],
                allow_cache_entry_mutation=allow,
            )

            def fn(a, b):
                y = a @ b
                z = y.sigmoid()
                y.mul_(2)
                return z

            return lib.checkpoint(fn, x, w, use_reentrant=False, context_fn=ctx_fn)

        both(program, sac_inputs)


@pytest.mark.parametrize("bad, error", [([torch.ops.aten.mm], ValueError), ([3], ValueError), (3, TypeError)])
def test_sac_refuses_what_is_not_a_policy(bad, error):
    """An OpOverloadPacket, a non-op, a non-callable: the same error type as torch's?"""
    for lib in LIBS.values():
        with pytest.raises(error):
            lib.create_selective_checkpoint_contexts(bad)
    if bad == [torch.ops.aten.mm]:  # ours names the overload to use, as torch's does
        with pytest.raises(error, match=r"aten\.mm\.default"):
            course_ckpt.create_selective_checkpoint_contexts(bad)


# ---- errors -------------------------------------------------------------------------------


def changing(second):
    """A function that runs ``t.sin()`` the first time and ``second(t)`` after."""

    def program(lib, x, **kw):
        calls = itertools.count()
        return lib.checkpoint(
            lambda t: t.sin().exp() if next(calls) == 0 else second(t), x, use_reentrant=False, **kw
        )

    return program


def _counts(lib_name, message):
    if lib_name == "torch":
        return re.search(r"forward: (\d+)\n.*recomputation: (\d+)", message).groups()
    return re.search(r"saved (\d+) tensors .* but (\d+) when", message).groups()


def _mismatches(lib_name, message):
    if lib_name == "torch":
        return re.findall(
            r"position (\d+):\nsaved metadata: (\{.*\})\nrecomputed metadata: (\{.*\})", message
        )
    return re.findall(r"saved tensor (\d+): forward (\{.*\}), recomputed (\{.*\})", message)


def test_fewer_tensors_in_the_recomputation_is_a_checkpoint_error():
    """The recomputation saves fewer tensors: CheckpointError with both counts, like torch's?"""
    theirs, ours = both(changing(lambda t: t * 2), lambda: [torch.randn(4, requires_grad=True)])
    assert theirs.error[0] is torch_ckpt.CheckpointError
    assert _counts("course", ours.error[1]) == _counts("torch", theirs.error[1]) == ("2", "0")


def test_other_shapes_in_the_recomputation_is_a_checkpoint_error():
    """Same count, other shapes: CheckpointError naming each position and both metadata?"""
    theirs, ours = both(changing(lambda t: t[:2].sin().exp()), lambda: [torch.randn(4, requires_grad=True)])
    assert theirs.error[0] is torch_ckpt.CheckpointError
    found = _mismatches("course", ours.error[1])
    assert found == _mismatches("torch", theirs.error[1]) and [i for i, *_ in found] == ["0", "1"]


def test_determinism_check_none_compares_nothing():
    """determinism_check='none': the shape change passes unnoticed (then fails or not) as in torch?"""
    both(
        functools.partial(changing(lambda t: t[:2].sin().exp()), determinism_check="none"),
        lambda: [torch.randn(4, requires_grad=True)],
    )


def test_more_tensors_without_early_stop_is_a_checkpoint_error():
    """early_stop=False and more saves in the recomputation: CheckpointError in both?"""
    theirs, ours = both(
        functools.partial(changing(lambda t: t.sin().exp().exp()), early_stop=False),
        lambda: [torch.randn(4, requires_grad=True)],
    )
    assert theirs.error[0] is torch_ckpt.CheckpointError


def four():
    return [torch.randn(4, requires_grad=True)]


@pytest.fixture(scope="module")
def torch_debug_seen() -> Seen:
    """torch's debug=True run, once per process: under pytest's log capture a second run of
    torch's debug mode (its ``capture_logs``) fails inside ``logging`` with a TypeError.

    On x86-64 Linux torch's debug mode also symbolises the C++ frames of every op with
    ``addr2line`` over libtorch_cpu.so: seconds on the 2.13 CPU wheel, many minutes on the 2.14
    CUDA wheel. We compare the ops listed, not the frames (ours prints none), so we let torch
    take the path it takes on other machines, Python frames only."""
    with mock.patch("platform.machine", return_value="not-a-cpp-traceback-platform"):
        return observe(torch_ckpt, functools.partial(changing(lambda t: t * 2), debug=True), four)


def test_debug_lists_the_ops_of_both_runs(torch_debug_seen):
    """debug=True: still a CheckpointError, now listing the aten ops of the forward and the recomputation?"""
    ours = observe(course_ckpt, functools.partial(changing(lambda t: t * 2), debug=True), four)
    assert_same(torch_debug_seen, ours)
    assert torch_debug_seen.error[0] is torch_ckpt.CheckpointError
    fwd, rec = ours.error[1].split("forward:\n")[1].split("recomputation:\n")
    assert "aten.exp.default" in fwd and "aten.exp.default" not in rec and "aten.mul.Tensor" in rec


def test_set_checkpoint_debug_enabled_turns_debug_on_for_every_checkpoint(torch_debug_seen):
    """The global switch: debug output without debug=True; and False wins over debug=True, as in torch?"""

    def program(lib, x, enabled=True, **kw):
        with lib.set_checkpoint_debug_enabled(enabled):
            return changing(lambda t: t * 2)(lib, x, **kw)

    ours = observe(course_ckpt, program, four)
    assert_same(torch_debug_seen, ours)
    assert "recomputation:\n" in ours.error[1]
    _, ours = both(functools.partial(program, enabled=False, debug=True), four)
    assert ours.error[0] is torch_ckpt.CheckpointError and "recomputation:\n" not in ours.error[1]


@pytest.mark.parametrize(
    "kw", [{"determinism_check": "shapes"}, {"debug": True, "context_fn": lambda: (None, None)}]
)
def test_bad_arguments_are_value_errors(kw):
    """An unknown determinism_check, or debug with a context_fn: ValueError in both?"""
    for lib in LIBS.values():
        with pytest.raises(ValueError):
            lib.checkpoint(torch.sin, torch.ones(2, requires_grad=True), use_reentrant=False, **kw)


def test_a_context_that_swallows_the_forwards_exception_is_a_runtime_error():
    """context_fn's forward context suppresses fn's error: RuntimeError, in both?"""

    def context_fn():
        return contextlib.suppress(ZeroDivisionError), contextlib.nullcontext()

    for lib in LIBS.values():
        with pytest.raises(RuntimeError, match="context_fn"):
            lib.checkpoint(
                lambda t: 1 / 0, torch.ones(2, requires_grad=True), use_reentrant=False, context_fn=context_fn
            )


def test_use_reentrant_omitted_warns_and_runs_the_reentrant_checkpoint():
    """No use_reentrant: a UserWarning naming it, then the reentrant variant, as torch 2.13 does?"""
    x = torch.randn(3, requires_grad=True)
    for lib in LIBS.values():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.checkpoint(torch.sin, x).sum().backward()
        assert [w.category for w in caught] == [UserWarning] and "use_reentrant" in str(caught[0].message)
    # the reentrant variant refuses kwargs: the call went there
    for lib in LIBS.values():
        with pytest.raises(ValueError, match="Unexpected keyword arguments: k"):
            lib.checkpoint(lambda t, k: t, x, use_reentrant=True, k=1)


def test_saved_tensor_read_outside_backward_recomputes_each_time():
    """grad_fn._saved_self outside any backward: fn runs again on every read, in both?

    And early stop shows: sin saves its *input* before its kernel runs, so every
    recomputation stops before sin itself runs again.
    """
    calls = []

    def program(lib, x):
        def fn(t):
            calls.append(lib.__name__)
            return t.sin()

        out = lib.checkpoint(fn, x, use_reentrant=False)
        first, second = out.grad_fn._saved_self, out.grad_fn._saved_self
        assert torch.equal(first, x) and torch.equal(second, x)
        return out

    theirs, _ = both(program, lambda: [torch.randn(3, requires_grad=True)])
    assert Counter(calls) == {"torch.utils.checkpoint": 4, "course.checkpoint": 4}  # 1 + 2 reads + backward
    assert theirs.forward_ops["aten.sin.default"] == 1


# ---- Hypothesis: random sequences of ops and policies ---------------------------------------

OPS = {
    "sin": torch.sin,
    "exp": lambda t: t.exp() * 0.5,
    "tanh": torch.tanh,
    "mul": lambda t: t * t,
    "mm": lambda t: t @ t.T @ t * 0.1,
    "sigmoid": torch.sigmoid,
    "dropout": lambda t: torch.dropout(t, 0.3, True),
    "view": lambda t: t.view(9).sin().view(3, 3),
}
POLICIES = list(P) + [True, False]


@settings(max_examples=20, deadline=None)
@given(
    ops=st.lists(st.sampled_from(sorted(OPS)), min_size=1, max_size=5),
    policy=st.dictionaries(
        st.sampled_from(
            [
                "aten.sin.default",
                "aten.mm.default",
                "aten.mul.Tensor",
                "aten.exp.default",
                "aten.tanh.default",
                "aten.t.default",
                "aten.view.default",
            ]
        ),
        st.sampled_from(POLICIES),
    ),
    early_stop=st.booleans(),
    selective=st.booleans(),
    twice=st.booleans(),
)
def test_random_programs_match_torch(ops, policy, early_stop, selective, twice):
    """Any short chain of ops, any policy per op, early stop or not, one or two backwards: same as torch?"""

    def program(lib, x):
        def fn(t):
            for name in ops:
                t = OPS[name](t)
            return t

        kw = {"early_stop": early_stop}
        if selective:
            kw["context_fn"] = functools.partial(
                lib.create_selective_checkpoint_contexts,
                lambda ctx, op, *a, **k: policy.get(str(op), P.PREFER_RECOMPUTE),
            )
        return lib.checkpoint(fn, x, use_reentrant=False, **kw)

    def backward(out):
        out.sum().backward(retain_graph=twice)
        if twice:
            out.sum().backward()

    both(program, lambda: [torch.randn(3, 3, requires_grad=True)], backward=backward)


def test_the_facade_names_torch_names():
    """Every name of course.checkpoint exists in torch.utils.checkpoint; the enum and error are torch's?"""
    assert set(course_ckpt.__all__) <= set(dir(torch_ckpt))
    assert course_ckpt.CheckpointPolicy is torch_ckpt.CheckpointPolicy
    assert course_ckpt.CheckpointError is torch_ckpt.CheckpointError
    assert course_ckpt.SAC_IGNORED_OPS == torch_ckpt.SAC_IGNORED_OPS


class ReadsSavedTwice(torch.autograd.Function):
    """A custom op whose backward reads ``ctx.saved_tensors`` twice."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        (x,) = ctx.saved_tensors
        return g * 2


def test_a_saved_tensor_unpacked_twice_in_one_backward_is_a_checkpoint_error():
    """Recomputed tensors are handed out once per backward: the second read fails, as in torch?"""
    program = lambda lib, x: lib.checkpoint(ReadsSavedTwice.apply, x.sin(), use_reentrant=False)  # noqa: E731
    theirs, ours = both(program, lambda: [torch.randn(3, requires_grad=True)])
    assert theirs.error[0] is torch_ckpt.CheckpointError and "once" in ours.error[1]


def test_autocast_in_forward_is_reapplied_in_the_recomputation():
    """Forward under CPU autocast, backward outside it: same bfloat16 saves recomputed, as torch?"""

    def program(lib, x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return lib.checkpoint(lambda a, b: (a @ b).relu() @ b, x, w, use_reentrant=False)

    theirs, _ = both(program, sac_inputs)
    assert theirs.error is None and theirs.outputs[0].dtype == torch.bfloat16


def test_a_graph_exec_group_recomputes_once_for_two_backwards():
    """Two backwards over disjoint outputs inside torch's GraphExecGroup: one recomputation, as torch?"""

    def program(lib, x):
        return lib.checkpoint(lambda t: (t.sin().exp(), t.cos().exp()), x, use_reentrant=False)

    def two_parts(out, group=True):
        with torch_ckpt.GraphExecGroup() if group else contextlib.nullcontext():
            out[0].sum().backward(retain_graph=True)
            out[1].sum().backward(retain_graph=True)

    grouped, _ = both(program, lambda: [torch.randn(3, requires_grad=True)], backward=two_parts)
    apart, _ = both(
        program,
        lambda: [torch.randn(3, requires_grad=True)],
        backward=functools.partial(two_parts, group=False),
    )
    # sin runs in the recomputation (and once more in cos's backward formula)
    assert grouped.backward_ops["aten.sin.default"] == apart.backward_ops["aten.sin.default"] - 1


def test_an_error_in_the_function_propagates_and_pops_the_hooks():
    """fn raises: the same error comes out, and no checkpoint hook stays pushed (later saves are plain)?"""

    def fails(t):
        t.exp()  # a save under the checkpoint's hooks, then the error
        raise ZeroDivisionError("fn failed")

    def program(lib, x):
        with pytest.raises(ZeroDivisionError, match="fn failed"):
            lib.checkpoint(fails, x, use_reentrant=False)
        y = x.exp()
        assert torch.equal(y.grad_fn._saved_result, y)  # a holder would recompute here instead
        return y

    theirs, ours = both(program, lambda: [torch.randn(3, requires_grad=True)])
    assert theirs.error is None and ours.packs == theirs.packs


def test_course_trace_names_the_hook_of_each_pack():
    """Under course.trace.record: two packs by _checkpoint_hook, then the recomputation's, then unpacks?"""
    from course import trace

    x = torch.ones(3, requires_grad=True)
    with trace.record() as events:
        course_ckpt.checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False).sum().backward()
    assert [str(e).rsplit(" ", 1)[0] if e.kind == "pack" else e.name for e in events] == [
        "pack _checkpoint_hook t0",
        "pack _checkpoint_hook t1",
        "pack _recomputation_hook t0",
        "pack _recomputation_hook t2",
        "ExpBackward0",
        "SinBackward0",
    ]


# ---- checkpoint_sequential ----------------------------------------------------------------


def chain_inputs():
    layers = [
        torch.nn.Linear(6, 12),
        torch.nn.Tanh(),
        torch.nn.Linear(12, 12),
        torch.nn.Dropout(0.3),
        torch.nn.GELU(),
        torch.nn.Linear(12, 3),
    ]
    return torch.nn.Sequential(*layers), torch.randn(5, 6, requires_grad=True)


@pytest.mark.parametrize("segments", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("as_list", [False, True])
def test_checkpoint_sequential_recomputes_like_torchs(segments, as_list):
    """Same outputs, gradients, ops in forward and backward, packs and unpacks as torch's
    checkpoint_sequential, remainders (6 layers in 4 segments) and plain lists included."""

    def program(lib, net, x):
        layers = list(net) if as_list else net
        return lib.checkpoint_sequential(layers, segments, x, use_reentrant=False)

    both(program, chain_inputs)


def test_checkpoint_sequential_reentrant_and_its_keyword_checks_match_torchs():
    def reentrant(lib, net, x):
        return lib.checkpoint_sequential(net, 2, x, use_reentrant=True, preserve_rng_state=False)

    both(reentrant, chain_inputs)
    net, x = chain_inputs()
    for lib in LIBS.values():
        with pytest.raises(ValueError):
            lib.checkpoint_sequential(net, 2, x, use_reentrant=False, bogus=1)
        with pytest.warns(UserWarning):
            lib.checkpoint_sequential(net, 2, x)


def test_overlapping_backwards_in_a_graph_exec_group_name_it_as_torch_does():
    """Two backwards that need the same saved activation under torch's GraphExecGroup: both
    raise CheckpointError, and both messages name GraphExecGroup (torch's hint, in our words)."""
    messages = {}
    for name, lib in LIBS.items():
        x = torch.ones(3, requires_grad=True)
        out = lib.checkpoint(torch.sin, x, use_reentrant=False)
        with pytest.raises(torch_ckpt.CheckpointError) as raised, torch_ckpt.GraphExecGroup():
            torch.autograd.grad(out.sum(), x, retain_graph=True)
            torch.autograd.grad(out.sum(), x)
        messages[name] = str(raised.value)
    assert all("GraphExecGroup" in m and "overlap" in m for m in messages.values())


def test_an_op_with_an_ordered_effect_runs_as_often_as_torch_runs_it():
    """torch 2.15 saves the output of an op registered with an ordered effect instead of letting
    backward replay it (earlier releases replay it): count the op's runs through both."""
    from torch._higher_order_ops.effects import _register_effectful_op

    effects = pytest.importorskip("torch._library.effects")
    runs = []

    @torch.library.custom_op("course_test::noted", mutates_args=())
    def noted(x: torch.Tensor) -> torch.Tensor:
        runs.append(1)  # the effect: every run is seen
        return x.clone()

    noted.register_autograd(lambda ctx, grad: grad)
    handle = _register_effectful_op(noted._opoverload, effects.EffectType.ORDERED)
    try:
        counts = []
        for ckpt, make in (
            (torch_ckpt, torch_ckpt.create_selective_checkpoint_contexts),
            (course_ckpt, course_ckpt.create_selective_checkpoint_contexts),
        ):
            runs.clear()
            x = torch.randn(4, requires_grad=True)

            def recompute_all(ctx, op, *args, **kwargs):
                return torch_ckpt.CheckpointPolicy.PREFER_RECOMPUTE

            out = ckpt.checkpoint(
                lambda t: noted(t.sin()).cos(),
                x,
                use_reentrant=False,
                context_fn=lambda make=make: make(recompute_all),
            )
            out.sum().backward()
            counts.append(len(runs))
        assert counts[0] == counts[1], counts  # torch's count, then the course's
    finally:
        handle.destroy()


# ---- torch 2.14: respect_saved_tensors_hooks and the decorator form -----------------------

_TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
needs_214 = pytest.mark.skipif(
    _TORCH < (2, 14), reason="respect_saved_tensors_hooks and the decorator are torch 2.14's"
)


def _sac_under_user_hooks(lib, respect, curried, nested=False):
    """A selective checkpoint (mm saved) under a logging pair of user hooks, maybe inside a
    plain checkpoint: (the pair's log, the FutureWarnings, x.grad)."""
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape)))
        return t.detach()

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t

    x = torch.randn(3, 3, generator=torch.Generator().manual_seed(0)).requires_grad_()
    ctx = functools.partial(lib.create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    kw = {} if respect == "omitted" else {"respect_saved_tensors_hooks": respect}

    def region(t):
        return (t @ t).sin().sum()

    def selective(t):
        if curried:
            return lib.checkpoint(use_reentrant=False, context_fn=ctx, **kw)(region)(t)
        return lib.checkpoint(region, t, use_reentrant=False, context_fn=ctx, **kw)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = lib.checkpoint(selective, x, use_reentrant=False) if nested else selective(x)
        out.backward()
    return log, [w.category.__name__ for w in caught if issubclass(w.category, FutureWarning)], x.grad


@needs_214
@pytest.mark.parametrize("nested", [False, True], ids=["alone", "inside-a-checkpoint"])
@pytest.mark.parametrize("curried", [False, True], ids=["call", "decorator"])
@pytest.mark.parametrize("respect", ["omitted", None, True, False])
def test_does_respect_saved_tensors_hooks_route_the_cached_outputs_as_torchs_does(respect, curried, nested):
    """NOTE [Cached outputs and the user's hooks]: the same packs, unpacks and warnings as torch."""
    theirs = _sac_under_user_hooks(torch_ckpt, respect, curried, nested)
    ours = _sac_under_user_hooks(course_ckpt, respect, curried, nested)
    assert ours[:2] == theirs[:2]
    torch.testing.assert_close(ours[2], theirs[2])
    bypassed = _sac_under_user_hooks(course_ckpt, False, curried, nested)[0]
    assert (ours[0] != bypassed) == (respect is True)  # only True sends the cache through the pair
    assert ours[1] == (["FutureWarning"] if respect in ("omitted", None) else [])


@needs_214
def test_without_user_hooks_nothing_warns_and_nothing_is_routed():
    """Rule 3: no user pair, no FutureWarning, whatever respect_saved_tensors_hooks says."""
    x = torch.randn(3, 3, requires_grad=True)
    ctx = functools.partial(course_ckpt.create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        course_ckpt.checkpoint(lambda t: (t @ t).sum(), x, use_reentrant=False, context_fn=ctx).backward()


@needs_214
def test_is_the_decorator_a_method_decorator_and_refused_with_reentrant_as_in_torch():
    """The curried form binds to an instance; respect_saved_tensors_hooks with use_reentrant=True
    is a ValueError in both."""
    grads = {}
    for name, lib in LIBS.items():

        class Scale(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.w = torch.nn.Parameter(torch.full((3,), 2.0))

            @lib.checkpoint(use_reentrant=False)
            def forward(self, x):
                return (x * self.w).sin().sum()

        module = Scale()
        module(torch.arange(3.0)).backward()
        grads[name] = module.w.grad
        with pytest.raises(ValueError):
            lib.checkpoint(
                torch.sin,
                torch.ones(2, requires_grad=True),
                use_reentrant=True,
                respect_saved_tensors_hooks=True,
            )
    torch.testing.assert_close(grads["course"], grads["torch"])
