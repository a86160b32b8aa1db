"""Exercise 4.1, save_on_cpu that really copies: how a call is run and observed, the oracle, the
visible and hidden cases, and the known wrong answers (each with the hint it earns) and right
answers written differently.
"""

from __future__ import annotations

import torch
from torch.autograd.graph import saved_tensors_hooks

from course.checks import case, exercise, wrong
from course.checks.lesson04._shared import (
    grads_without_hooks,
    on_simulated_gpu,
    same_grads,
    shares_storage,
    simulated_gpu,
    tensors_in,
)
from course.checks.solutions.lesson04 import SaveOnCPU
from course.content.lesson04 import PROGRAMS


def _torch_copying_save_on_cpu():
    """The oracle of 4.1: torch's own ``save_on_cpu(pin_memory=True)``, whose pack always
    allocates a host tensor (pinned where a GPU is available) and copies into it, the path the
    exercise asks for; its unpack moves the copy back to the tensor's device."""
    return torch.autograd.graph.save_on_cpu(pin_memory=True)


def _run_save_on_cpu(answer, program):
    """Run ``program`` with ``answer()``'s hooks; observe gradients and every pack / unpack.

    ``program="simulated-gpu"`` packs two tensors of a simulated GPU instead (see the
    module docstring): a float32 activation and a float64 one."""
    ctx = answer()
    pack, unpack = ctx.pack_hook, ctx.unpack_hook
    if program == "simulated-gpu":
        with simulated_gpu():
            tensors = [
                torch.empty(5, 8, device="cuda"),
                torch.empty(4, 3, dtype=torch.float64, device="cuda"),
            ]
            return on_simulated_gpu(pack, unpack, tensors)
    seen = {"copied": [], "keeps_history": [], "same_dtype": [], "same_values": [], "itself": []}

    def observed_pack(t):
        packed = pack(t)
        inside = tensors_in(packed)
        seen["copied"].append(bool(inside) and not any(shares_storage(p, t) for p in inside))
        seen["keeps_history"].append(any(p.requires_grad for p in inside))
        seen["itself"].append(any(p is t for p in inside))
        return packed, t.detach()  # the original, to compare with what unpack returns

    def observed_unpack(both):
        packed, original = both
        out = unpack(packed)
        seen["same_dtype"].append(out.dtype == original.dtype and out.device == original.device)
        seen["same_values"].append(
            out.shape == original.shape and torch.equal(out.to(original.dtype), original)
        )
        return out

    leaves, loss_fn = PROGRAMS[program]()
    reference = grads_without_hooks(leaves, loss_fn)
    with saved_tensors_hooks(observed_pack, observed_unpack):
        loss = loss_fn()
    loss.backward()
    return {
        "gradients as without hooks": same_grads(leaves, reference),
        "every saved tensor copied": all(seen["copied"]),
        "a packed tensor keeps autograd history": any(seen["keeps_history"]),
        "pack kept the saved tensor itself": any(seen["itself"]),
        "unpack returns the dtype and device": all(seen["same_dtype"]),
        "unpack returns the values": all(seen["same_values"]),
    }


def _unpack_from_cpu(packed):
    """The reference's unpack, shared by the wrong answers whose mistake is in pack."""
    device, tensor = packed
    return tensor.to(device)


class _MovesWithDotCpu(saved_tensors_hooks):
    def __init__(self):
        def pack_to_cpu(tensor):
            return (tensor.device, tensor.cpu())  # BAD: a tensor already on the host comes back as itself

        super().__init__(pack_to_cpu, _unpack_from_cpu)


class _KeepsADetachedAlias(saved_tensors_hooks):
    def __init__(self):
        def pack_to_cpu(tensor):
            return tensor.detach()  # BAD: a new tensor object, the same storage, on the same device

        super().__init__(pack_to_cpu, lambda packed: packed)


class _StoresFloat16(saved_tensors_hooks):
    def __init__(self):
        def pack_to_cpu(tensor):
            host = tensor.to("cpu", torch.float16, copy=True)  # BAD: rounds, and comes back float16
            return (tensor.device, host)

        super().__init__(pack_to_cpu, _unpack_from_cpu)


class _EmptyWithoutDtype(saved_tensors_hooks):
    def __init__(self):
        def pack_to_cpu(tensor):
            packed = torch.empty(tensor.size())  # BAD: no dtype=, so float32
            packed.copy_(tensor)
            return (tensor.device, packed)

        super().__init__(pack_to_cpu, _unpack_from_cpu)


class _ClonesOnTheDevice(saved_tensors_hooks):
    def __init__(self):
        def pack_to_cpu(tensor):
            return (tensor.device, tensor.clone())  # BAD: a copy, but on the tensor's own device

        super().__init__(pack_to_cpu, _unpack_from_cpu)


class _UnpacksOnTheHost(saved_tensors_hooks):
    def __init__(self):
        def pack_to_cpu(tensor):
            return (tensor.device, tensor.to("cpu", copy=True))

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor  # BAD: never goes back to the device it came from

        super().__init__(pack_to_cpu, unpack_from_cpu)


# right answers written differently from the reference


class _CopiesWithTo(saved_tensors_hooks):
    def __init__(self):
        super().__init__(lambda tensor: (tensor.device, tensor.to("cpu", copy=True)), _unpack_from_cpu)


class _CpuThenClone(saved_tensors_hooks):
    def __init__(self):
        super().__init__(lambda tensor: (tensor.device, tensor.detach().cpu().clone()), _unpack_from_cpu)


class _PinnedWhenPossible(saved_tensors_hooks):
    def __init__(self):
        def pack_to_cpu(tensor):
            pinned = torch.cuda.is_available()  # pinned host memory needs a GPU
            packed = torch.empty(
                tensor.size(), dtype=tensor.dtype, layout=tensor.layout, device="cpu", pin_memory=pinned
            )
            return (tensor.device, packed.copy_(tensor))

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device, non_blocking=True)

        super().__init__(pack_to_cpu, unpack_from_cpu)


exercise(
    "4.1",
    name="SaveOnCPU",
    title="save_on_cpu from saved_tensors_hooks, with a real copy",
    solution=SaveOnCPU,
    oracle=_torch_copying_save_on_cpu,
    run=_run_save_on_cpu,
    points=2,
    cases=[
        case("mlp", label="Linear(6, 8) -> ReLU -> Linear(8, 3), loss = out.pow(2).sum() (PROGRAMS['mlp'])")
    ],
    hidden=[
        case("exp", label="(x * w).exp().sum() in float64"),
        case("mlp64", label="the same MLP in float64"),
        case("shared", label="a.sin() * a.sin().t().t(): a transposed view is saved"),
        case(
            "simulated-gpu",
            label="pack and unpack on a simulated GPU (FakeTensorMode, device='cuda'): "
            "where does the packed copy live?",
        ),
    ],
    right=[_CopiesWithTo, _CpuThenClone, _PinnedWhenPossible],
    wrong=[
        wrong(
            _MovesWithDotCpu,
            "on a tensor already on the CPU, tensor.cpu() returns the tensor itself: nothing is "
            "copied, so nothing is freed (that is torch's save_on_cpu() here, which moved 0 "
            "bytes in the table above). Allocate a host tensor and copy_ into it.",
        ),
        wrong(
            _KeepsADetachedAlias,
            "detach() makes a new tensor object but shares the storage: the activation stays "
            "where it was. Pack must return a copy in host memory (and the device to go back to).",
        ),
        wrong(
            _StoresFloat16,
            "storing float16 halves the bytes but loses precision (and unpack hands back "
            "float16): keep dtype=tensor.dtype, as torch's save_on_cpu does.",
        ),
        wrong(
            _EmptyWithoutDtype,
            "torch.empty(size) without dtype= is float32: a float64 activation comes back "
            "rounded. Pass dtype=tensor.dtype (and layout=tensor.layout), as torch does.",
        ),
        wrong(
            _ClonesOnTheDevice,
            "clone() copies, but onto the tensor's own device (so does empty_like(tensor)): on a "
            "GPU the copy sits in GPU memory beside the original, so offloading frees nothing (the "
            "simulated-GPU case shows where it lives). Allocate the copy in host memory, device='cpu'.",
        ),
        wrong(
            _UnpacksOnTheHost,
            "unpack must hand backward a tensor on the device the activation came from: the "
            "packed value remembers that device; move the host copy back there.",
        ),
    ],
    hint="what pack returns must hold a copy in host memory (its own storage, same dtype and "
    "layout, no autograd history) and the device to go back to; unpack returns a tensor on "
    "that device with the original values.",
)
