"""Exercise 11.3, predict where torch's offload pass schedules its copies and waits: the program
torch runs for the truth (its own pass on the lesson's partition), the prediction's right forms
and the known wrong predictions, each with the hint it earns.

The prediction, per setting of ``activation_offload_sink_wait`` (with
``activation_offload_separate_stream=True``), gives each offloaded value a pair
``(copy after, wait before)``: the forward node its copy's start follows, and the forward node
its wait comes before (``"output"`` where no compute node follows it). Offload nodes themselves
are skipped when reading both neighbours, so the pair does not depend on how the pass orders
several copies or waits that sit side by side.
"""

from __future__ import annotations

from course.checks import predict, wrong
from course.checks.solutions.lesson11 import (
    predicted_schedule,
)

OFFLOADED = ("addmm", "gelu", "addmm_2", "gelu_1")
"""The saved values the lesson tags with ``should_offload``: two products and two gelu outputs."""

SETTINGS = {"sink_wait off": False, "sink_wait on": True}
"""The prediction's keys, and the ``activation_offload_sink_wait`` each names."""


def scheduled_forward(sink_wait: bool, offloaded=OFFLOADED) -> list[str]:
    """The forward's call_function nodes, in order, after torch's offload pass has run on the
    lesson's min-cut partition with ``offloaded`` tagged and a separate stream."""
    from torch._functorch import config as functorch_config
    from torch._functorch._activation_offloading import activation_offloading as ao
    from torch.utils._ordered_set import OrderedSet

    from course.content.lesson10 import partitioned

    jd = partitioned("lesson", "min_cut")
    for node in jd.fw_module.graph.output_node().args[0][jd.num_fwd_outputs :]:
        if node.name in offloaded:
            node.meta["should_offload"] = True
    flags = {"activation_offload_separate_stream": True, "activation_offload_sink_wait": sink_wait}
    with functorch_config.patch(**flags):
        ao.enable_activation_offloading(
            jd.fw_module, jd.bw_module, jd.num_fwd_outputs, static_lifetime_input_nodes=OrderedSet()
        )
    return [n.name for n in jd.fw_module.graph.nodes if n.op == "call_function"]


def _is_offload(name: str) -> bool:
    return name.startswith(("async_cpu_offload_", "cpu_offload_"))


def read_schedule(order: list[str]) -> dict:
    """``{value: (copy after, wait before)}`` read from a forward's node order (the pass's
    start node is ``async_cpu_offload_<value>``, its wait ``cpu_offload_<value>``)."""
    compute = [i for i, name in enumerate(order) if not _is_offload(name)]
    schedule = {}
    for value in [n.removeprefix("async_cpu_offload_") for n in order if n.startswith("async_cpu_offload_")]:
        start, wait = order.index("async_cpu_offload_" + value), order.index("cpu_offload_" + value)
        before = [order[i] for i in compute if i < start]
        after = [order[i] for i in compute if i > wait]
        schedule[value] = (before[-1], after[0] if after else "output")
    return schedule


def _torch_schedule() -> dict:
    """Torch's pass, read per setting."""
    return {key: read_schedule(scheduled_forward(sink)) for key, sink in SETTINGS.items()}


def _read_prediction(answer):
    """Read the settings' keys in any case and spacing, and each pair as a tuple or a list."""
    if not isinstance(answer, dict):
        raise ValueError(f"write a dict from each setting to its schedule, not {type(answer).__name__}")
    read = {}
    for key, schedule in answer.items():
        setting = " ".join(key.lower().split()) if isinstance(key, str) else None
        if setting not in SETTINGS:
            raise ValueError(f"the settings are {', '.join(map(repr, SETTINGS))}, not {key!r}")
        if not isinstance(schedule, dict):
            raise ValueError(f"write {key!r}'s schedule as a dict from each value to a pair")
        read[setting] = {}
        for value, pair in schedule.items():
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"write {value!r}'s entry as a pair (copy after, wait before), not {pair!r}")
            read[setting][value] = tuple(str(name).strip() for name in pair)
    return read


_OFF = {
    "addmm": ("gelu", "t_1"),
    "gelu": ("addmm_1", "add"),
    "addmm_2": ("gelu_1", "t_3"),
    "gelu_1": ("addmm_3", "add_1"),
}
_ON = {value: (copy_after, "output") for value, (copy_after, _) in _OFF.items()}

predict(
    "11.3",
    name="predicted_schedule",
    title="Predict where torch's offload pass starts each copy and puts each wait, sink_wait off and on",
    truth=_torch_schedule,
    solution=predicted_schedule,
    parse=_read_prediction,
    right=[
        {"Sink_Wait  ON": {k: list(v) for k, v in reversed(_ON.items())}, "sink_wait off": dict(_OFF)},
    ],
    wrong=[
        wrong(
            {"sink_wait off": _OFF, "sink_wait on": _OFF},
            "your two schedules are the same, but sink_wait exists to change one half of each "
            "pair: ask which of the two nodes of a transfer it moves, and where to.",
        ),
        wrong(
            {"sink_wait off": _ON, "sink_wait on": _ON},
            "without sink_wait the pass does not gather the waits anywhere: ask where a wait "
            "goes when nothing moves it away from the copy it belongs to.",
        ),
        wrong(
            {key: {v: ("add_2", "output") for v in _OFF} for key in SETTINGS},
            "a copy left to the end of the forward holds its device memory through the whole "
            "forward, which is what offloading tries to avoid: a copy may start as soon as no "
            "forward node will read the device value again.",
        ),
        wrong(
            {
                "sink_wait off": {
                    "addmm": ("addmm", "gelu"),
                    "gelu": ("gelu", "t_1"),
                    "addmm_2": ("addmm_2", "gelu_1"),
                    "gelu_1": ("gelu_1", "t_3"),
                },
                "sink_wait on": {v: (v, "output") for v in _OFF},
            },
            "the pass frees the device copy once its transfer is done, so it cannot start the "
            "transfer while a forward node still has to read the value: look for each value's "
            "readers in the forward.",
        ),
    ],
    hint="for each value find its last reader in the forward (the copy cannot start before it); "
    "then ask, per setting, whether the wait stays beside its copy or is moved, and where to.",
)
