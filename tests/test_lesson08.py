"""Lesson 8, the capstone: are the reference solutions right, judged by torch?

The generic tests (tests/test_checks.py) show that each registered solution passes its own
check; these ask whether the check's oracles themselves agree with torch on more inputs.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course.checks import get
from course.checks import lesson08 as L
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
    model, x = L.make_model(tuple(hidden), d=d, batch=(batch,), dtype=dtype)
    per_layer = L.saved_bytes_per_layer(model, x)
    assert per_layer == L._oracle_per_layer(model, x)
    assert list(per_layer) == [f"block{i}" for i in range(len(hidden))]
    assert sum(per_layer.values()) == _distinct_activation_bytes(model, x)


def test_are_the_lessons_numbers_what_the_model_measures():
    model, x = L.make_model()
    assert L.saved_bytes_per_layer(model, x) == L.LESSON_LAYER_BYTES
    assert sum(p.untyped_storage().nbytes() for p in model.parameters()) == L.LESSON_PARAM_BYTES


def _least_offload_dp(layer_bytes: dict, need: int) -> int:
    """The fewest bytes summing to >= need, by dynamic programming (not by subsets)."""
    reachable = {0}
    for n in layer_bytes.values():
        reachable |= {r + n for r in reachable}
    return min(r for r in reachable if r >= need)


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=6),
    param_bytes=st.integers(0, 5000),
    slack=st.integers(-6000, 20000),
)
def test_is_choose_offload_the_cheapest_choice_that_fits(sizes, param_bytes, slack):
    layer_bytes = {f"l{i}": n for i, n in enumerate(sizes)}
    budget = param_bytes + slack
    if param_bytes > budget:
        with pytest.raises(ValueError):
            L.choose_offload(layer_bytes, param_bytes, budget)
        return
    chosen = L.choose_offload(layer_bytes, param_bytes, budget)
    assert chosen <= set(layer_bytes)
    offloaded = sum(layer_bytes[n] for n in chosen)
    total = param_bytes + sum(sizes)
    assert total - offloaded <= budget
    assert offloaded == _least_offload_dp(layer_bytes, total - budget)


@pytest.mark.parametrize("r", range(5))
def test_does_the_offloaded_step_give_torchs_gradients_for_every_choice(r):
    names = list(L.LESSON_LAYER_BYTES)
    for chosen in itertools.combinations(names, r):
        model, x = L.make_model()
        reference = L._reference_grads(model, x)
        off = L.offloaded_step(model, x, set(chosen))
        for p, g in zip(model.parameters(), reference):
            assert torch.equal(p.grad, g)
        assert off.stats.d2h_bytes == sum(L.LESSON_LAYER_BYTES[n] for n in chosen)


def test_does_the_joint_graph_save_what_eager_autograd_saves():
    """8.4's truth (course.aot.joint + torch's partitioner) against eager autograd's packs."""
    model, x = L.make_model()
    off = Offloader(min_bytes=0, device_type="cpu", mode="copy")
    with off:
        model(x)
    assert get("8.4").oracle() == off.stats.kept_param == 20


def test_the_budget_arithmetic_depends_on_the_partitioner():
    """Lesson 8: default_partition saves eager's activation bytes; Inductor's min-cut
    partitioner recomputes the GELU outputs and saves fewer."""
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    from course.aot import descriptors as cd
    from course.aot.joint import export_joint

    def saved(partition_fn):
        model, x = L.make_model()
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
            if not (base.op == "placeholder" and isinstance(cd.from_torch(base.meta["desc"]), cd.ParamAOTInput)):
                not_param += node.meta["val"].numel() * node.meta["val"].element_size()
        return values, not_param

    assert saved(default_partition) == (52, sum(L.LESSON_LAYER_BYTES.values())) == (52, 35072)
    assert saved(min_cut_rematerialization_partition) == (48, 27392)


def test_a_measurement_that_leaves_its_hooks_on_the_model_is_seen():
    leaky = L._per_layer_variant(count_param=False, remove=False)
    assert L._run_measure(L.saved_bytes_per_layer, "lesson")["hooks left on the model"] == 0
    assert L._run_measure(leaky, "lesson")["hooks left on the model"] == 4
