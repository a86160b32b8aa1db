"""Exercise 4.4, predict where offloading costs no step time: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

from course.checks import predict, wrong
from course.checks.solutions.lesson04 import predicted_pays
from course.content.lesson04 import PAY_SETTINGS
from course.offload.model import MB, predict_step


def _step_with_and_without(s: dict) -> tuple[float, float]:
    """(seconds without offload, seconds with it) of a setting, by course's timing model."""
    k = s["layers"]
    p = predict_step(
        [s["forward_ms"] * 1e-3] * k,
        [s["backward_ms"] * 1e-3] * k,
        [s["saved_MB"] * MB] * k,
        bandwidth=s["bandwidth_GBs"] * 1e9,
        keep_last=s["keep_last"],
    )
    return p.none, p.synchronous if s["copies"] == "synchronous" else p.overlapped


def _which_pay() -> dict[str, str]:
    """The truth of 4.4: "free" where offloading adds no time to the step, else "slower"."""
    verdicts = {}
    for name, s in PAY_SETTINGS.items():
        without, with_offload = _step_with_and_without(s)
        verdicts[name] = "free" if with_offload <= without * (1 + 1e-9) else "slower"
    return verdicts


def _read_verdicts(answer):
    """Read each verdict in any case and spacing ("Free", " SLOWER")."""
    if not isinstance(answer, dict):
        raise ValueError(f'write a dict from each setting to "free" or "slower", not {type(answer).__name__}')
    read = {}
    for key, value in answer.items():
        word = "".join(ch for ch in value.lower() if ch.isalpha()) if isinstance(value, str) else None
        if word not in ("free", "slower"):
            raise ValueError(f'write "free" or "slower" for {key!r}, not {value!r}')
        read[key] = word
    return read


_PAYS = {
    "as in 4.3": "slower",
    "faster link": "free",
    "faster link, synchronous": "slower",
    "faster link, last layer too": "slower",
    "faster link, 16 layers": "free",
    "batch x2": "slower",
    "16-bit activations": "free",
    "slower layers": "free",
}


predict(
    "4.4",
    name="predicted_pays",
    title="Predict where offloading costs no step time, and where it makes the step slower",
    truth=_which_pay,
    solution=predicted_pays,
    parse=_read_verdicts,
    options=("free", "slower"),  # two words: a failing check says how many are wrong, not which
    points=2,
    right=[
        {key: verdict.upper() for key, verdict in reversed(_PAYS.items())},
        {key: f" {verdict.capitalize()} " for key, verdict in _PAYS.items()},
    ],
    wrong=[
        wrong(
            dict.fromkeys(_PAYS, "slower"),
            "a copy on a side stream runs while compute goes on: when one layer's copy takes no "
            "longer than the compute beside it (the next layer's forward, the later layer's "
            "backward), it hides and the step is as fast as without offload.",
        ),
        wrong(
            dict.fromkeys(_PAYS, "free"),
            "a copy hides only behind compute that runs beside it: one that takes longer than "
            "the next layer's compute makes compute wait (4.3 is transfer-bound), and a copy "
            "nothing can run beside adds all of its time.",
        ),
        wrong(
            {**_PAYS, "as in 4.3": "free"},
            "in 4.3's numbers one 64 MB copy takes longer than a layer's 3 ms of forward compute "
            "(MB = 2**20 bytes, GB/s = 1e9 bytes/s): the link sets the pace, compute waits.",
        ),
        wrong(
            {**_PAYS, "faster link": "slower", "faster link, 16 layers": "slower"},
            "twice the bandwidth halves each copy's time: compare it again with the 3 ms of "
            "compute beside it.",
        ),
        wrong(
            {**_PAYS, "faster link, synchronous": "free"},
            "synchronous copies run on the compute stream, one after the other with the "
            "kernels: compute waits for every copy, so every copy's time adds, however fast "
            "the link.",
        ),
        wrong(
            {**_PAYS, "faster link, last layer too": "free"},
            "the last layer's copy can only start when forward ends, and backward starts with "
            "that very layer: it waits for the copy out and the copy back, with no compute "
            "beside either. That is why offloaders keep it on the device.",
        ),
        wrong(
            {**_PAYS, "faster link, 16 layers": "slower"},
            "more layers add as much copying as compute: each copy still hides behind one "
            "layer's compute, so depth does not change the verdict.",
        ),
        wrong(
            {**_PAYS, "batch x2": "free"},
            "a batch twice as large doubles each layer's compute and its saved bytes alike: "
            "the copy is still longer than the compute beside it.",
        ),
        wrong(
            {**_PAYS, "16-bit activations": "slower"},
            "16-bit activations halve the bytes, and a copy's time is bytes / bandwidth: "
            "compare the halved copy with the compute beside it.",
        ),
        wrong(
            {**_PAYS, "slower layers": "slower"},
            "slower layers give each copy more compute to hide behind: what decides is one "
            "copy's time against one layer's compute, not how long the step is.",
        ),
        wrong(
            {**_PAYS, "faster link": "slower", "faster link, 16 layers": "slower", "batch x2": "free"},
            "only the link's speed decides, you say; but it is one side of a ratio: a copy "
            "costs bytes / bandwidth and hides behind the compute beside it, so the bytes and "
            "the compute per layer decide as much.",
        ),
    ],
    hint="for each setting compare, layer by layer, one copy's time (bytes / bandwidth) with "
    "the compute that can run beside it; a copy that waits for compute, or that has nothing "
    "beside it, adds its time to the step.",
)
