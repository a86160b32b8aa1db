"""What exercises 4.1 and 4.2 share: the tensors a pack hook returned, and the simulated GPU
(a ``FakeTensorMode`` tensor on ``cuda``) one case of each runs the hooks on.
"""

from __future__ import annotations

import contextlib
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensorMode


def tensors_in(packed, depth: int = 0) -> list[torch.Tensor]:
    """The tensors a pack hook returned, looking inside tuples, lists and dicts."""
    if isinstance(packed, torch.Tensor):
        return [packed]
    if depth > 3:
        return []
    if isinstance(packed, (tuple, list)):
        return [t for p in packed for t in tensors_in(p, depth + 1)]
    if isinstance(packed, dict):
        return [t for p in packed.values() for t in tensors_in(p, depth + 1)]
    return []


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def same_grads(leaves, reference) -> bool:
    """Did backward under the hooks give the gradients of a run without any hooks?"""
    return all(
        p.grad is not None and p.grad.dtype == r.dtype and torch.allclose(p.grad, r, rtol=1e-5, atol=1e-5)
        for p, r in zip(leaves, reference, strict=True)
    )


def grads_without_hooks(leaves, loss_fn) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss_fn(), leaves))


_NO_CUDA = "not linked with support for cuda"  # what a simulated GPU says to a device-to-device copy


@contextlib.contextmanager
def simulated_gpu():
    """Fake tensors: ``torch.empty(..., device='cuda')`` works without a GPU (no memory behind it)."""
    with warnings.catch_warnings(), FakeTensorMode():
        warnings.simplefilter("ignore")  # data_ptr() on a fake tensor warns
        yield


def _warm_simulated_gpu() -> None:
    """The first fake tensor loads a good part of torch (seconds); pay that once, at import,
    so a check (or the grader's worker, forked after importing the checks) does not time out."""
    with simulated_gpu():
        t = torch.empty(2, device="cuda")
        t.to("cpu", copy=True).to(t.device)


_warm_simulated_gpu()


def on_simulated_gpu(pack, unpack, tensors) -> dict:
    """Pack and unpack each of ``tensors`` (built inside the simulated GPU) and say where the
    packed copy lives and where unpack puts it back.

    The verdict must not depend on how torch was built. On a CPU-only build some
    device-to-device copies of a fake tensor raise (``empty_like(t).copy_(t)`` does,
    ``t.clone()`` does not); on a CUDA build none does. So a copy the simulation cannot run
    counts as what it is, a copy on the device, and leaves no mark on the unpack verdict: the
    outcomes are the same on both builds (``tests/test_lesson04.py`` runs both copies).
    """
    where, back = [], []
    for t in tensors:
        try:
            packed = pack(t)
        except RuntimeError as e:
            if _NO_CUDA not in str(e):
                raise
            where.append("device")  # a device-to-device copy, which a CPU build cannot simulate
            continue
        inside = tensors_in(packed)
        where.append(
            "host"
            if inside and all(p.device.type == "cpu" for p in inside)
            else "device"
            if any(p.device == t.device for p in inside)
            else "nowhere"
        )
        try:
            out = unpack(packed)
        except RuntimeError as e:
            if _NO_CUDA not in str(e):
                raise
            continue  # the same: a CUDA build would run this copy
        back.append(out.device == t.device and out.dtype == t.dtype and out.shape == t.shape)
    return {"where each packed tensor lives": where, "unpack returns device, dtype and shape": all(back)}
