"""What several of lesson 11's exercise checks share."""

from __future__ import annotations

import functools
import sys
import types

import torch

from course.aot import descriptors as cd
from course.checks.running import remembered_for
from course.content.lesson10 import (
    partitioned,
)

# --- Speed: what the checks trace once ---------------------------------------------------------------


#
# A failing check runs every known wrong answer on every case to find the hint. Two things keep
# that within seconds: each case's partition is traced once and handed to every call as a copy
# (an answer edits the graphs in place), and the outcome of a known answer of ours, which leaves
# nothing behind and never changes, is computed once per case.


@functools.cache
def _partition_once(model_name: str, partitioner: str, budget: float):
    return partitioned(model_name, partitioner)


def fresh_partition(model_name: str, partitioner: str):
    """A partition of ``OFFLOAD_MODELS[model_name]`` to hand an answer: its graphs and
    parameters are copies of the one partition traced for the case, under the current
    ``activation_memory_budget``."""
    from torch._functorch import config as functorch_config

    jd = _partition_once(model_name, partitioner, functorch_config.activation_memory_budget)
    return types.SimpleNamespace(
        fw_module=_copy_module(jd.fw_module),
        bw_module=_copy_module(jd.bw_module),
        num_fwd_outputs=jd.num_fwd_outputs,
        params={k: v.detach().clone() for k, v in jd.params.items()},
        buffers={k: v.detach().clone() for k, v in jd.buffers.items()},
    )


def _copy_module(gm):
    """A GraphModule over a copy of ``gm``'s graph: the same node names, each node's metadata
    copied one level deep (an answer may add keys), the fake values shared (a compiled graph's
    cannot be deep-copied)."""
    graph = torch.fx.Graph()
    returned, output = graph.graph_copy(gm.graph, {}, return_output_node=True)
    graph.output(returned).meta = dict(output.meta)
    return torch.fx.GraphModule(gm, graph)


#: ``run``, computed once per case for our own answers to 11.1 and 11.2 (none leaves anything behind).
once_per_case = remembered_for("11.1", "11.2")


def is_view_node(node) -> bool:
    return node.op == "call_function" and getattr(node.target, "is_view", False)


def saved_for_backward(fw_module):
    out = fw_module.graph.output_node()
    return [
        n
        for n, d in zip(out.args[0], out.meta["desc"])
        if isinstance(cd.from_torch(d), cd.SavedForBackwardsAOTOutput)
    ]


def computed_from_last_layer(node, last_layer) -> bool:
    """Whether ``node`` is computed, directly or not, from a parameter of ``last_layer``: a
    walk up its inputs (the part of 11.1 the wrong answers below get right)."""
    stack = [node]
    while stack:
        n = stack.pop()
        desc = n.meta.get("desc") if n.op == "placeholder" else None
        if (
            desc is not None
            and isinstance(cd.from_torch(desc), cd.ParamAOTInput)
            and desc.target.startswith(last_layer + ".")
        ):
            return True
        stack.extend(n.all_input_nodes)
    return False


def value_bytes(node) -> int:
    val = node.meta["val"]
    return val.numel() * val.element_size()


def choose_by_walking_forward(fw_module, last_layer, min_bytes):
    """A right answer written differently: mark every node downstream of the last layer's
    parameters in one walk over the graph, then filter the saved values."""
    tainted = set()
    for node in fw_module.graph.nodes:
        desc = node.meta.get("desc") if node.op == "placeholder" else None
        is_last_param = (
            desc is not None
            and isinstance(cd.from_torch(desc), cd.ParamAOTInput)
            and desc.target.split(".")[0] == last_layer
        )
        if is_last_param or any(i in tainted for i in node.all_input_nodes):
            tainted.add(node)
    keep_out = lambda n: n.op == "placeholder" or is_view_node(n) or n in tainted  # noqa: E731
    return {
        n.name
        for n in saved_for_backward(fw_module)
        if not keep_out(n) and n.meta["val"].numel() * n.meta["val"].element_size() >= min_bytes
    }


def chooses_placeholders(fw_module, last_layer, min_bytes):
    """BAD: placeholders (the input, parameters) chosen with the activations."""
    return {
        n.name
        for n in saved_for_backward(fw_module)
        if not is_view_node(n)  # a view is left out, a placeholder is not
        and value_bytes(n) >= min_bytes
        and not computed_from_last_layer(n, last_layer)
    }


def chooses_the_last_layer(fw_module, last_layer, min_bytes):
    """BAD: the last layer's activations chosen too."""
    return {
        n.name
        for n in saved_for_backward(fw_module)
        if n.op != "placeholder" and not is_view_node(n) and value_bytes(n) >= min_bytes  # no last-layer test
    }


def chooses_views(fw_module, last_layer, min_bytes):
    """BAD: views (aten.t of a weight) chosen with the activations."""
    return {
        n.name
        for n in saved_for_backward(fw_module)
        if n.op != "placeholder"  # a placeholder is left out, a view is not
        and value_bytes(n) >= min_bytes
        and not computed_from_last_layer(n, last_layer)
    }


def chooses_four_bytes_per_element(fw_module, last_layer, min_bytes):
    """BAD: every value sized at 4 bytes an element, whatever its dtype (float64 counted at half)."""
    return {
        n.name
        for n in saved_for_backward(fw_module)
        if n.op != "placeholder"
        and not is_view_node(n)
        and n.meta["val"].numel() * 4 >= min_bytes
        and not computed_from_last_layer(n, last_layer)
    }


#: torch's functions that insert the copies and reloads (activation_offloading.py, 2.13-2.15);
#: its helpers that only read a graph (``_find_all_effective_users``, ``can_offload``) stay allowed.
TORCHS_SURGERY = (
    "enable_activation_offloading",
    "offload_chosen_sets",
    "offload_chosen_sets_async",
    "offload_activation_fw",
    "offload_activation_fw_async",
    "reload_activation_bw",
    "reload_activation_bw_async",
)


def torchs_surgery_runs(call) -> bool:
    """Whether torch's offloading surgery (any of ``TORCHS_SURGERY``) ran during ``call()``:
    11.2 asks for that surgery written by hand."""
    from torch._functorch._activation_offloading import activation_offloading as ao

    surgery = {getattr(ao, name).__code__ for name in TORCHS_SURGERY if hasattr(ao, name)}
    ran, previous = [], sys.getprofile()

    def watch(frame, event, arg):
        if event == "call" and frame.f_code in surgery:
            ran.append(True)

    sys.setprofile(watch)
    try:
        call()
    finally:
        sys.setprofile(previous)
    return bool(ran)
