"""Exercise 5.1, predict which saved tensors get cloned: the program torch runs for the truth, the
prediction's right forms and the known wrong predictions, each with the hint it earns.
"""

from __future__ import annotations

import torch

from course.autograd.mutation import allow_mutation_on_saved_tensors
from course.checks import predict, wrong
from course.checks.solutions.lesson05 import predicted_clones

#: The program of exercise 5.1: forward lines (what gets saved), then the writes.
CLONE_PROGRAM_FORWARD = [
    "w = torch.randn(2, 3, requires_grad=True)",
    "b, c, e = w.clone(), w.clone(), w.clone()",
    "p = b * c            # MulBackward0 saves b and c",
    "q = e[0].exp()       # ExpBackward0 saves its result q",
    "e1 = e[1]",
    "s = e1 ** 2          # PowBackward0 saves e1, the view e[1]",
]
CLONE_PROGRAM_WRITES = [
    "b.add_(1)",
    "c[1].mul_(2)",
    "e[0].zero_()",
]
CLONE_PROGRAM_NAMES = ("b", "c", "q", "e1")


def _clone_state(
    forward=CLONE_PROGRAM_FORWARD,
    writes=CLONE_PROGRAM_WRITES,
    names=CLONE_PROGRAM_NAMES,
    context=allow_mutation_on_saved_tensors,
) -> dict:
    """Run ``forward`` then ``writes`` (lines of Python) inside ``context``; return
    ``{name: "cloned" | "original"}`` for each saved tensor named in ``names``.

    A handle is matched to its name after the forward lines (``ctx.original[h] is ns[name]``),
    so this works for torch's context too, whose handles carry no index.
    """
    torch.manual_seed(0)
    ns = {"torch": torch}
    with context() as ctx:
        for line in forward:
            exec(line, ns)
        name_of = {h: n for h, t in list(ctx.original.items()) for n in names if t is ns[n]}
        for line in writes:
            exec(line, ns)
        state = {name_of[h]: "cloned" for h in list(ctx.cloned.keys())}
        state.update({name_of[h]: "original" for h in list(ctx.original.keys())})
    return {n: state[n] for n in names}


_RIGHT_CLONES = {"b": "cloned", "c": "cloned", "q": "original", "e1": "original"}


def _read_clone_states(answer):
    """5.1's prediction with spacing and capitals forgotten: {" B": "Cloned"} reads as
    {"b": "cloned"}; anything but a dict is left as it is (and judged as it is)."""
    if not isinstance(answer, dict):
        return answer
    return {str(k).strip(): v.strip().lower() if isinstance(v, str) else v for k, v in answer.items()}


predict(
    "5.1",
    name="predicted_clones",
    title="Predict which saved tensors the context clones",
    truth=_clone_state,
    solution=predicted_clones,
    points=2,
    wrong=[
        wrong(
            {**_RIGHT_CLONES, "c": "original"},
            "c[1] is a view of c: it is c's memory, so c[1].mul_(2) overwrites values the "
            "saved c holds, and c must be copied first. (torch's own context misses this "
            "one; we come back to it below.)",
        ),
        wrong(
            {**_RIGHT_CLONES, "e1": "cloned"},
            "e[0] and e1 = e[1] share a storage but no element: zeroing row 0 leaves row 1 "
            "as it was, so the saved e1 needs no copy.",
        ),
        wrong(
            {**_RIGHT_CLONES, "q": "cloned"},
            "ExpBackward0 saved its result q, which is new memory; e[0], exp's input, was "
            "not saved, so writing it clones nothing.",
        ),
        wrong(
            dict.fromkeys(_RIGHT_CLONES, "cloned"),
            "the context clones only what a write is about to overwrite, and only when "
            "that happens: q and e1 are never written.",
        ),
        wrong(
            dict.fromkeys(_RIGHT_CLONES, "original"),
            "a saved tensor is cloned just before an op writes into its memory: b.add_(1) "
            "writes b, c[1].mul_(2) writes part of c.",
        ),
    ],
    parse=_read_clone_states,
    right=[
        {"e1": "original", "q": "original", "c": "cloned", "b": "cloned"},
        {"b": "Cloned", "c": "CLONED ", "q": "Original", "e1": "original"},
    ],
    hint="for each saved tensor ask: does one of the three writes change one of its "
    "elements? Then the context cloned it just before.",
)
