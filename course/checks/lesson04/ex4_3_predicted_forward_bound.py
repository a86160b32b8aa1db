"""Exercise 4.3, predict whether forward is compute-bound or transfer-bound: the program torch runs for
the truth, the prediction's right forms and the known wrong predictions, each with the hint it
earns.
"""

from __future__ import annotations

from course.checks import predict, wrong
from course.checks.solutions.lesson04 import predicted_forward_bound
from course.content.lesson04 import PREDICT_NUMBERS
from course.offload.model import MB, transfer_times


def _predict_inputs(mb: float = MB):
    n = PREDICT_NUMBERS
    k = n["layers"]
    return (
        [n["forward_ms"] * 1e-3] * k,
        [n["backward_ms"] * 1e-3] * k,
        [n["saved_MB"] * mb] * k,
        n["bandwidth_GBs"] * 1e9,
    )


def _forward_bound():
    """In forward, is there more copying than computing (course's model, last layer kept)?"""
    forward, _, saved, bandwidth = _predict_inputs()
    copies = transfer_times(saved[:-1], bandwidth)  # the last layer stays on the device
    return "transfer-bound" if sum(copies) > sum(forward) else "compute-bound"


def _read_bound(answer):
    """Read "transfer-bound" in any case and spacing ("Transfer bound", "transfer_bound")."""
    if not isinstance(answer, str):
        raise ValueError(f"write a string, not {type(answer).__name__}")
    word = "".join(ch for ch in answer.lower() if ch.isalpha())
    for full in ("transfer-bound", "compute-bound"):
        if word in (full.replace("-", ""), full.split("-")[0]):
            return full
    return answer


predict(
    "4.3",
    name="predicted_forward_bound",
    title="Predict: is the forward pass compute-bound or transfer-bound?",
    truth=_forward_bound,
    solution=predicted_forward_bound,
    parse=_read_bound,
    right=["Transfer-bound", "transfer bound", "TRANSFER_BOUND"],
    wrong=[
        wrong(
            "compute-bound",
            "compare the two streams' work in forward: one copy takes bytes / bandwidth (mind "
            "the unit: MB is 2**20 bytes, GB/s is 1e9 bytes per second) and three layers send "
            "theirs out, against four layers of forward compute.",
        ),
    ],
    hint='write "compute-bound" or "transfer-bound": which stream has more work in forward, compute or copy?',
)
