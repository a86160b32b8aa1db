"""Checks for lesson 4, activation offloading: save_on_cpu, a size threshold, the timing model.

Each exercise is registered once, here: its reference solution (what
solutions/04_offload.ipynb writes), the oracle (torch, or course's ``Offloader`` and
timing model), visible and hidden cases, and the known wrong answers with their hints.
See docs/authoring.md.

There is no GPU in CI, so every check is one the CPU can judge: *whether* a pack hook
copied (the packed tensor has a storage of its own), what dtype and values come back,
which saved tensors a threshold sends to the host and how many bytes, and what the timing
model predicts. The programs the checks run live here too (``PROGRAMS``, ``MODELS``,
``PREDICT_NUMBERS``), so the notebook runs exactly what the check judges.
"""

from __future__ import annotations

import torch
from torch.autograd.graph import saved_tensors_hooks

from course.checks import case, exercise, predict, wrong
from course.offload.offloader import Offloader
from course.offload.model import overlapped_time, predict_step, transfer_times

# --- shared: find the tensors inside a packed value -------------------------------------------


def _tensors_in(packed, depth: int = 0) -> list[torch.Tensor]:
    """The tensors a pack hook returned, looking inside tuples, lists and dicts."""
    if isinstance(packed, torch.Tensor):
        return [packed]
    if depth > 3:
        return []
    if isinstance(packed, (tuple, list)):
        return [t for p in packed for t in _tensors_in(p, depth + 1)]
    if isinstance(packed, dict):
        return [t for p in packed.values() for t in _tensors_in(p, depth + 1)]
    return []


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _same_grads(leaves, reference) -> bool:
    """Did backward under the hooks give the gradients of a run without any hooks?"""
    return all(
        p.grad is not None and p.grad.dtype == r.dtype and torch.allclose(p.grad, r, rtol=1e-5, atol=1e-5)
        for p, r in zip(leaves, reference, strict=True)
    )


def _grads_without_hooks(leaves, loss_fn) -> list[torch.Tensor]:
    return list(torch.autograd.grad(loss_fn(), leaves))


# --- Exercise 4.1: save_on_cpu that really copies ------------------------------------------------


class SaveOnCPU(saved_tensors_hooks):
    """Reference solution: torch's ``save_on_cpu``, but pack always makes a host copy."""

    def __init__(self):
        def pack_to_cpu(tensor):
            packed = torch.empty(tensor.size(), dtype=tensor.dtype, layout=tensor.layout, device="cpu")
            packed.copy_(tensor)  # a storage of its own, in host memory
            return (tensor.device, packed)

        def unpack_from_cpu(packed):
            device, tensor = packed
            return tensor.to(device)  # back where backward expects it

        super().__init__(pack_to_cpu, unpack_from_cpu)


def _mlp_program(dtype=torch.float32):
    g = torch.Generator().manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype))
    x = torch.randn(5, 6, generator=g, dtype=dtype)
    return list(model.parameters()), lambda: model(x).pow(2).sum()


def _exp_program():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    return [x, w], lambda: (x * w).exp().sum()  # mul saves x and w, exp saves its result


def _shared_program():
    g = torch.Generator().manual_seed(6)
    a = torch.randn(3, 4, generator=g, requires_grad=True)
    return [a], lambda: (a.sin() * a.sin().t().t()).sum()  # a view (t().t()) is saved too


#: name -> () -> (leaves, loss function); what exercise 4.1 runs under the learner's hooks.
PROGRAMS = {
    "mlp": _mlp_program,
    "exp": _exp_program,
    "mlp64": lambda: _mlp_program(torch.float64),
    "shared": _shared_program,
}


def _run_save_on_cpu(answer, program):
    """Run ``program`` with ``answer()``'s hooks; observe gradients and every pack / unpack."""
    ctx = answer()
    pack, unpack = ctx.pack_hook, ctx.unpack_hook
    seen = {"copied": [], "keeps_history": [], "same_dtype": [], "same_values": []}

    def observed_pack(t):
        packed = pack(t)
        inside = _tensors_in(packed)
        seen["copied"].append(bool(inside) and not any(_shares_storage(p, t) for p in inside))
        seen["keeps_history"].append(any(p.requires_grad for p in inside))
        return packed, t.detach()  # the original, to compare with what unpack returns

    def observed_unpack(both):
        packed, original = both
        out = unpack(packed)
        seen["same_dtype"].append(out.dtype == original.dtype and out.device == original.device)
        seen["same_values"].append(out.shape == original.shape and torch.equal(out.to(original.dtype), original))
        return out

    leaves, loss_fn = PROGRAMS[program]()
    reference = _grads_without_hooks(leaves, loss_fn)
    with saved_tensors_hooks(observed_pack, observed_unpack):
        loss = loss_fn()
    loss.backward()
    return {
        "gradients as without hooks": _same_grads(leaves, reference),
        "every saved tensor copied": all(seen["copied"]),
        "a packed tensor keeps autograd history": any(seen["keeps_history"]),
        "unpack returns the dtype and device": all(seen["same_dtype"]),
        "unpack returns the values": all(seen["same_values"]),
    }


def _make(pack_fn, unpack_fn):
    """A ``SaveOnCPU``-like class with the given hooks (the known wrong answers)."""

    class Wrong(saved_tensors_hooks):
        def __init__(self):
            super().__init__(pack_fn, unpack_fn)

    return Wrong


def _unpack_pair(packed):
    device, tensor = packed
    return tensor.to(device)


_dot_cpu = _make(lambda t: (t.device, t.cpu()), _unpack_pair)
_detach = _make(lambda t: t.detach(), lambda p: p)
_half = _make(lambda t: (t.device, t.to("cpu", torch.float16, copy=True)), _unpack_pair)
_default_dtype = _make(lambda t: (t.device, torch.empty(t.size()).copy_(t)), _unpack_pair)

exercise(
    "4.1",
    name="SaveOnCPU",
    title="save_on_cpu from saved_tensors_hooks, with a real copy",
    solution=SaveOnCPU,
    run=_run_save_on_cpu,
    points=2,
    cases=[case("mlp", label="Linear(6, 8) -> ReLU -> Linear(8, 3), loss = out.pow(2).sum() (PROGRAMS['mlp'])")],
    hidden=[
        case("exp", label="(x * w).exp().sum() in float64"),
        case("mlp64", label="the same MLP in float64"),
        case("shared", label="a.sin() * a.sin().t().t(): a transposed view is saved"),
    ],
    wrong=[
        wrong(
            _dot_cpu,
            "on a machine without a GPU, tensor.cpu() returns the tensor itself: nothing is "
            "copied, so nothing is freed (that is torch's save_on_cpu() here, which moved 0 "
            "bytes in the table above). Allocate a host tensor and copy_ into it.",
        ),
        wrong(
            _detach,
            "detach() makes a new tensor object but shares the storage: the activation stays "
            "where it was. Pack must return a copy in host memory (and the device to go back to).",
        ),
        wrong(
            _half,
            "storing float16 halves the bytes but loses precision (and unpack hands back "
            "float16): keep dtype=tensor.dtype, as torch's save_on_cpu does.",
        ),
        wrong(
            _default_dtype,
            "torch.empty(size) without dtype= is float32: a float64 activation comes back "
            "rounded. Pass dtype=tensor.dtype (and layout=tensor.layout), as torch does.",
        ),
    ],
    hint="pack: allocate torch.empty(tensor.size(), dtype=tensor.dtype, layout=tensor.layout, "
    "device='cpu'), copy_ the tensor into it, return (tensor.device, copy); unpack: "
    "device, t = packed; return t.to(device).",
)

# --- Exercise 4.2: a size-threshold offloader -----------------------------------------------


def threshold_hooks(min_bytes):
    """Reference solution: a (pack, unpack) pair that copies activations of >= min_bytes."""

    def pack(t):
        base = t._base if t._base is not None else t  # addmm saves weight.t(), a view
        is_param = base.is_leaf and base.requires_grad
        if is_param or t.nbytes < min_bytes:
            return ("kept", t.detach())  # detach: never store the tensor itself
        return ("host", t.device, t.to("cpu", copy=True))

    def unpack(packed):
        if packed[0] == "kept":
            return packed[1]
        _, device, host = packed
        return host.to(device)

    return pack, unpack


def _oracle_threshold(min_bytes):
    return Offloader(min_bytes=min_bytes, device_type="cpu", mode="copy")


def _mlp_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
    )
    return model, [torch.randn(16, 32)]  # x: 2048 bytes; relu outputs: 4096; weights 8192+


class _Scaled(torch.nn.Module):
    """tanh((x @ w) * scale): mul saves the Parameter ``scale`` itself, not a view of it."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 512, dtype=torch.float64).reshape(8, 64))
        self.w = torch.nn.Parameter(torch.randn(64, 64, dtype=torch.float64) / 8)

    def forward(self, x):
        return torch.tanh((x @ self.w) * self.scale)


def _scaled_model():
    torch.manual_seed(1)
    return _Scaled(), [torch.randn(8, 64, dtype=torch.float64)]  # 4096 bytes each, scale too


#: name -> () -> (model, inputs); what exercise 4.2 runs under the learner's hooks.
MODELS = {"mlp": _mlp_model, "scaled": _scaled_model}


def _run_threshold(answer, model_name, min_bytes):
    """Forward + backward under the hooks; observe gradients and what went to the host."""
    model, inputs = MODELS[model_name]()
    reference = _grads_without_hooks(list(model.parameters()), lambda: model(*inputs).pow(2).sum())
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
        offloaded, held = {}, []

        def observed_pack(t):
            packed = pack(t)
            inside = _tensors_in(packed)
            if inside and not any(_shares_storage(p, t) for p in inside):
                held.append(t)  # alive until backward: a storage address is not reused
                offloaded.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
            return packed

        with saved_tensors_hooks(observed_pack, unpack):
            loss = model(*inputs).pow(2).sum()
        loss.backward()
        calls, nbytes = len(held), sum(offloaded.values())
    return {
        "gradients as without hooks": _same_grads(model.parameters(), reference),
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
    return threshold_hooks(min_bytes + 1)  # the same as offloading only t.nbytes > min_bytes


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
    ],
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
            "addmm saves weight.t(), a view: it is a plain Tensor, not an nn.Parameter. Look at "
            "its base (t._base if t._base is not None else t) and ask is_leaf and requires_grad.",
        ),
        wrong(
            _keeps_everything,
            "nothing went to the host: a tensor of min_bytes or more (and not a parameter) "
            "must be packed as a host copy, t.to('cpu', copy=True).",
        ),
    ],
    hint="pack: if the tensor (or its ._base) is a leaf that requires grad, or t.nbytes < "
    "min_bytes, return ('kept', t.detach()); else ('host', t.device, t.to('cpu', copy=True)). "
    "unpack: undo whichever you did.",
)

# --- Exercises 4.3 and 4.4: predict, then run the timing model ------------------------------

#: The numbers of exercises 4.3 and 4.4: four identical layers.
PREDICT_NUMBERS = {
    "layers": 4,
    "forward_ms": 3.0,  # per layer
    "backward_ms": 6.0,  # per layer (backward costs about twice forward)
    "saved_MB": 48.0,  # per layer, offloaded in forward and fetched back in backward
    "bandwidth_GBs": 12.0,  # each direction
}


def _predict_inputs():
    n = PREDICT_NUMBERS
    k = n["layers"]
    return (
        [n["forward_ms"] * 1e-3] * k,
        [n["backward_ms"] * 1e-3] * k,
        [n["saved_MB"] * 1e6] * k,
        n["bandwidth_GBs"] * 1e9,
    )


def _forward_bound():
    """Is the overlapped forward pass limited by compute or by the copies? (course's model)"""
    forward, _, saved, bandwidth = _predict_inputs()
    x = transfer_times(saved, bandwidth)
    return "compute-bound" if overlapped_time(forward, x) <= sum(forward) else "transfer-bound"


predict(
    "4.3",
    name="predicted_forward_bound",
    title="Predict: is the overlapped forward pass compute-bound or transfer-bound?",
    truth=_forward_bound,
    solution="transfer-bound",
    wrong=[
        wrong(
            "compute-bound",
            "each layer's copy takes 48 MB / 12 GB/s = 4 ms, longer than its 3 ms of forward "
            "compute: the copy stream, not compute, sets the pace in forward.",
        ),
    ],
    hint='write "compute-bound" or "transfer-bound": compare one copy (bytes / bandwidth) '
    "with one layer's forward compute.",
)


def _overlapped_step_ms():
    """The overlapped step time of the timing model, in milliseconds."""
    return round(predict_step(*_predict_inputs()).overlapped * 1e3, 6)


predict(
    "4.4",
    name="predicted_overlapped_ms",
    title="Predict the overlapped step time (forward + backward), in ms",
    truth=_overlapped_step_ms,
    solution=40.0,
    wrong=[
        wrong(
            36.0,
            "that is the step without offload: copies are free only where compute is longer. "
            "In forward each layer costs max(3, 4) = 4 ms, not 3.",
        ),
        wrong(
            68.0,
            "that is the synchronous time (every copy added to compute): overlapped layers "
            "cost max(compute, copy) each, not the sum.",
        ),
        wrong(
            32.0,
            "that counts only the copies (4 ms x 8): in backward each layer computes for 6 ms, "
            "longer than its 4 ms fetch, so backward costs 4 x 6 = 24 ms.",
        ),
        wrong(
            47.0,
            "that is the pipelined schedule (predict_step(...).pipelined: the last copy starts "
            "only when its layer ends, and backward must fetch before it computes). We asked "
            "for the overlapped model: each layer costs max(compute, copy).",
        ),
    ],
    hint="overlapped time = sum over layers of max(compute, copy), for forward and for "
    "backward; a copy takes bytes / bandwidth.",
)
