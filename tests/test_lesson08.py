"""Lesson 8, the capstone: are the reference solutions right, judged by torch?

The generic tests (tests/test_checks.py) show that each registered solution passes its own
check; these ask whether the check's oracles themselves agree with torch on more inputs, and
whether each oracle, which is not the solution, tells a wrong answer from a right one.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course import checks
from course.checks import get
from course.checks.lesson08 import _shared as shared
from course.checks.lesson08 import ex8_1_saved_bytes_per_layer as ex8_1
from course.checks.lesson08 import ex8_2_choose_offload as ex8_2
from course.checks.lesson08 import ex8_3_offloaded_step as ex8_3
from course.checks.lesson08 import ex8_4_predicted_plan as ex8_4
from course.checks.solutions import lesson08 as solutions
from course.content import lesson08 as C
from course.offload import Offloader

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _distinct_activation_bytes(model, x) -> int:
    """Torch alone: bytes of the distinct non-parameter storages autograd saves (hooks that
    only look)."""
    seen = {}

    def pack(t):
        base = t
        while base._base is not None:
            base = base._base
        if not (base.is_leaf and base.requires_grad):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    del out
    return sum(seen.values())


@settings(max_examples=15, deadline=None)
@given(
    hidden=st.lists(st.integers(1, 24), min_size=1, max_size=4),
    d=st.integers(2, 12),
    batch=st.integers(1, 6),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_does_the_per_block_measurement_agree_with_the_offloader_and_torchs_hooks(hidden, d, batch, dtype):
    model, x = C.make_model(tuple(hidden), d=d, batch=(batch,), dtype=dtype)
    per_layer = solutions.saved_bytes_per_layer(model, x)
    assert per_layer == ex8_1._oracle_per_layer(model, x)
    assert list(per_layer) == [f"block{i}" for i in range(len(hidden))]
    assert sum(per_layer.values()) == _distinct_activation_bytes(model, x)


def test_are_the_lessons_numbers_what_the_model_measures():
    model, x = C.make_model()
    assert solutions.saved_bytes_per_layer(model, x) == C.LESSON_LAYER_BYTES
    assert sum(p.untyped_storage().nbytes() for p in model.parameters()) == C.LESSON_PARAM_BYTES


def _least_offload_dp(layer_bytes: dict, need: int) -> int:
    """The fewest bytes summing to >= need, by dynamic programming (not by subsets)."""
    reachable = {0}
    for n in layer_bytes.values():
        reachable |= {r + n for r in reachable}
    return min(r for r in reachable if r >= need)


@pytest.mark.parametrize(
    "choose", [solutions.choose_offload, ex8_2._oracle_choice], ids=["solution", "oracle"]
)
@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 5000), min_size=1, max_size=6),
    param_bytes=st.integers(0, 5000),
    slack=st.integers(-6000, 20000),
)
def test_is_the_choice_the_cheapest_that_fits(choose, sizes, param_bytes, slack):
    """8.2's solution (every subset) and its oracle (torch's dp_knapsack, exact on byte
    counts) against a dynamic program of our own over reachable sums."""
    layer_bytes = {f"l{i}": n for i, n in enumerate(sizes)}
    budget = param_bytes + slack
    if param_bytes > budget:
        with pytest.raises(ValueError):
            choose(layer_bytes, param_bytes, budget)
        return
    chosen = choose(layer_bytes, param_bytes, budget)
    assert chosen <= set(layer_bytes)
    offloaded = sum(layer_bytes[n] for n in chosen)
    total = param_bytes + sum(sizes)
    assert total - offloaded <= budget
    assert offloaded == _least_offload_dp(layer_bytes, total - budget)


@pytest.mark.parametrize("r", range(5))
def test_does_the_offloaded_step_give_torchs_gradients_for_every_choice(r):
    names = list(C.LESSON_LAYER_BYTES)
    for chosen in itertools.combinations(names, r):
        model, x = C.make_model()
        reference = ex8_3._reference_grads(model, x)
        off = solutions.offloaded_step(model, x, set(chosen))
        for p, g in zip(model.parameters(), reference):
            assert torch.equal(p.grad, g)
        assert off.stats.d2h_bytes == sum(C.LESSON_LAYER_BYTES[n] for n in chosen)


def _saves_by_block(model, x):
    """Torch's hooks alone: for each saved storage that is not a parameter's, the blocks that
    save it, and whether some saved tensor starts elsewhere than its storage (a view with an
    offset)."""
    running, savers, offset_views = [None], {}, [False]

    def pack(t):
        base = t
        while base._base is not None:
            base = base._base
        if not (base.is_leaf and base.requires_grad):
            savers.setdefault(t.untyped_storage().data_ptr(), set()).add(running[0])
            offset_views[0] |= t.data_ptr() != t.untyped_storage().data_ptr()
        return t

    handles = [
        block.register_forward_pre_hook(lambda m, a, name=name: running.__setitem__(0, name))
        for name, block in model.named_children()
    ]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    for h in handles:
        h.remove()
    del out
    return savers, offset_views[0]


def test_do_8_1s_hidden_programs_reach_the_boundaries_they_are_named_for():
    """A view whose data_ptr is not its storage's, and a storage two blocks save: without
    such programs, keying by t.data_ptr() or counting once per block would pass."""
    _, offset = _saves_by_block(*shared.MODELS["two views of one storage"]())
    assert offset
    savers, _ = _saves_by_block(*shared.MODELS["a storage two blocks save"]())
    assert (
        sum(len(blocks) > 1 for blocks in savers.values()) == 1
    )  # block0's tanh output, and block1 saves it
    savers, offset = _saves_by_block(*shared.MODELS["lesson"]())
    assert not offset and all(
        len(blocks) == 1 for blocks in savers.values()
    )  # the lesson's model has neither


def test_are_lesson_8s_function_exercises_judged_by_oracles_that_are_not_their_solutions():
    for ex_id in ("8.1", "8.2", "8.3"):
        ex = get(ex_id)
        assert ex.oracle is not None and ex.oracle is not ex.solution, ex_id


def test_does_8_2s_oracle_tell_a_wrong_choice_from_a_right_one():
    ex = get("8.2")
    expected = checks.expected_outcomes(ex)
    for right in (solutions.choose_offload, ex8_2._choose_by_bitmask):
        assert checks.grade_answer(ex, right).status == "passed"
    largest_first = checks.outcomes_of(ex, ex8_2._largest_first)
    assert largest_first[0] != expected[0]  # the lesson's case: block2 alone moves 6016 bytes more
    assert checks.grade_answer(ex, ex8_2._largest_first).status == "failed"


@pytest.mark.parametrize("model_name", ["lesson", "3-d input"])
def test_does_8_3s_hand_made_offload_agree_with_the_offloader_on_every_choice(model_name):
    model, x = shared.MODELS[model_name]()
    names = [name for name, _ in model.named_children()]
    for r in range(len(names) + 1):
        for chosen in itertools.combinations(names, r):
            ours = ex8_3._run_step(ex8_3._oracle_step, model_name, list(chosen))
            theirs = ex8_3._run_step(solutions.offloaded_step, model_name, list(chosen))
            assert ours == theirs, chosen
            assert ours["gradients as without offload"]


def test_does_8_3s_oracle_tell_a_wrong_step_from_a_right_one():
    ex = get("8.3")
    expected = checks.expected_outcomes(ex)
    assert checks.judge(ex, checks.outcomes_of(ex, solutions.offloaded_step), expected).status == "passed"
    everything = checks.outcomes_of(ex, ex8_3._step_offloads_every_block)
    assert everything[0]["value"] != expected[0]["value"]
    assert checks.judge(ex, everything, expected).status == "failed"


def test_a_step_that_leaves_hooks_on_the_model_is_seen():
    first = checks.outcomes_of(get("8.3"), ex8_3._step_hooks_pick_the_blocks)[0]
    left = [sentence for _, sentence in first["left"]]
    assert left == [
        f"model.block{i} has +2 hooks registered on it" for i in range(4)
    ]  # a pre-hook and a hook
    assert "left" not in checks.outcomes_of(get("8.3"), solutions.offloaded_step)[0]


def test_does_8_4s_truth_agree_with_the_whole_model_and_with_8_2s_choice():
    """8.4's truth exports block by block; the whole model's min-cut forward saves the same
    bytes, and 8.2's reference choice on those blocks is the same plan."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from course.aot.joint import export_joint

    truth = get("8.4").oracle()
    model, x = C.make_model()
    whole = export_joint(model, (x,), partition_fn=min_cut_rematerialization_partition).fw_module
    assert (
        truth["saved activation bytes"] == ex8_4._not_param_bytes(whole) < sum(C.LESSON_LAYER_BYTES.values())
    )
    per_block, h = {}, x
    for name, block in model.named_children():
        per_block[name] = ex8_4._not_param_bytes(
            export_joint(block, (h,), partition_fn=min_cut_rematerialization_partition).fw_module
        )
        h = block(h).detach()
    chosen = solutions.choose_offload(per_block, C.LESSON_PARAM_BYTES, C.LESSON_BUDGET)
    assert truth["offload"] == sorted(chosen) and truth["bytes moved"] == 2 * sum(
        per_block[n] for n in chosen
    )
    eager = solutions.choose_offload(C.LESSON_LAYER_BYTES, C.LESSON_PARAM_BYTES, C.LESSON_BUDGET)
    assert set(truth["offload"]) != eager  # the recompute changes the plan: the point of 8.4


@pytest.mark.parametrize(
    "answer",
    [
        {"saved activation bytes": 27392, "offload": {"block3", "block1"}, "bytes moved": 13568},
        {"bytes moved": 13568.0, "offload": frozenset({"block1", "block3"}), "saved activation bytes": 27392},
        {"saved activation bytes": 27392, "offload": ["block3", "block1"], "bytes moved": 13568},
    ],
)
def test_8_4_reads_the_blocks_as_a_set_list_or_tuple(answer):
    assert checks.grade_answer(get("8.4"), answer).status == "passed"


@pytest.mark.parametrize(
    "answer, words",
    [
        ([27392, ["block1", "block3"], 13568], "write a dict"),
        (
            {"saved activation bytes": 27392, "offload": "block1, block3", "bytes moved": 13568},
            "set of names",
        ),
        ({"saved activation bytes": 27392, "offload": {1, 3}, "bytes moved": 13568}, "as a string"),
    ],
)
def test_8_4_says_what_it_cannot_read(answer, words):
    result = checks.grade_answer(get("8.4"), answer)
    assert result.status == "failed" and words in result.message


def test_does_the_joint_graph_save_the_parameters_eager_autograd_saves():
    """Eager autograd's parameter saves (the Offloader's kept_param) against the joint graph's
    saved-for-backward values that are parameters or views of them."""
    from course.aot import descriptors as cd
    from course.aot.joint import export_joint

    model, x = C.make_model()
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    with off:
        model(x)
    out = export_joint(model, (x,)).fw_module.graph.output_node()
    params = 0
    for node, desc in zip(out.args[0], out.meta["desc"]):
        if isinstance(cd.from_torch(desc), cd.SavedForBackwardsAOTOutput):
            while node.op == "call_function" and getattr(node.target, "is_view", False):
                node = node.args[0]
            params += node.op == "placeholder" and isinstance(
                cd.from_torch(node.meta["desc"]), cd.ParamAOTInput
            )
    assert params == off.stats.kept_param == 20


def test_the_budget_arithmetic_depends_on_the_partitioner():
    """Lesson 8: default_partition saves eager's activation bytes; Inductor's min-cut
    partitioner recomputes the GELU outputs and saves fewer."""
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    from course.aot import descriptors as cd
    from course.aot.joint import export_joint

    def saved(partition_fn):
        model, x = C.make_model()
        fw = export_joint(model, (x,), partition_fn=partition_fn).fw_module
        out = fw.graph.output_node()
        values, not_param = 0, 0
        for node, desc in zip(out.args[0], out.meta["desc"]):
            if not isinstance(cd.from_torch(desc), cd.SavedForBackwardsAOTOutput):
                continue
            values += 1
            base = node
            while base.op == "call_function" and getattr(base.target, "is_view", False):
                base = base.args[0]
            if not (
                base.op == "placeholder" and isinstance(cd.from_torch(base.meta["desc"]), cd.ParamAOTInput)
            ):
                not_param += node.meta["val"].numel() * node.meta["val"].element_size()
        return values, not_param

    assert saved(default_partition) == (52, sum(C.LESSON_LAYER_BYTES.values())) == (52, 35072)
    assert saved(min_cut_rematerialization_partition) == (48, 27392)


def test_a_measurement_that_leaves_its_hooks_on_the_model_is_seen():
    leaky = ex8_1._hooks_left_on_the_model
    assert ex8_1._run_measure(solutions.saved_bytes_per_layer, "lesson")["hooks left on the model"] == 0
    assert ex8_1._run_measure(leaky, "lesson")["hooks left on the model"] == 4
