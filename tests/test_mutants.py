"""Does every rule a function exercise's spec states have a case that fails when that rule alone
is broken?

Mutation testing (``course.checks.mutants``): each reference solution is broken one rule at a
time (a comparison flipped, a filter dropped, a boundary off by one, a copy for an in-place
edit, a call left out, ...) and each mutant goes through the exercise's own check. A mutant
that passes is a missing case, unless it means the same as the solution: those are listed in
``EQUIVALENT`` with the reason. Every function exercise of every lesson of ``course.lessons``
is mutated.
"""

import pytest

from course.checks import all_exercises, passes
from course.checks.mutants import mutants
from course.lessons import LESSONS

pytestmark = pytest.mark.slow  # about a minute and a half for every exercise

#: (exercise id, mutant description) -> why the mutant means the same as the solution. Lines count
#: from the solution's ``def`` in course/checks/solutions/lessonNN.py (the notebook's region).
EQUIVALENT = {
    ("2.2", "flip a comparison at line 4: norm > max_norm -> norm >= max_norm"): (
        "at equality the mutant multiplies by max_norm / norm, 1 up to one rounding (0.99999994 "
        "for some float32 norms): the same gradient within the check's rtol of 1e-5, as torch's "
        "clip_grad_norm_ (which divides by norm + 1e-6) also scales it"
    ),
    ("5.2", "drop a statement at line 3: super().__init__()"): (
        "TorchDispatchMode.__init__ records an optional dispatch key and makes the mode's deques "
        "of saved flags, and __enter__ makes those itself when they are missing "
        "(_lazy_init_old_dispatch_mode_flags in torch/utils/_python_dispatch.py): the mode enters "
        "and dispatches the same without it on torch 2.13"
    ),
    (
        "5.3",
        "swap an operator at line 4: saved.untyped_storage().nbytes() // saved.element_size() -> "
        "saved.untyped_storage().nbytes() * saved.element_size()",
    ): (
        "n only bounds the storage indices that as_strided may read: a larger n gives the same "
        "element indices for both tensors"
    ),
    ("8.2", "flip a comparison at line 10: moved < best[0] -> moved <= best[0]"): (
        "between two choices that move the same bytes, `<=` keeps the later one: the spec asks "
        "for as few bytes as possible, and the check judges the bytes, not which tie is chosen"
    ),
    ("8.2", "off by one at line 7: 1 -> 2"): (
        "range(len(layer_bytes) + 2) adds subsets of n + 1 layers, and there are none"
    ),
    ("8.3", "off by one at line 3: 0 -> 1"): (
        "Offloader(min_bytes=1) skips only tensors of 0 bytes, and an empty tensor moves nothing either way"
    ),
    ("9.3", "flip a comparison at line 19: key > best_key -> key >= best_key"): (
        "two subsets with the same key keep the same FLOPs and the same bytes; torch reruns every "
        "product the policy did not save, in full, so the FLOPs rerun and the bytes stored (all the "
        "check judges, with the gradients) are the same whichever of them `>=` keeps"
    ),
    ("9.3", "off by one at line 9: 2 -> 3"): (
        "3 * numel * k scales every product's FLOPs by the same 3/2, so every comparison of the "
        "subsets' sums, and the subset chosen, stays the same"
    ),
    ("9.3", "off by one at line 14: 0 -> 1"): (
        "two mutants, the start best_key (1, 0) and (0, 1): a subset's key beats (0, 0), (1, 0) and "
        "(0, 1) alike exactly when it keeps some FLOPs (a product's 2*m*k*n FLOPs are even, so no "
        "sum is 1, and -bytes is never above 0), so the same subsets replace the start and the "
        "same one is chosen"
    ),
    ("9.3", "off by one at line 15: 1 -> 2"): (
        "range(len(products) + 2) adds subsets of n + 1 products, and there are none"
    ),
    ("11.2", "drop a statement at line 34: gm.graph.lint()"): (
        "graph.lint() only checks a graph (it raises on a malformed one and changes nothing); the "
        "reference's graphs are well formed, and the check lints both graphs itself"
    ),
    (
        "10.3",
        "flip a comparison at line 8: used + m <= max_memory + 1e-12 -> used + m < max_memory + 1e-12",
    ): (
        "for any max_memory under 16384 (memory is a share of the budget's scale) max_memory + "
        "1e-12 lies above max_memory, so `<` still takes a total of exactly max_memory (the spec's "
        "'at most'); the two differ only for a total exactly on the rounding tolerance, past "
        "max_memory"
    ),
    ("10.3", "off by one at line 10: 0 -> 1"): (
        "the key (c[1], -c[1]) breaks a tie in runtime saved by the first choice found instead of "
        "the one with less memory; every choice in the list fits, and the spec (and the check) asks "
        "only for the most runtime within max_memory, not for the least memory among equals"
    ),
    ("3.5", "leave out a step at line 14: t.detach() -> t"): (
        "torch.save writes the tensor's data (and its requires_grad flag), never its graph: what "
        "torch.load returns is a new leaf either way, so backward reads the same values"
    ),
    (
        "4.1",
        "drop a keyword argument at line 4: torch.empty(tensor.size(), dtype=tensor.dtype, "
        "layout=tensor.layout, device='cpu') -> torch.empty(tensor.size(), dtype=tensor.dtype, device='cpu')",
    ): (
        "autograd saves strided tensors in every program a lesson runs, and strided is torch.empty's "
        "default layout"
    ),
    (
        "4.1",
        "drop a keyword argument at line 4: torch.empty(tensor.size(), dtype=tensor.dtype, "
        "layout=tensor.layout, device='cpu') -> torch.empty(tensor.size(), dtype=tensor.dtype, "
        "layout=tensor.layout)",
    ): (
        "a pack hook runs inside the op that saves, while torch's default-device mode is set aside "
        "(its handler is running), so torch.empty there allocates on the CPU even after "
        "torch.set_default_device (test_a_pack_hook_allocates_on_the_cpu_whatever_the_default_device)"
    ),
    (
        "11.2",
        "drop a keyword argument at line 21: max(readers(node), key=order.get, default=node) -> "
        "max(readers(node), default=node)",
    ): (
        "fx nodes compare by their place in the graph (torch._C._NodeBase orders by _sort_key, on "
        "2.13 to 2.15), so max finds the same last reader without the key"
    ),
    (
        "11.2",
        "drop a keyword argument at line 21: max(readers(node), key=order.get, default=node) -> "
        "max(readers(node), key=order.get)",
    ): (
        "default= only serves a value no forward node reads, which the spec leaves open (it places "
        "a copy after the value's last reader); every value the cases move is an activation that "
        "a later forward node reads"
    ),
}

FUNCTIONS = [e for lesson in LESSONS for e in all_exercises(lesson.number) if e.kind == "function"]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # a mutant's __del__ may raise
@pytest.mark.parametrize("ex", FUNCTIONS, ids=lambda e: e.id)
def test_every_mutant_of_the_solution_fails_its_check_or_is_listed_as_equivalent(ex):
    survived = [m.description for m in mutants(ex.solution) if passes(ex, m.answer)]
    missing = [d for d in survived if (ex.id, d) not in EQUIVALENT]
    assert missing == [], (
        f"exercise {ex.id}: mutants that pass its check (add a case that fails each): {missing}"
    )
    stale = [d for (i, d) in EQUIVALENT if i == ex.id and d not in survived]
    assert stale == [], f"exercise {ex.id}: listed as equivalent but no longer surviving: {stale}"


def test_a_flipped_boundary_is_caught_by_a_mutant_of_a_toy_exercise():
    from course.checks import Exercise, case, wrong

    def at_least(n, floor):
        return n >= floor

    ex = Exercise(
        id="98.1",
        name="at_least",
        title="t",
        solution=at_least,
        cases=[case(5, 3)],
        wrong=[wrong(lambda n, floor: True, "h")],
    )
    assert [m.description for m in mutants(at_least) if passes(ex, m.answer)] == [
        "flip a comparison at line 2: n >= floor -> n > floor"
    ]  # no case sits on the boundary: the missing case the test exists to find
    boundary = Exercise(**{**ex.__dict__, "cases": (case(5, 3), case(3, 3))})
    assert [m.description for m in mutants(at_least) if passes(boundary, m.answer)] == []


def test_a_pack_hook_allocates_on_the_cpu_whatever_the_default_device():
    """Why 4.1's torch.empty needs no device='cpu' (an equivalent mutant above): the hook runs
    while torch's default-device mode handles the op that saves, and a mode is set aside while
    its own handler runs."""
    import torch

    x = torch.randn(4, requires_grad=True)
    seen = []

    def pack(t):
        seen.append(torch.empty(t.size()).device.type)
        return t

    torch.set_default_device("meta")
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            (x * x).sum()
        outside = torch.empty(1).device.type
    finally:
        torch.set_default_device(None)
    assert seen == ["cpu", "cpu"] and outside == "meta"
