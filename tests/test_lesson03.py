"""Lesson 3's programs and checks against torch: do the checks judge by what torch does?"""

import torch
import torch.autograd.graph as tg
from hypothesis import given, settings
from hypothesis import strategies as st

import course.autograd_graph as cg
from course.checks import lesson03 as L


def test_does_the_retain_program_count_the_same_calls_with_torchs_hooks_and_courses():
    assert L.retain_program(tg.saved_tensors_hooks) == L.retain_program(cg.saved_tensors_hooks)


def test_are_the_oracle_hooks_of_3_3_torchs_exact_gradients():
    for seed in (0, 1, 2):
        with_hooks = L.mlp_grads(L.exact_hooks(), seed)
        assert all(torch.equal(a, b) for a, b in zip(with_hooks, L.exact_grads(seed)))


def test_does_the_cost_of_3_3_count_what_torch_saves_once_per_storage():
    saved = []

    def pack(t):
        saved.append(t.detach())
        return t.detach()

    x, Ws = L.make_mlp(0)
    with tg.saved_tensors_hooks(pack, lambda t: t):  # torch's own context manager
        L.mlp_loss(x, Ws)
    assert L.packed_bytes(L.exact_hooks(), 0) == {"saved bytes": L.storage_bytes(saved)} == {"saved bytes": 9472}
    # bfloat16 copies: every pack is a fresh 2-byte-per-element tensor
    assert L.packed_bytes(L.compress_hooks(), 0) == {"saved bytes": sum(t.numel() * 2 for t in saved)}


def test_do_the_disk_hooks_work_under_torchs_context_manager_too(tmp_path):
    pack, unpack = L.disk_hooks(str(tmp_path))
    x, Ws = L.make_mlp(0)
    with tg.saved_tensors_hooks(pack, unpack):
        loss = L.mlp_loss(x, Ws)
    assert len(list(tmp_path.iterdir())) == 9
    grads = torch.autograd.grad(loss, Ws)
    assert all(torch.equal(a, b) for a, b in zip(grads, L.exact_grads(0)))
    assert list(tmp_path.iterdir()) == []


_dtypes = st.sampled_from([torch.float32, torch.float16, torch.float64, torch.int64, torch.bool])


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.tuples(st.integers(0, 12), _dtypes), min_size=1, max_size=4),
       picks=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), max_size=8))
def test_is_storage_bytes_the_sum_of_the_distinct_bases_whatever_views_we_pick(sizes, picks):
    bases = [torch.zeros(n, dtype=dtype) for n, dtype in sizes]
    tensors, used = [], set()
    for which, start, whole in picks:
        k = which % len(bases)
        used.add(k)
        tensors.append(bases[k] if whole else bases[k][start:])
    expected = sum(bases[k].numel() * bases[k].element_size() for k in used)
    assert L.storage_bytes(tensors) == expected
