"""Lesson 11, offloading as a graph pass: are the reference solutions and the checks'
truths right, judged by torch?

The generic tests (tests/test_checks.py, tests/test_catalogue_grade.py) show that each
registered solution passes its own check and every known wrong answer fails with its hint;
these ask whether the oracles agree with torch on more programs, by other routes.
"""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._functorch._activation_offloading import activation_offloading as ao
from torch.utils._ordered_set import OrderedSet

from course.checks.lesson11 import ex11_1_choose_offload as ex11_1
from course.checks.lesson11 import ex11_2_offload_pass as ex11_2
from course.checks.lesson11 import ex11_3_predicted_schedule as ex11_3
from course.checks.solutions import lesson11 as solutions
from course.content import lesson09 as C9
from course.content import lesson10 as C
from course.fx_utils import get_buffer_nodes, get_param_nodes

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


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
    """11.2's reference against torch: the values it copies are the ones torch's own
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
    """The hidden cases of 11.2 sit on the boundaries they name, as torch's partitioners build them."""
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


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_are_the_backward_placeholders_named_as_the_forward_returns_them(partitioner):
    """What 11.2 matches by: each saved value's backward placeholder has the forward node's name."""
    for model_name in ("lesson", "two readers", "buffers", "probed"):
        jd = C.partitioned(model_name, partitioner)
        saved = [n.name for n in jd.fw_module.graph.output_node().args[0][jd.num_fwd_outputs :]]
        held = {n.name for n in jd.bw_module.graph.find_nodes(op="placeholder")}
        assert set(saved) <= held


def test_do_saved_sizes_come_last_in_the_forward_and_first_in_the_backward_under_dynamic_shapes():
    """Why 11.2 matches by name: compiled with dynamic=True, the forward returns its saved sizes
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
    """11.1's probed case: a user output computed before the last layer, which torch's
    choose_offload_sets refuses (a model output) and the descriptor filter leaves out."""
    jd = C.partitioned("probed", partitioner)
    fw = jd.fw_module
    user = [n for n in fw.graph.output_node().args[0][: jd.num_fwd_outputs]]
    probe = [n for n in user if n.target == torch.ops.aten.mul.Tensor]
    assert probe and probe[0].name not in solutions.choose_offload(fw, "1", 0)
    assert probe[0].name in ex11_1._chooses_among_every_output(fw, "1", 0)
    for node in fw.graph.nodes:
        node.meta["should_offload"] = node in probe
    ao.choose_offload_sets(fw, jd.num_fwd_outputs, OrderedSet(get_param_nodes(fw.graph)))
    assert not probe[0].meta.get("saved_for_offloading")


def test_does_the_meta_case_tell_the_value_device_from_a_hard_coded_cpu():
    """Traced on the meta device, the reference reloads to meta; the wrong answer to the CPU."""
    outcome = ex11_2._run_pass(solutions.offload_pass, "lesson, on meta", "min_cut", "2", 1024)
    wrong = ex11_2._run_pass(ex11_2._pass_reloading_to_the_cpu, "lesson, on meta", "min_cut", "2", 1024)
    assert outcome["devices the backward's copies go to"] == ["meta"]
    assert wrong["devices the backward's copies go to"] == ["cpu"]


def test_is_the_forward_peak_lower_with_the_copies_after_their_last_reader():
    """The liveness count: copies placed after the last reader lower the forward's peak to
    torch's; copies placed at the end leave it where it was without offload."""
    plain = C.partitioned("lesson", "min_cut")
    at_end = C.partitioned("lesson", "min_cut")
    ex11_2._pass_copying_at_the_end(at_end.fw_module, at_end.bw_module, at_end.num_fwd_outputs, "2", 1024)
    ours = C.partitioned("lesson", "min_cut")
    solutions.offload_pass(ours.fw_module, ours.bw_module, ours.num_fwd_outputs, "2", 1024)
    peaks = [C.forward_device_peak(jd.fw_module) for jd in (plain, at_end, ours)]
    assert peaks[0] == peaks[1] > peaks[2]


def test_does_only_the_placement_item_tell_a_copy_right_after_its_value():
    """A copy right after its value leaves the value live to its last reader all the same, so
    the forward's peak by liveness is the reference's; the placement item names every moved
    value (each has a reader after its copy), the reference's none."""
    right_after = C.partitioned("lesson", "min_cut")
    ex11_2._pass_copying_right_after_the_value(
        right_after.fw_module, right_after.bw_module, right_after.num_fwd_outputs, "2", 1024
    )
    ours = C.partitioned("lesson", "min_cut")
    solutions.offload_pass(ours.fw_module, ours.bw_module, ours.num_fwd_outputs, "2", 1024)
    assert C.forward_device_peak(right_after.fw_module) == C.forward_device_peak(ours.fw_module)
    moved = sorted(n.args[0].name for n in _device_puts(ours.fw_module))
    assert C.offloads_before_a_reader(right_after.fw_module) == moved and moved
    assert C.offloads_before_a_reader(ours.fw_module) == []


def test_does_a_compiled_forward_name_no_parameter_and_need_matching_by_name():
    """The compiled case of 11.1 and 11.2: every placeholder is a PlainAOTInput, so
    get_named_param_nodes finds none; the reference matches placeholders by name where a
    position-matching pass reloads other placeholders."""
    from course.fx_utils import get_named_param_nodes

    jd = C.compiled_partition("lesson")
    descs = {type(n.meta["desc"]).__name__ for n in jd.fw_module.graph.find_nodes(op="placeholder")}
    assert descs == {"PlainAOTInput"} and get_named_param_nodes(jd.fw_module.graph) == {}
    ours = ex11_2._run_pass(solutions.offload_pass, "lesson", "compiled, dynamic", "2", 1024)
    by_position = ex11_2._run_pass(
        ex11_2._pass_matching_by_position, "lesson", "compiled, dynamic", "2", 1024
    )
    assert ours["backward placeholders reloaded"] == ours["offloaded"]
    assert by_position["backward placeholders reloaded"] != by_position["offloaded"]


@settings(max_examples=8, deadline=None)
@given(
    st.sets(st.sampled_from(("addmm", "gelu", "addmm_2", "gelu_1", "addmm_4", "gelu_2")), min_size=1),
    st.booleans(),
)
def test_does_torchs_offload_schedule_follow_the_rules_11_3_teaches(offloaded, sink_wait):
    """11.3's truth is torch's pass; on any set of tagged values, each copy starts right after the
    value's last forward reader (read from the partition, not from the pass), and each wait sits
    beside its copy, or after every compute node when sink_wait is on."""
    order = ex11_3.scheduled_forward(sink_wait, offloaded=tuple(offloaded))
    fw = C.partitioned("lesson", "min_cut").fw_module
    compute = [n.name for n in fw.graph.nodes if n.op == "call_function"]
    readers = {n.name: [u.name for u in n.users if u.op == "call_function"] for n in fw.graph.nodes}
    schedule = ex11_3.read_schedule(order)
    assert set(schedule) == offloaded
    for value, (copy_after, wait_before) in schedule.items():
        assert copy_after == max(readers[value], key=compute.index)
        if sink_wait:
            assert wait_before == "output"
        else:
            next_compute = [n for n in compute if compute.index(n) > compute.index(copy_after)]
            assert wait_before == (next_compute[0] if next_compute else "output")
            assert order.index("cpu_offload_" + value) == order.index("async_cpu_offload_" + value) + 1


def test_is_11_3s_reading_of_the_schedule_blind_to_offload_nodes_side_by_side():
    """Two copies started after the same node, or waits gathered at the end, read the same
    pair as one would alone: the offload nodes are skipped when reading the neighbours."""
    order = ["a", "b", "async_cpu_offload_a", "async_cpu_offload_b", "c", "cpu_offload_a", "cpu_offload_b"]
    assert ex11_3.read_schedule(order) == {"a": ("b", "output"), "b": ("b", "output")}
