"""Lesson 10, the compiler's memory decisions: are the reference solutions and the checks'
truths right, judged by torch?

The generic tests (tests/test_checks.py, tests/test_catalogue_grade.py) show that each
registered solution passes its own check and every known wrong answer fails with its hint;
these ask whether the oracles agree with torch on more programs, by other routes.
"""

from __future__ import annotations

import collections
import copy
import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._functorch import config as functorch_config
from torch._functorch._activation_offloading import activation_offloading as ao
from torch.utils._ordered_set import OrderedSet

from course.checks.lesson10 import ex10_1_predicted_recomputed as ex10_1
from course.checks.lesson10 import ex10_2_choose_offload as ex10_2
from course.checks.lesson10 import ex10_3_offload_pass as ex10_3
from course.checks.lesson10 import ex10_5_knapsack as ex10_5
from course.checks.lesson10 import ex10_6_predicted_schedule as ex10_6
from course.checks.solutions import lesson10 as solutions
from course.content import lesson09 as C9
from course.content import lesson10 as C
from course.fx_utils import get_buffer_nodes, get_param_nodes

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


def _run_partitioned(jd, x):
    outs = jd.fw_module(*jd.params.values(), x)
    user, saved = outs[: jd.num_fwd_outputs], outs[jd.num_fwd_outputs :]
    return jd.bw_module(*saved, 2 * user[0])[: len(jd.params)]


@pytest.mark.parametrize("model_name, last_layer", [("lesson", "2"), ("four blocks", "3"), ("float64", "1")])
@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_does_torch_accept_the_offload_choice_and_keep_the_gradients(model_name, partitioner, last_layer):
    jd = C.partitioned(model_name, partitioner)
    fw, bw = jd.fw_module, jd.bw_module
    chosen = solutions.choose_offload(fw, last_layer, 0)
    assert chosen
    for node in fw.graph.output_node().args[0]:
        node.meta["should_offload"] = node.name in chosen
    static = OrderedSet(get_param_nodes(fw.graph))
    ao.enable_activation_offloading(fw, bw, jd.num_fwd_outputs, static)
    fw.recompile()
    bw.recompile()
    moved = {n.args[0].name for n in fw.graph.nodes if n.name.startswith(ao.CPU_OFFLOAD_PREFIX)}
    assert moved == chosen  # torch's can_offload refused none of them
    model, x = C.OFFLOAD_MODELS[model_name]()
    reference = copy.deepcopy(model)
    reference(x).pow(2).sum().backward()
    for g, p in zip(_run_partitioned(jd, x), reference.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 5000), st.integers(0, 5000))
def test_does_a_higher_threshold_choose_a_subset(a, b):
    low, high = sorted((a, b))
    fw = C.partitioned("lesson", "min_cut").fw_module
    sizes = {
        n.name: n.meta["val"].nbytes
        for n in fw.graph.nodes
        if "val" in n.meta and hasattr(n.meta["val"], "nbytes")
    }
    at_low, at_high = solutions.choose_offload(fw, "2", low), solutions.choose_offload(fw, "2", high)
    assert at_high <= at_low and all(sizes[n] >= high for n in at_high)


def _device_puts(gm):
    return [
        n
        for n in gm.graph.nodes
        if n.op == "call_function" and n.target == torch.ops.prims.device_put.default
    ]


@pytest.mark.parametrize(
    "model_name, last_layer", [("lesson", "2"), ("two readers", "1"), ("buffers", "1"), ("float64", "1")]
)
@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_does_the_offload_pass_move_what_torchs_pass_moves_and_keep_eagers_gradients(
    model_name, partitioner, last_layer
):
    """10.3's reference against torch: the values it copies are the ones torch's own
    enable_activation_offloading copies when tagged with the same choice; every backward reader
    of a moved value reads a reload; the graphs give eager's output and gradients."""
    ours = C.partitioned(model_name, partitioner)
    solutions.offload_pass(ours.fw_module, ours.bw_module, ours.num_fwd_outputs, last_layer, 0)
    moved = {n.args[0].name for n in _device_puts(ours.fw_module)}
    assert (
        moved == solutions.choose_offload(C.partitioned(model_name, partitioner).fw_module, last_layer, 0)
        and moved
    )

    theirs = C.partitioned(model_name, partitioner)
    for node in theirs.fw_module.graph.output_node().args[0]:
        node.meta["should_offload"] = node.name in moved
    static = OrderedSet([*get_param_nodes(theirs.fw_module.graph)])
    ao.enable_activation_offloading(theirs.fw_module, theirs.bw_module, theirs.num_fwd_outputs, static)
    assert {n.args[0].name for n in _device_puts(theirs.fw_module)} == moved
    assert len(_device_puts(ours.bw_module)) == len(_device_puts(theirs.bw_module)) == len(moved)
    # each copy sits where torch's does (after the value's last reader): the same forward peak,
    # and no copy before a reader of its value (what tells a copy right after its value apart)
    assert C.forward_device_peak(ours.fw_module) == C.forward_device_peak(theirs.fw_module)
    assert C.offloads_before_a_reader(ours.fw_module) == C.offloads_before_a_reader(theirs.fw_module) == []
    assert C.held_for_backward(ours.fw_module, ours.num_fwd_outputs) == C.held_for_backward(
        theirs.fw_module, theirs.num_fwd_outputs
    )

    held = ours.bw_module.graph.find_nodes(op="placeholder")
    saved = ours.fw_module.graph.output_node().args[0][ours.num_fwd_outputs :]
    for node, placeholder in zip(saved, held):
        if node in _device_puts(ours.fw_module):
            assert [u.target for u in placeholder.users] == [torch.ops.prims.device_put.default]

    model, x = C.OFFLOAD_MODELS[model_name]()
    reference = copy.deepcopy(model)
    out = reference(x)
    out.pow(2).sum().backward()
    outs = ours.fw_module(*ours.params.values(), *ours.buffers.values(), x)
    grads = ours.bw_module(*outs[ours.num_fwd_outputs :], 2 * outs[0])[: len(ours.params)]
    assert torch.allclose(outs[0], out, atol=1e-6)
    for g, p in zip(grads, reference.parameters()):
        assert torch.allclose(g, p.grad, atol=1e-6)


def test_is_the_two_reader_case_read_twice_in_the_backward_and_the_buffer_saved():
    """The hidden cases of 10.3 sit on the boundaries they name, as torch's partitioners build them."""
    for partitioner in ("default", "min_cut"):
        jd = C.partitioned("two readers", partitioner)
        readers = {p.name: len(p.users) for p in jd.bw_module.graph.find_nodes(op="placeholder")}
        assert readers["gelu"] == 2
        jd = C.partitioned("buffers", partitioner)
        saved = jd.fw_module.graph.output_node().args[0][jd.num_fwd_outputs :]
        buffers = set(get_buffer_nodes(jd.fw_module.graph))
        assert buffers and buffers <= set(saved)
    sizes = {
        n.name: n.meta["val"].nbytes
        for n in C.partitioned("lesson", "default").fw_module.graph.nodes
        if n.name in ("add", "add_1")
    }
    assert sizes == {"add": 512, "add_1": 512}  # the hidden thresholds 512 and 513 sit on them


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


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_are_the_backward_placeholders_named_as_the_forward_returns_them(partitioner):
    """What 10.3 matches by: each saved value's backward placeholder has the forward node's name."""
    for model_name in ("lesson", "two readers", "buffers", "probed"):
        jd = C.partitioned(model_name, partitioner)
        saved = [n.name for n in jd.fw_module.graph.output_node().args[0][jd.num_fwd_outputs :]]
        held = {n.name for n in jd.bw_module.graph.find_nodes(op="placeholder")}
        assert set(saved) <= held


def test_do_saved_sizes_come_last_in_the_forward_and_first_in_the_backward_under_dynamic_shapes():
    """Why 10.3 matches by name: compiled with dynamic=True, the forward returns its saved sizes
    after the saved tensors and the backward takes them first, so positions do not line up."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    graphs = {}

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs[kind] = gm
            return gm

        return compiler

    model, _ = C9.make_model()
    torch._dynamo.reset()
    compiled = torch.compile(
        model,
        dynamic=True,
        backend=aot_autograd(
            fw_compiler=keep("fw"), bw_compiler=keep("bw"), partition_fn=min_cut_rematerialization_partition
        ),
    )
    compiled(torch.randn(5, 16)).pow(2).sum().backward()
    fw_out = graphs["fw"].graph.output_node().args[0]
    bw_in = graphs["bw"].graph.find_nodes(op="placeholder")
    saved = [n.name for n in fw_out[1:]]
    assert [n.name for n in bw_in[: len(saved)]] != saved  # by position: misaligned
    assert set(saved) <= {n.name for n in bw_in}  # by name: all there
    sym_first = [not isinstance(n.meta.get("val"), torch.Tensor) for n in bw_in[: len(saved)]]
    assert sym_first[0]  # the backward starts with a size


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_does_torch_refuse_the_user_output_the_probed_case_offers(partitioner):
    """10.2's probed case: a user output computed before the last layer, which torch's
    choose_offload_sets refuses (a model output) and the descriptor filter leaves out."""
    jd = C.partitioned("probed", partitioner)
    fw = jd.fw_module
    user = [n for n in fw.graph.output_node().args[0][: jd.num_fwd_outputs]]
    probe = [n for n in user if n.target == torch.ops.aten.mul.Tensor]
    assert probe and probe[0].name not in solutions.choose_offload(fw, "1", 0)
    assert probe[0].name in ex10_2._chooses_among_every_output(fw, "1", 0)
    for node in fw.graph.nodes:
        node.meta["should_offload"] = node in probe
    ao.choose_offload_sets(fw, jd.num_fwd_outputs, OrderedSet(get_param_nodes(fw.graph)))
    assert not probe[0].meta.get("saved_for_offloading")


def test_does_the_meta_case_tell_the_value_device_from_a_hard_coded_cpu():
    """Traced on the meta device, the reference reloads to meta; the wrong answer to the CPU."""
    outcome = ex10_3._run_pass(solutions.offload_pass, "lesson, on meta", "min_cut", "2", 1024)
    wrong = ex10_3._run_pass(ex10_3._pass_reloading_to_the_cpu, "lesson, on meta", "min_cut", "2", 1024)
    assert outcome["devices the backward's copies go to"] == ["meta"]
    assert wrong["devices the backward's copies go to"] == ["cpu"]


def test_is_the_forward_peak_lower_with_the_copies_after_their_last_reader():
    """The liveness count: copies placed after the last reader lower the forward's peak to
    torch's; copies placed at the end leave it where it was without offload."""
    plain = C.partitioned("lesson", "min_cut")
    at_end = C.partitioned("lesson", "min_cut")
    ex10_3._pass_copying_at_the_end(at_end.fw_module, at_end.bw_module, at_end.num_fwd_outputs, "2", 1024)
    ours = C.partitioned("lesson", "min_cut")
    solutions.offload_pass(ours.fw_module, ours.bw_module, ours.num_fwd_outputs, "2", 1024)
    peaks = [C.forward_device_peak(jd.fw_module) for jd in (plain, at_end, ours)]
    assert peaks[0] == peaks[1] > peaks[2]


def test_does_only_the_placement_item_tell_a_copy_right_after_its_value():
    """A copy right after its value leaves the value live to its last reader all the same, so
    the forward's peak by liveness is the reference's; the placement item names every moved
    value (each has a reader after its copy), the reference's none."""
    right_after = C.partitioned("lesson", "min_cut")
    ex10_3._pass_copying_right_after_the_value(
        right_after.fw_module, right_after.bw_module, right_after.num_fwd_outputs, "2", 1024
    )
    ours = C.partitioned("lesson", "min_cut")
    solutions.offload_pass(ours.fw_module, ours.bw_module, ours.num_fwd_outputs, "2", 1024)
    assert C.forward_device_peak(right_after.fw_module) == C.forward_device_peak(ours.fw_module)
    moved = sorted(n.args[0].name for n in _device_puts(ours.fw_module))
    assert C.offloads_before_a_reader(right_after.fw_module) == moved and moved
    assert C.offloads_before_a_reader(ours.fw_module) == []


def test_does_a_compiled_forward_name_no_parameter_and_need_matching_by_name():
    """The compiled case of 10.2 and 10.3: every placeholder is a PlainAOTInput, so
    get_named_param_nodes finds none; the reference matches placeholders by name where a
    position-matching pass reloads other placeholders."""
    from course.fx_utils import get_named_param_nodes

    jd = C.compiled_partition("lesson")
    descs = {type(n.meta["desc"]).__name__ for n in jd.fw_module.graph.find_nodes(op="placeholder")}
    assert descs == {"PlainAOTInput"} and get_named_param_nodes(jd.fw_module.graph) == {}
    ours = ex10_3._run_pass(solutions.offload_pass, "lesson", "compiled, dynamic", "2", 1024)
    by_position = ex10_3._run_pass(
        ex10_3._pass_matching_by_position, "lesson", "compiled, dynamic", "2", 1024
    )
    assert ours["backward placeholders reloaded"] == ours["offloaded"]
    assert by_position["backward placeholders reloaded"] != by_position["offloaded"]


def test_are_the_knapsack_cases_the_items_torch_hands_its_solver():
    """10.5's visible cases are torch's own items on the lesson's model (bytes as a share of the
    budget's scale, FLOPs), at 0.25 and 0.1; at 0.5 a relaxed min-cut fits and no knapsack runs."""
    for budget in (0.25, 0.1):
        items = C.knapsack_items(*C9.make_model(), budget)
        assert items["memory"] == pytest.approx(ex10_5.LESSON_MEMORY)
        assert items["runtimes"] == ex10_5.LESSON_RUNTIMES and items["max_memory"] == budget
    assert C.knapsack_items(*C9.make_model(), 0.5) is None


def test_does_the_ban_truth_follow_the_flow_graphs_rules_when_a_rule_is_switched_off():
    """10.4's truth reads torch's flow graph; with the reduction rule off, mean loses its ban."""
    bans = C.ban_reasons(C.flow_graph(*C.normed_block(), ban_recompute_not_in_allowlist=False))
    assert bans["mean"] == "reduction op"
    lifted = C.ban_reasons(
        C.flow_graph(*C.normed_block(), ban_recompute_not_in_allowlist=False, ban_recompute_reductions=False)
    )
    assert "mean" not in lifted and lifted["native_dropout"] == "random op"


@settings(max_examples=8, deadline=None)
@given(
    st.sets(st.sampled_from(("addmm", "gelu", "addmm_2", "gelu_1", "addmm_4", "gelu_2")), min_size=1),
    st.booleans(),
)
def test_does_torchs_offload_schedule_follow_the_rules_10_6_teaches(offloaded, sink_wait):
    """10.6's truth is torch's pass; on any set of tagged values, each copy starts right after the
    value's last forward reader (read from the partition, not from the pass), and each wait sits
    beside its copy, or after every compute node when sink_wait is on."""
    order = ex10_6.scheduled_forward(sink_wait, offloaded=tuple(offloaded))
    fw = C.partitioned("lesson", "min_cut").fw_module
    compute = [n.name for n in fw.graph.nodes if n.op == "call_function"]
    readers = {n.name: [u.name for u in n.users if u.op == "call_function"] for n in fw.graph.nodes}
    schedule = ex10_6.read_schedule(order)
    assert set(schedule) == offloaded
    for value, (copy_after, wait_before) in schedule.items():
        assert copy_after == max(readers[value], key=compute.index)
        if sink_wait:
            assert wait_before == "output"
        else:
            next_compute = [n for n in compute if compute.index(n) > compute.index(copy_after)]
            assert wait_before == (next_compute[0] if next_compute else "output")
            assert order.index("cpu_offload_" + value) == order.index("async_cpu_offload_" + value) + 1


def test_is_10_6s_reading_of_the_schedule_blind_to_offload_nodes_side_by_side():
    """Two copies started after the same node, or waits gathered at the end, read the same
    pair as one would alone: the offload nodes are skipped when reading the neighbours."""
    order = ["a", "b", "async_cpu_offload_a", "async_cpu_offload_b", "c", "cpu_offload_a", "cpu_offload_b"]
    assert ex10_6.read_schedule(order) == {"a": ("b", "output"), "b": ("b", "output")}


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
