"""Exercise 11.2, an offload pass that inserts the copies: how a call is run and observed, the oracle,
the visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from course.aot import fx_utils as cf
from course.checks import case, exercise, handed, wrong
from course.checks.lesson11._shared import (
    choose_by_walking_forward,
    chooses_four_bytes_per_element,
    chooses_placeholders,
    chooses_the_last_layer,
    chooses_views,
    fresh_partition,
    once_per_case,
    torchs_surgery_runs,
)
from course.checks.lesson11._surgery import (
    DEVICE_PUT,
    HOST,
    copies_to_host,
    direct_last_reader,
    last_reader,
    offload_these,
    reload_before_every_reader,
)
from course.checks.solutions.lesson11 import (
    choose_offload,
    offload_pass,
)
from course.content.lesson10 import (
    OFFLOAD_MODELS,
    device_put_parts,
    forward_device_peak,
    offloads_before_a_reader,
)


class _CountCopies(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.copies = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.copies += func == DEVICE_PUT
        return func(*args, **(kwargs or {}))


def _is_copy(node) -> bool:
    return node.op == "call_function" and node.target == DEVICE_PUT


def _origin(node) -> str:
    """The name of the value a chain of copies starts from."""
    while _is_copy(node):
        node = device_put_parts(node)[0]
    return node.name


@functools.cache
def _torch_refuses(model_name, partitioner, names):
    """The names among ``names`` (a sorted tuple) that torch's ``choose_offload_sets`` will not offload."""
    from torch._functorch._activation_offloading import activation_offloading as ao
    from torch.utils._ordered_set import OrderedSet

    jd = fresh_partition(model_name, partitioner)
    fw = jd.fw_module
    for node in fw.graph.output_node().args[0]:
        node.meta["should_offload"] = node.name in names
    static = OrderedSet([*cf.get_param_nodes(fw.graph), *cf.get_buffer_nodes(fw.graph)])
    ao.choose_offload_sets(fw, jd.num_fwd_outputs, static)
    return tuple(sorted(set(names) - {n.name for n in fw.graph.nodes if n.meta.get("saved_for_offloading")}))


def _offload_outcome(jd, x):
    """What the graphs look like after a pass, and what they compute."""
    fw, bw, k = jd.fw_module, jd.bw_module, jd.num_fwd_outputs
    returned = list(fw.graph.output_node().args[0])
    moved = {i: _origin(n) for i, n in enumerate(returned[k:]) if _is_copy(n)}
    held = {n.name: n for n in bw.graph.find_nodes(op="placeholder")}  # named as the forward's values
    direct = sorted(
        name for name in moved.values() if name in held and any(not _is_copy(u) for u in held[name].users)
    )
    reloaded = sorted(
        device_put_parts(n)[0].name
        for n in bw.graph.nodes
        if _is_copy(n) and device_put_parts(n)[0].op == "placeholder"
    )
    try:
        for gm in (fw, bw):
            gm.graph.lint()
    except Exception as e:  # noqa: BLE001 - what lint says becomes the outcome
        return {"offloaded": sorted(moved.values()), "graphs lint": f"{type(e).__name__}"}
    graphs = {
        "offloaded": sorted(moved.values()),
        "graphs lint": True,
        "forward returns a reloaded copy": sorted(
            _origin(n) for n in returned[k:] if _is_copy(n) and _is_copy(device_put_parts(n)[0])
        ),
        "backward readers of the host copy, not the reloaded value": direct,
        "devices the backward's copies go to": sorted(
            {str(device_put_parts(n)[1]) for n in bw.graph.nodes if _is_copy(n)}
        ),
        "backward placeholders reloaded": reloaded,
        "forward's device peak, bytes by liveness": forward_device_peak(fw),
        "offloads placed before a forward reader of their value": offloads_before_a_reader(fw),
    }
    if x.device.type == "meta" or not jd.params:  # compiled or on meta: the graphs are all there is to see
        return graphs
    with _CountCopies() as fwd_copies:
        outs = fw(*jd.params.values(), *jd.buffers.values(), x)
    with _CountCopies() as bwd_copies:
        grads = bw(*outs[k:], *(2 * o for o in outs[:k]))[: len(jd.params)]  # loss: sum of squares
    return {
        **graphs,
        "copies run in forward": fwd_copies.copies,
        "copies run in backward": bwd_copies.copies,
        "output": outs[0],
        "gradients": list(grads),
    }


@once_per_case
def _run_pass(answer, model_name, partitioner, last_layer, min_bytes):
    jd = fresh_partition(model_name, partitioner)
    model, x = OFFLOAD_MODELS[model_name]()
    with handed(params=list(jd.params.values())):
        by_torch = torchs_surgery_runs(
            lambda: answer(jd.fw_module, jd.bw_module, jd.num_fwd_outputs, last_layer, min_bytes)
        )
    outcome = {"torch's offloading pass did the surgery": by_torch, **_offload_outcome(jd, x)}
    outcome["torch's choose_offload_sets refuses"] = list(
        _torch_refuses(model_name, partitioner, tuple(outcome["offloaded"]))  # sorted: a cache key
    )
    return outcome


def _pass_moving_placeholders(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the placeholders among the saved values moved too."""
    chosen = chooses_placeholders(fw_module, last_layer, min_bytes)
    offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_moving_views(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the views of the weights among the saved values moved too."""
    chosen = chooses_views(fw_module, last_layer, min_bytes)
    offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_moving_the_last_layer(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the last layer's activations moved too."""
    chosen = chooses_the_last_layer(fw_module, last_layer, min_bytes)
    offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_strictly_larger(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: only values larger than min_bytes moved (one of exactly min_bytes stays)."""
    chosen = choose_offload(fw_module, last_layer, min_bytes + 1)
    offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_rewiring_one_reader(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: only the first backward node that reads a moved value reads the reload."""
    moved = copies_to_host(fw_module, num_fwd_outputs, choose_offload(fw_module, last_layer, min_bytes))
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for _k, node in moved:
        held = held_all[node.name]
        first_reader = next(n for n in bw_module.graph.nodes if held in n.all_input_nodes)
        with bw_module.graph.inserting_before(first_reader):
            reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
        first_reader.replace_input_with(held, reload)  # the other readers still read held
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_reloading_in_forward(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the forward copies each value to the host and straight back, and returns the
    device copy; the backward is left as it was."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    out = fw_module.graph.output_node()
    returned = list(out.args[0])
    for k, node in enumerate(returned[num_fwd_outputs:]):
        if node.name not in chosen:
            continue
        with fw_module.graph.inserting_before(out):
            on_host = fw_module.graph.call_function(DEVICE_PUT, (node, HOST))
            returned[num_fwd_outputs + k] = fw_module.graph.call_function(
                DEVICE_PUT, (on_host, node.meta["val"].device)
            )
    out.args = (tuple(returned),)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_without_recompile(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: both graphs edited right, and neither module recompiled."""
    moved = copies_to_host(fw_module, num_fwd_outputs, choose_offload(fw_module, last_layer, min_bytes))
    reload_before_every_reader(bw_module, moved)
    # and no gm.recompile(): the modules run the code generated before the edits


def _pass_reload_at_the_end(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: each reload made at the backward graph's insert point, its end, after its readers."""
    moved = copies_to_host(fw_module, num_fwd_outputs, choose_offload(fw_module, last_layer, min_bytes))
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for _k, node in moved:
        held = held_all[node.name]
        readers = [n for n in bw_module.graph.nodes if held in n.all_input_nodes]
        # no inserting_before(readers[0]): the reload goes to the graph's end
        reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
        for reader in readers:
            reader.replace_input_with(held, reload)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_reloading_to_the_cpu(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: every reload copies to the CPU, whatever device the value was on."""
    moved = copies_to_host(fw_module, num_fwd_outputs, choose_offload(fw_module, last_layer, min_bytes))
    reload_before_every_reader(bw_module, moved, device=torch.device("cpu"))  # not the value's
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_copying_at_the_end(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: every copy to the host made just before the forward's output node."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    out = fw_module.graph.output_node()
    returned = list(out.args[0])
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for k, node in enumerate(returned[num_fwd_outputs:]):
        if node.name not in chosen:
            continue
        with fw_module.graph.inserting_before(out):  # at the end: the value stays on the device to there
            returned[num_fwd_outputs + k] = fw_module.graph.call_function(DEVICE_PUT, (node, HOST))
        held = held_all[node.name]
        readers = [n for n in bw_module.graph.nodes if held in n.all_input_nodes]
        with bw_module.graph.inserting_before(readers[0]):
            reload = bw_module.graph.call_function(DEVICE_PUT, (held, node.meta["val"].device))
        for reader in readers:
            reader.replace_input_with(held, reload)
    out.args = (tuple(returned),)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_copying_right_after_the_value(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: each copy to the host right after its value, before the forward nodes that read it."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    reload_before_every_reader(
        bw_module, copies_to_host(fw_module, num_fwd_outputs, chosen, after=lambda value: value)
    )
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_ignoring_views(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: each copy after the value's last direct reader; a view's later readers not followed."""
    chosen = choose_offload(fw_module, last_layer, min_bytes)
    moved = copies_to_host(fw_module, num_fwd_outputs, chosen, after=direct_last_reader)
    reload_before_every_reader(bw_module, moved)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_counting_four_bytes(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: values sized at 4 bytes an element, whatever their dtype."""
    chosen = chooses_four_bytes_per_element(fw_module, last_layer, min_bytes)
    offload_these(fw_module, bw_module, num_fwd_outputs, chosen)


def _pass_calling_torchs_helpers(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the values marked, and torch's offload_activation_fw / reload_activation_bw left to
    insert the copies (the helpers its own pass calls)."""
    from torch._functorch._activation_offloading import activation_offloading as ao

    chosen = choose_offload(fw_module, last_layer, min_bytes)
    for node in fw_module.graph.output_node().args[0][num_fwd_outputs:]:
        node.meta["saved_for_offloading"] = node.name in chosen
    device = {n.name: n.meta["val"].device for n in fw_module.graph.nodes if n.name in chosen}
    ao.offload_activation_fw(fw_module.graph)
    for held in bw_module.graph.find_nodes(op="placeholder"):
        if held.name in chosen:
            held.meta.update(saved_for_offloading=True, original_device=device[held.name])
    ao.reload_activation_bw(bw_module.graph)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _pass_calling_torchs_pass(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: the values tagged, and torch's enable_activation_offloading left to do the surgery."""
    from torch._functorch._activation_offloading import activation_offloading as ao
    from torch.utils._ordered_set import OrderedSet

    chosen = choose_offload(fw_module, last_layer, min_bytes)
    for node in fw_module.graph.output_node().args[0]:
        node.meta["should_offload"] = node.name in chosen
    static = OrderedSet([*cf.get_param_nodes(fw_module.graph), *cf.get_buffer_nodes(fw_module.graph)])
    ao.enable_activation_offloading(fw_module, bw_module, num_fwd_outputs, static)
    for gm in (fw_module, bw_module):
        gm.recompile()


def _walked_pass(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes, after, held_for):
    """11.2 written differently: the rules walked forward once (11.1's other right answer), each
    offload placed after ``after(node)``, each reload right after the last placeholder, the
    placeholder ``held_for(placeholders, position, node)``, and the readers rewired one by one."""
    chosen = choose_by_walking_forward(fw_module, last_layer, min_bytes)
    out = fw_module.graph.output_node()
    held_all = list(bw_module.graph.find_nodes(op="placeholder"))
    new_args = []
    for position, node in enumerate(out.args[0]):
        if position < num_fwd_outputs or node.name not in chosen:
            new_args.append(node)
            continue
        with fw_module.graph.inserting_after(after(node)):
            new_args.append(fw_module.graph.call_function(DEVICE_PUT, args=(node, torch.device("cpu"))))
        held = held_for(held_all, position - num_fwd_outputs, node)
        with bw_module.graph.inserting_after(held_all[-1]):
            back = bw_module.graph.call_function(DEVICE_PUT, args=(held, node.meta["val"].device))
        for user in [u for u in held.users if u is not back]:
            user.replace_input_with(held, back)
    out.args = (tuple(new_args),)
    fw_module.graph.lint()
    bw_module.graph.lint()
    fw_module.recompile()
    bw_module.recompile()


def _pass_matching_by_position(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """BAD: each saved value's backward placeholder found by its position, not its name (and
    each offload right after its value)."""
    _walked_pass(
        *(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes),
        after=lambda node: node,
        held_for=lambda held_all, position, node: held_all[position],
    )


def _pass_copying_after_each_last_reader(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes):
    """A right answer written differently (see :func:`_walked_pass`): each offload after the last
    reader found walking the graph backwards, the placeholder found by name."""
    _walked_pass(
        *(fw_module, bw_module, num_fwd_outputs, last_layer, min_bytes),
        after=last_reader,
        held_for=lambda held_all, position, node: next(h for h in held_all if h.name == node.name),
    )


exercise(
    "11.2",
    name="offload_pass",
    title="An offload pass: choose the activations, insert the copies, rewire the backward",
    solution=offload_pass,
    run=_run_pass,
    points=4,
    timeout=30,
    cases=[
        case(
            "lesson",
            "min_cut",
            "2",
            1024,
            label="the lesson's model, min-cut, last layer '2', min_bytes=1024",
        ),
    ],
    hidden=[
        case(
            "lesson",
            "default",
            "2",
            512,
            label="the default partitioner, min_bytes=512: the 512-byte adds move",
        ),
        case(
            "lesson", "min_cut", "2", 513, label="min_bytes=513: the 512-byte adds sit just under it and stay"
        ),
        case(
            "two readers", "min_cut", "1", 0, label="a block whose saved gelu output two backward nodes read"
        ),
        case("buffers", "default", "1", 0, label="blocks with a buffer that backward needs"),
        case("float64", "min_cut", "1", 0, label="two blocks in float64"),
        case(
            "float64", "min_cut", "1", 512, label="two blocks in float64, min_bytes=512: 8 bytes an element"
        ),
        case(
            "a view read last",
            "min_cut",
            "1",
            0,
            label="a block that reads a view of its saved gelu output after the output's last direct reader",
        ),
        case(
            "lesson, on meta",
            "min_cut",
            "2",
            1024,
            label="the lesson's model traced on the meta device: the graphs are looked at, not run",
        ),
        case(
            "lesson",
            "compiled, dynamic",
            "2",
            1024,
            label="the lesson's model under torch.compile(dynamic=True): the batch size is saved last "
            "and read first, so positions do not line up (graphs looked at, not run)",
        ),
    ],
    wrong=[
        wrong(
            _pass_moving_placeholders,
            "you moved placeholders: the model's input (and, in a model with buffers, the buffers) "
            "is held by the caller or the module for the whole step, so a host copy frees nothing; "
            "torch's choose_offload_sets refuses them too. Offload computed activations only.",
        ),
        wrong(
            _pass_moving_views,
            "you moved the views of the weights (aten.t): their memory is the parameters', which "
            "stay on the device anyway, so the copy frees nothing. Leave views alone.",
        ),
        wrong(
            _pass_moving_the_last_layer,
            "you moved the last layer's activations: backward reads them first, right after forward "
            "ends, so no compute is left to hide their copies. Leave out what the last layer computes.",
        ),
        wrong(
            _pass_strictly_larger,
            "a value of exactly min_bytes is large enough to move: the rule is at least min_bytes.",
        ),
        wrong(
            _pass_rewiring_one_reader,
            "one backward node reads the reloaded value, but another still reads the host copy: "
            "when a saved value has several readers in the backward, every one of them must be "
            "rewired (replace_all_uses_with, keeping the reload's own input).",
        ),
        wrong(
            _pass_reloading_in_forward,
            "your forward copies each value to the host and straight back, and returns the device "
            "copy: the device holds it between forward and backward after all. The reload belongs "
            "in the backward graph, before the first node that reads the value.",
        ),
        wrong(
            _pass_without_recompile,
            "your graphs look right but never ran: a GraphModule keeps running the code generated "
            "when it was built until you call recompile() after changing its graph (see the "
            "copies run in forward and backward).",
        ),
        wrong(
            _pass_reloading_to_the_cpu,
            "your reloads copy to the CPU whatever device the value came from: on this CPU that "
            "looks right, but on a GPU the backward would compute on host memory (see the "
            "devices on the case traced on the meta device). Reload each value to its own "
            "device, node.meta['val'].device.",
        ),
        wrong(
            _pass_copying_at_the_end,
            "your copies to the host all sit at the end of the forward, so every moved value "
            "stays on the device to the last node: the forward's peak is what it was without "
            "offload (see the peak line). Copy each value right after its last reader in the "
            "forward (a view's readers count as its base's), where the device can free it.",
        ),
        wrong(
            _pass_copying_right_after_the_value,
            "each copy to the host sits right after its value, but forward nodes after it still "
            "read the value (see the offloads placed before a reader): the device must hold it "
            "until the last of them has run, so the copy frees nothing where it stands. Place each "
            "copy after the value's last reader in the forward (a view's readers count as its "
            "base's), where the device can free it.",
        ),
        wrong(
            _pass_calling_torchs_pass,
            "torch's enable_activation_offloading did the surgery: this exercise is that "
            "surgery, written by you. Insert the device_put nodes and rewire the readers yourself.",
        ),
        wrong(
            _pass_calling_torchs_helpers,
            "torch's offloading helpers inserted the copies and reloads (the functions its own pass "
            "calls): this exercise is that surgery, written by you. Insert the device_put nodes and "
            "rewire the readers yourself.",
        ),
        wrong(
            _pass_ignoring_views,
            "a copy to the host sits after the value's last direct reader, but a view of the value "
            "is read later (see the offloads placed before a reader): a view shares the value's "
            "memory, so the device holds it until the view's readers have run. Count a view's "
            "readers as the value's.",
        ),
        wrong(
            _pass_counting_four_bytes,
            "a value's size depends on its dtype: a float64 element takes 8 bytes, not 4, so a "
            "value at min_bytes looked smaller to you than it is. Count numel() * element_size().",
        ),
        wrong(
            _pass_matching_by_position,
            "you found each saved value's backward placeholder by its position: in a graph compiled "
            "with dynamic shapes the forward returns its saved sizes last and the backward takes "
            "them first, so you reloaded other placeholders (see the compiled case). Find the "
            "placeholder by name, as torch's offload_chosen_sets does.",
        ),
        wrong(
            _pass_reload_at_the_end,
            "the reload was added at the end of the backward graph, after the nodes that read it, so "
            "the graph no longer lints (a value used before it is defined). Insert it with "
            "graph.inserting_before(the first reader), and call graph.lint() to find such mistakes.",
        ),
    ],
    right=[_pass_copying_after_each_last_reader],
    hint="three parts: the same rules as 11.1 for what to move; in the forward, a copy to the host "
    "that the forward returns in the value's place; in the backward, a copy back that every node "
    "reading the value reads instead. Then make the graph modules run their new graphs.",
)
