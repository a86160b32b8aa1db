"""Lesson 10, the compiler's memory decisions: are the reference solutions and the checks'
truths right, judged by torch?

The generic tests (tests/test_checks.py, tests/test_catalogue_grade.py) show that each
registered solution passes its own check and every known wrong answer fails with its hint;
these ask whether the oracles agree with torch on more programs, by other routes.
"""

from __future__ import annotations

import collections
import functools

import pytest
import torch
from torch._functorch import config as functorch_config

from course.checks.lesson10 import ex10_1_predicted_recomputed as ex10_1
from course.checks.lesson10 import ex10_3_knapsack as ex10_3
from course.content import lesson09 as C9
from course.content import lesson10 as C

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_does_the_partition_follow_the_budget_set_around_the_call():
    """The joint's stages run when first read: partitioned() must read them under the caller's config."""
    with functorch_config.patch(activation_memory_budget=0.0):
        at_zero = C.partitioned("lesson", "min_cut")
    at_one = C.partitioned("lesson", "min_cut")

    def reruns(jd):
        return sum(str(n.target).startswith(("aten.addmm", "aten.gelu.")) for n in jd.bw_module.graph.nodes)

    assert reruns(at_zero) == 8 and reruns(at_one) == 0


def test_is_the_budget_prediction_what_a_compiled_region_at_budget_zero_reruns():
    """10.1's truth (course.joint + the min-cut partitioner, global config) against a real
    torch.compile run under region_activation_memory_budget(0.0)."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    graphs = {}
    model, x = C9.make_model()

    def forward(x):
        with torch.autograd.graph.region_activation_memory_budget(0.0):
            return model(x)

    backend = aot_autograd(
        fw_compiler=lambda gm, _: gm,
        bw_compiler=lambda gm, _: graphs.setdefault("bw", gm),
        partition_fn=min_cut_rematerialization_partition,
    )
    torch._dynamo.reset()
    torch.compile(forward, backend=backend)(x).sum().backward()
    ops = collections.Counter(
        n.target.overloadpacket.__name__
        for n in graphs["bw"].graph.nodes
        if n.op == "call_function" and hasattr(n.target, "overloadpacket")
    )
    assert (
        ex10_1._recomputed_at_budget(0.0)
        == {"addmm": ops["addmm"], "gelu": ops["gelu"]}
        == {"addmm": 5, "gelu": 3}
    )
    assert ex10_1._recomputed_at_budget(1.0) == {"addmm": 0, "gelu": 0}


@pytest.mark.parametrize("budget", [0.25, 0.5])
def test_does_torchs_solver_rerun_fewer_products_than_lesson_8s_knapsack_at_the_same_bytes(budget):
    """The lesson's comparison, by another route: lesson 8's knapsack given the bytes torch kept,
    its choice forced on torch's min-cut partitioner by SAC tags."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch.utils.checkpoint import CheckpointPolicy

    from course.aot.joint import export_joint
    from course.checks.lesson08 import choose_offload as knapsack

    def activations(jd):
        out = jd.fw_module.graph.output_node()
        return {
            n.name: n.meta["val"].nbytes
            for n in out.args[0][jd.num_fwd_outputs :]
            if n.op == "call_function" and not n.target.is_view
        }

    def products(jd):
        return sum(n.target == torch.ops.aten.addmm.default for n in jd.bw_module.graph.nodes)

    every = activations(C.partitioned("lesson", "min_cut"))
    with functorch_config.patch(activation_memory_budget=budget):
        by_torch = C.partitioned("lesson", "min_cut")
    nbytes = sum(activations(by_torch).values())
    keep = set(every) - knapsack(every, 0, nbytes)

    def partition(joint, inputs, **kwargs):
        for node in joint.graph.nodes:
            if node.op == "call_function":
                node.meta["recompute"] = (
                    CheckpointPolicy.MUST_SAVE if node.name in keep else CheckpointPolicy.PREFER_RECOMPUTE
                )
                node.meta["ac_graph_id"] = 0
        return min_cut_rematerialization_partition(joint, inputs, **kwargs)

    model, x = C9.make_model()
    by_course = export_joint(model, (x,), partition_fn=partition)
    assert set(activations(by_course)) == keep and sum(activations(by_course).values()) == nbytes
    assert products(by_torch) < products(by_course)


def test_are_the_knapsack_cases_the_items_torch_hands_its_solver():
    """10.3's visible cases are torch's own items on the lesson's model (bytes as a share of the
    budget's scale, FLOPs), at 0.25 and 0.1; at 0.5 a relaxed min-cut fits and no knapsack runs."""
    for budget in (0.25, 0.1):
        items = C.knapsack_items(*C9.make_model(), budget)
        assert items["memory"] == pytest.approx(ex10_3.LESSON_MEMORY)
        assert items["runtimes"] == ex10_3.LESSON_RUNTIMES and items["max_memory"] == budget
    assert C.knapsack_items(*C9.make_model(), 0.5) is None


def test_does_the_ban_truth_follow_the_flow_graphs_rules_when_a_rule_is_switched_off():
    """10.2's truth reads torch's flow graph; with the reduction rule off, mean loses its ban."""
    bans = C.ban_reasons(C.flow_graph(*C.normed_block(), ban_recompute_not_in_allowlist=False))
    assert bans["mean"] == "reduction op"
    lifted = C.ban_reasons(
        C.flow_graph(*C.normed_block(), ban_recompute_not_in_allowlist=False, ban_recompute_reductions=False)
    )
    assert "mean" not in lifted and lifted["native_dropout"] == "random op"


# --- the production baseline: torchtitan's op-level policy, eager and compiled -------------

_TITAN_KEEPS = {
    "mm": 1024,  # wq's product, 16 x 16 floats
    "mm_2": 1024,  # wv's
    "_scaled_dot_product_flash_attention_for_cpu[0]": 1024,  # the attention's output
    "_scaled_dot_product_flash_attention_for_cpu[1]": 128,  # and its log-sum-exp
    "mm_4": 2048,  # w1's, 16 x 32
}


@functools.cache
def _op_level_run(label):
    from course.content import op_level_sac as S

    make = {
        "torchtitan": S.op_level_policy,
        "verbatim": functools.partial(S.op_level_policy, S.TORCHTITAN_SAVE_OPS),
        "every product": functools.partial(
            S.op_level_policy, {torch.ops.aten.mm.default}, every_second_product=False
        ),
    }[label]
    return S.eager_and_compiled(make)


def _plain_gradients():
    from course.content import op_level_sac as S

    block, x = S.attention_block()
    return torch.autograd.grad(block(x).sum(), [x, *block.parameters()])


@pytest.mark.parametrize("label", ["torchtitan", "verbatim", "every product"])
def test_do_eager_and_compiled_checkpointing_give_the_plain_blocks_gradients(label):
    """Whatever the policy keeps, both runs give what torch gives with no checkpoint at all."""
    run = _op_level_run(label)
    for side in ("eager", "compiled"):
        assert all(
            torch.allclose(a, b, atol=1e-6) for a, b in zip(run[side]["gradients"], _plain_gradients())
        )


def test_does_the_op_level_policy_keep_the_same_values_eager_and_compiled():
    """torchtitan's rule on the block: the 1st, 3rd and 5th products and the attention's two
    outputs, 5248 bytes, eager (torch's own storage says so) and compiled (each tagged
    MUST_SAVE); both rerun the 2nd and 4th products, gelu and the residual add; the compiled
    step calls context_fn while it traces, not after."""
    eager, compiled = _op_level_run("torchtitan")["eager"], _op_level_run("torchtitan")["compiled"]
    assert eager["saved"] == compiled["saved"] == _TITAN_KEEPS
    assert eager["stored"] == sum(_TITAN_KEEPS.values()) == 5248
    assert set(compiled["tags"].values()) == {"MUST_SAVE"}
    assert eager["reruns"] == compiled["reruns"] == {"add": 1, "gelu": 1, "mm": 2}
    assert compiled["compiles"] == 1 and compiled["context_fn calls"] == {"first step": 2, "second step": 0}


def test_does_torchtitans_list_as_written_leave_the_cpu_attention_to_be_recomputed():
    """The list names the GPU attention kernels; on the CPU the attention is another op, so
    with the list as written both runs rerun it, and keep only the three products."""
    from torch._functorch.partitioners import get_default_op_list

    from course.content import op_level_sac as S

    assert S.CPU_ATTENTION not in S.TORCHTITAN_SAVE_OPS
    assert {op.default for op in get_default_op_list().compute_intensive_ops} <= S.TORCHTITAN_SAVE_OPS
    run = _op_level_run("verbatim")
    assert run["eager"]["saved"] == {k: v for k, v in _TITAN_KEEPS.items() if k.startswith("mm")}
    for side in ("eager", "compiled"):
        assert run[side]["reruns"]["_scaled_dot_product_flash_attention_for_cpu"] == 1


def test_does_every_product_keep_one_more_eager_and_a_generator_state_compiled_on_2_13_only():
    """Saving every product, eager keeps w2's product (no backward reads it) and compiled does
    not; to rerun the attention, torch 2.13's partitioner saves the CPU generator's state (the
    op is tagged nondeterministic_seeded), 2.14 and 2.15's do not (its dropout_p is 0)."""
    release = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    eager, compiled = _op_level_run("every product")["eager"], _op_level_run("every product")["compiled"]
    products = {k: v for k, v in compiled["saved"].items() if k != "RNG state"}
    assert set(eager["saved"]) - set(products) == {"mm_5"} and set(products) < set(eager["saved"])
    assert ("RNG state" in compiled["saved"]) == (release < (2, 14))
    if release < (2, 14):
        assert compiled["saved"]["RNG state"] == torch.get_rng_state().nbytes
    assert (
        eager["reruns"]
        == compiled["reruns"]
        == {"_scaled_dot_product_flash_attention_for_cpu": 1, "add": 1, "gelu": 1}
    )
