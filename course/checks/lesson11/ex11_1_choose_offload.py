"""Exercise 11.1, choose what an offloading pass moves: how a call is run and observed, the oracle, the
visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

from course.checks import case, exercise, wrong
from course.checks.lesson11._shared import (
    choose_by_walking_forward,
    chooses_four_bytes_per_element,
    chooses_placeholders,
    chooses_the_last_layer,
    chooses_views,
    computed_from_last_layer,
    fresh_partition,
    is_view_node,
    once_per_case,
    saved_for_backward,
    value_bytes,
)
from course.checks.solutions.lesson11 import (
    choose_offload,
)


def _graph_state(fw_module) -> tuple:
    """What a look at the graph must leave as it was: its code and every node's metadata keys."""
    return fw_module.code, [
        (n.name, sorted(n.meta), n.meta.get("should_offload")) for n in fw_module.graph.nodes
    ]


@once_per_case
def _run_choice(answer, model_name, partitioner, last_layer, min_bytes):
    fw = fresh_partition(model_name, partitioner).fw_module
    before = _graph_state(fw)
    chosen = answer(fw, last_layer, min_bytes)
    return {"chosen": sorted(chosen), "the graph left as it was": _graph_state(fw) == before}


def _chooses_small_values(fw_module, last_layer, min_bytes):
    """BAD: min_bytes ignored: values of any size chosen."""
    return {
        n.name
        for n in saved_for_backward(fw_module)
        if n.op != "placeholder" and not is_view_node(n) and not computed_from_last_layer(n, last_layer)
    }


def _chooses_strictly_larger(fw_module, last_layer, min_bytes):
    """BAD: a value of exactly min_bytes left out."""
    return {
        n.name
        for n in saved_for_backward(fw_module)
        if n.op != "placeholder"
        and not is_view_node(n)
        and value_bytes(n) > min_bytes  # > where the spec says at least
        and not computed_from_last_layer(n, last_layer)
    }


def _chooses_among_every_output(fw_module, last_layer, min_bytes):
    """BAD: no descriptor filter: the model's own outputs chosen with the saved values."""
    return {
        n.name
        for n in fw_module.graph.output_node().args[0]  # every output, the user's included
        if n.op != "placeholder"
        and not is_view_node(n)
        and value_bytes(n) >= min_bytes
        and not computed_from_last_layer(n, last_layer)
    }


def _sizes_with_nbytes(fw_module, last_layer, min_bytes):
    """BAD: sizes read with .nbytes, which a symbolic size (a dynamic-shape graph) refuses."""
    return {
        n.name
        for n in saved_for_backward(fw_module)
        if n.op != "placeholder"
        and not is_view_node(n)
        and n.meta["val"].nbytes >= min_bytes  # raises on a graph compiled with dynamic=True
        and not computed_from_last_layer(n, last_layer)
    }


def _chooses_and_tags(fw_module, last_layer, min_bytes):
    """BAD: the right choice, left behind as tags on the graph it was handed."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    for node in fw_module.graph.nodes:
        if node.name in chosen:
            node.meta["should_offload"] = True  # the caller's graph, changed
    return chosen


exercise(
    "11.1",
    name="choose_offload",
    title="Choose what an offloading pass moves: activations only, no small ones, not the last layer",
    solution=choose_offload,
    run=_run_choice,
    points=3,
    timeout=30,  # each case partitions a model; the first also warms up the tracer
    cases=[
        case(
            "lesson",
            "min_cut",
            "2",
            1024,
            label="the lesson's model, min-cut, last layer '2', min_bytes=1024",
        ),
        case("lesson", "min_cut", "2", 0, label="the lesson's model, min-cut, last layer '2', min_bytes=0"),
    ],
    hidden=[
        case("lesson", "default", "2", 1024, label="the lesson's model, default partitioner"),
        case("four blocks", "min_cut", "3", 500, label="four narrower blocks, min_bytes=500"),
        case("float64", "default", "1", 0, label="two blocks in float64"),
        case(
            "float64", "min_cut", "1", 512, label="two blocks in float64, min_bytes=512: 8 bytes an element"
        ),
        case(
            "lesson",
            "min_cut",
            "2",
            2048,
            label="min_bytes=2048: the 2048-byte activations sit exactly on it",
        ),
        case("probed", "min_cut", "1", 0, label="a model that also returns twice its first block's output"),
        case(
            "lesson",
            "compiled, dynamic",
            "2",
            1024,
            label="a forward from torch.compile: parameters come in as plain inputs, so no descriptor "
            "names the last layer",
        ),
    ],
    wrong=[
        wrong(
            _chooses_strictly_larger,
            "a value of exactly min_bytes is large enough to move: the rule is at least min_bytes.",
        ),
        wrong(
            _chooses_among_every_output,
            "you chose among all of the forward's outputs: the first ones are the model's own "
            "outputs, which the caller holds after forward anyway (torch's pass refuses them). "
            "Keep only the outputs whose descriptor is a SavedForBackwardsAOTOutput.",
        ),
        wrong(
            _sizes_with_nbytes,
            "tensor.nbytes needs concrete sizes, and a graph compiled with dynamic shapes has a "
            "symbolic one (the batch size): count the bytes as numel() * element_size(), which "
            "works on both.",
        ),
        wrong(
            _chooses_and_tags,
            "your choice is right, but you left marks on the graph you were handed "
            "(node.meta['should_offload']): a choice only looks, and whoever runs a pass next "
            "on that graph would read your marks. Build the set without changing the graph.",
        ),
        wrong(
            chooses_placeholders,
            "you chose placeholders: a parameter (or the input) is saved for backward but lives "
            "on the device anyway, held by the module or the caller; moving a copy frees nothing.",
        ),
        wrong(
            chooses_views,
            "you chose views (aten.t of a weight): a view shares its base's memory, so copying "
            "it frees nothing, and torch's pass refuses to offload views.",
        ),
        wrong(
            chooses_four_bytes_per_element,
            "a value's size depends on its dtype: a float64 element takes 8 bytes, not 4, so a "
            "value at min_bytes looked smaller to you than it is. Count numel() * element_size().",
        ),
        wrong(
            _chooses_small_values,
            "small tensors stay: a copy below min_bytes costs more in latency than it frees. "
            "Size a value from node.meta['val'].",
        ),
        wrong(
            chooses_the_last_layer,
            "the last layer stays: backward needs its activations first, right after forward "
            "ends, so there is no time to hide the copy. Leave out values computed from the last "
            "layer's parameters.",
        ),
    ],
    right=[choose_by_walking_forward],
    hint="start from the values the forward returns for backward (their descriptors say which), "
    "and keep only the ones whose copy would free device memory in time to matter.",
)
