"""Exercise 4.2, a size-threshold offloader: how a call is run and observed, the oracle, the visible
and hidden cases, and the known wrong answers (each with the hint it earns) and right answers
written differently.
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
from course.checks.solutions.lesson04 import threshold_hooks
from course.content.lesson04 import MODELS
from course.offload.offloader import Offloader


def _oracle_threshold(min_bytes):
    return Offloader(min_bytes=min_bytes, device_type="cpu", mode="copy")


def _threshold_on_simulated_gpu(hooks, min_bytes):
    """A 4096-byte and a 512-byte activation, packed on a simulated GPU.

    (No parameter here: a fake GPU tensor that requires grad cannot enter autograd without a
    real GPU; the CPU cases judge the parameter rule.)"""
    if isinstance(hooks, Offloader):  # the oracle: the Offloader's rule, written out
        hooks = threshold_hooks(min_bytes)
    pack, unpack = hooks
    with simulated_gpu():
        big, small = torch.empty(16, 64, device="cuda"), torch.empty(128, device="cuda")
        return on_simulated_gpu(pack, unpack, [big, small])


def _run_threshold(answer, model_name, min_bytes):
    """Forward + backward under the hooks; observe gradients and what went to the host."""
    if model_name == "simulated-gpu":
        return _threshold_on_simulated_gpu(answer(min_bytes), min_bytes)
    model, inputs = MODELS[model_name]()
    reference = grads_without_hooks(list(model.parameters()), lambda: model(*inputs).pow(2).sum())
    hooks = answer(min_bytes)
    if isinstance(hooks, Offloader):  # the oracle counts for itself
        with hooks:
            loss = model(*inputs).pow(2).sum()
        loss.backward()
        st = hooks.stats
        kept = st.kept_param + st.kept_small + st.kept_excluded + st.kept_passthrough + st.kept_other
        calls, nbytes = st.packed - kept, st.offloaded_bytes
    else:
        pack, unpack = hooks
        offloaded, held, itself = {}, [], []

        def observed_pack(t):
            packed = pack(t)
            inside = tensors_in(packed)
            itself.append(any(p is t for p in inside))
            if inside and not any(shares_storage(p, t) for p in inside):
                held.append(t)  # alive until backward: a storage address is not reused
                offloaded.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
            return packed

        with saved_tensors_hooks(observed_pack, unpack):
            loss = model(*inputs).pow(2).sum()
        loss.backward()
        calls, nbytes = len(held), sum(offloaded.values())
        if any(itself):
            return {"pack kept the saved tensor itself (a reference cycle)": True}
    return {
        "gradients as without hooks": same_grads(model.parameters(), reference),
        "pack calls that went to the host": calls,
        "bytes copied (each storage once)": nbytes,
    }


def _on_numel(min_bytes):
    pack, unpack = threshold_hooks(min_bytes)

    def pack_numel(t):
        base = t._base if t._base is not None else t
        if (base.is_leaf and base.requires_grad) or t.numel() < min_bytes:
            return ("kept", t.detach())
        return ("host", t.device, t.to("cpu", copy=True))

    return pack_numel, unpack


def _strictly_greater(min_bytes):
    _, unpack = threshold_hooks(min_bytes)

    def pack(t):
        base = t._base if t._base is not None else t
        if (base.is_leaf and base.requires_grad) or t.nbytes <= min_bytes:  # BAD: exactly min_bytes stays
            return ("kept", t.detach())
        return ("host", t.device, t.to("cpu", copy=True))

    return pack, unpack


def _offloads_params(min_bytes):
    _, unpack = threshold_hooks(min_bytes)

    def pack(t):
        if t.nbytes < min_bytes:
            return ("kept", t.detach())
        return ("host", t.device, t.to("cpu", copy=True))

    return pack, unpack


def _isinstance_parameter(min_bytes):
    _, unpack = threshold_hooks(min_bytes)

    def pack(t):
        if isinstance(t, torch.nn.Parameter) or t.nbytes < min_bytes:
            return ("kept", t.detach())
        return ("host", t.device, t.to("cpu", copy=True))

    return pack, unpack


def _keeps_everything(min_bytes):
    return (lambda t: ("kept", t.detach())), (lambda p: p[1])


def _keeps_t_itself(min_bytes):
    _, unpack = threshold_hooks(min_bytes)

    def pack(t):
        base = t._base if t._base is not None else t
        if (base.is_leaf and base.requires_grad) or t.nbytes < min_bytes:
            return ("kept", t)  # the tensor itself: the graph now holds itself
        return ("host", t.device, t.to("cpu", copy=True))

    return pack, unpack


def _clones_on_device(min_bytes):
    _, unpack = threshold_hooks(min_bytes)

    def pack(t):
        base = t._base if t._base is not None else t
        if (base.is_leaf and base.requires_grad) or t.nbytes < min_bytes:
            return ("kept", t.detach())
        return ("host", t.device, t.clone())  # a copy, but on the tensor's own device

    return pack, unpack


# right answers written differently from the reference
def _storage_bytes(min_bytes):
    _, unpack = threshold_hooks(min_bytes)

    def pack(t):
        is_param = t.requires_grad and (t.is_leaf or (t._base is not None and t._base.is_leaf))
        if is_param or t.untyped_storage().nbytes() < min_bytes:
            return ("kept", t.detach())
        return ("host", t.device, t.detach().cpu().clone())

    return pack, unpack


def _dict_packed(min_bytes):
    def pack(t):
        base = t if t._base is None else t._base
        if isinstance(base, torch.nn.Parameter) or t.numel() * t.element_size() < min_bytes:
            return {"tensor": t.detach(), "device": None}
        return {"tensor": t.to("cpu", copy=True), "device": t.device}

    def unpack(p):
        return p["tensor"] if p["device"] is None else p["tensor"].to(p["device"], non_blocking=True)

    return pack, unpack


exercise(
    "4.2",
    name="threshold_hooks",
    title="A size-threshold offloader that never moves parameters",
    solution=threshold_hooks,
    oracle=_oracle_threshold,
    run=_run_threshold,
    points=3,
    cases=[
        case("mlp", 4096, label="MODELS['mlp'] (x 2 KB, relu outputs 4 KB), min_bytes=4096"),
        case("mlp", 1024, label="MODELS['mlp'], min_bytes=1024"),
    ],
    hidden=[
        case("mlp", 0, label="MODELS['mlp'], min_bytes=0"),
        case("scaled", 4096, label="tanh((x @ w) * scale) in float64, min_bytes=4096"),
        case("scaled", 1 << 20, label="tanh((x @ w) * scale), min_bytes=1 MiB (nothing is that big)"),
        case(
            "simulated-gpu",
            1024,
            label="a 4 KB and a 512-byte activation on a simulated GPU, "
            "min_bytes=1024: where does each packed tensor live?",
        ),
    ],
    right=[_storage_bytes, _dict_packed],
    wrong=[
        wrong(
            _on_numel,
            "min_bytes is in bytes: compare t.nbytes (numel * element_size, 4 per float32 "
            "element), not t.numel(). A 16 x 64 float32 activation is 1024 elements but 4096 bytes.",
        ),
        wrong(
            _strictly_greater,
            "a tensor of exactly min_bytes goes to the host: keep only t.nbytes < min_bytes "
            "(the Offloader's rule).",
        ),
        wrong(
            _offloads_params,
            "you copied parameters: a weight stays on the device for the optimizer anyway, so "
            "its host copy frees nothing and costs two copies per step. Keep a tensor whose "
            "base (t._base for a view such as addmm's weight.t()) is a leaf that requires grad.",
        ),
        wrong(
            _isinstance_parameter,
            "addmm saves weight.t(), a view: it is a plain Tensor, not an nn.Parameter. Ask the "
            "tensor the view was taken from (its ._base) whether it is a leaf that requires grad.",
        ),
        wrong(
            _keeps_everything,
            "nothing went to the host: a tensor of min_bytes or more (and not a parameter) "
            "must be packed as a copy in host memory, with the device it came from.",
        ),
        wrong(
            _keeps_t_itself,
            "the packed value holds the saved tensor itself: the graph keeps the tensor and the "
            "tensor (through grad_fn) keeps the graph, a cycle through C++ that gc.collect() "
            "cannot free (lesson 3): it lives until a backward without retain_graph frees the "
            "saved values. Keep a detached alias (it shares the memory) instead.",
        ),
        wrong(
            _clones_on_device,
            "clone() makes its copy on the tensor's own device: on a GPU nothing is freed (the "
            "simulated-GPU case shows the copy living on 'cuda'). Copy to host memory instead.",
        ),
    ],
    hint="three rules, in order: a parameter (or a view of one) stays; a tensor below the "
    "threshold stays; anything else goes to host memory with the device it came from. What "
    "stays is packed without the tensor object itself.",
)
