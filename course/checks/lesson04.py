"""Checks for lesson 4, activation offloading: save_on_cpu, a size threshold, the timing model.

Each exercise is registered once, here: its reference solution (what
solutions/04_offload.ipynb writes), the oracle (torch, or course's ``Offloader`` and
timing model), visible and hidden cases, and the known wrong answers with their hints.
See docs/authoring.md.

There is no GPU in CI, so every check is one the CPU can judge: *whether* a pack hook
copied (the packed tensor has a storage of its own), what dtype and values come back,
which saved tensors a threshold sends to the host and how many bytes, and what the timing
model predicts. Where a copy is *to* matters too, and a CPU cannot show it with real
tensors (every tensor is a host tensor there), so one case per exercise runs the hooks on a
**simulated GPU tensor**: a ``FakeTensorMode`` tensor on ``cuda``, which has a device, a
dtype and a shape but no memory, needs no GPU, and tells a host copy (``device='cpu'``)
from a clone that stays on the device. The programs the checks run (``PROGRAMS``,
``MODELS``, ``PREDICT_NUMBERS``, ``PAY_SETTINGS``) are lesson content, in
``course/content/lesson04.py``, so the notebook imports and runs exactly what the check
judges; a prediction's truth (``_forward_bound``, ``_which_pay``) is private, here.
"""

from __future__ import annotations

import contextlib
import warnings

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.autograd.graph import saved_tensors_hooks

from course.checks import case, exercise, predict, wrong
from course.checks.solutions.lesson04 import (
    SaveOnCPU,
    predicted_forward_bound,
    predicted_pays,
    threshold_hooks,
)
from course.content.lesson04 import MODELS, PAY_SETTINGS, PREDICT_NUMBERS, PROGRAMS
from course.offload.model import MB, predict_step, transfer_times
from course.offload.offloader import Offloader

# --- Shared by exercises 4.1 and 4.2: what a pack returned, and the simulated GPU ------------


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


_NO_CUDA = "not linked with support for cuda"  # what a simulated GPU says to a device-to-device copy


@contextlib.contextmanager
def _simulated_gpu():
    """Fake tensors: ``torch.empty(..., device='cuda')`` works without a GPU (no memory behind it)."""
    with warnings.catch_warnings(), FakeTensorMode():
        warnings.simplefilter("ignore")  # data_ptr() on a fake tensor warns
        yield


def _warm_simulated_gpu() -> None:
    """The first fake tensor loads a good part of torch (seconds); pay that once, at import,
    so a check (or the grader's worker, forked after importing the checks) does not time out."""
    with _simulated_gpu():
        t = torch.empty(2, device="cuda")
        t.to("cpu", copy=True).to(t.device)


_warm_simulated_gpu()


def _on_simulated_gpu(pack, unpack, tensors) -> dict:
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
        inside = _tensors_in(packed)
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


# --- Exercise 4.1: save_on_cpu that really copies ------------------------------------------------


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
        with _simulated_gpu():
            tensors = [
                torch.empty(5, 8, device="cuda"),
                torch.empty(4, 3, dtype=torch.float64, device="cuda"),
            ]
            return _on_simulated_gpu(pack, unpack, tensors)
    seen = {"copied": [], "keeps_history": [], "same_dtype": [], "same_values": [], "itself": []}

    def observed_pack(t):
        packed = pack(t)
        inside = _tensors_in(packed)
        seen["copied"].append(bool(inside) and not any(_shares_storage(p, t) for p in inside))
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
    reference = _grads_without_hooks(leaves, loss_fn)
    with saved_tensors_hooks(observed_pack, observed_unpack):
        loss = loss_fn()
    loss.backward()
    return {
        "gradients as without hooks": _same_grads(leaves, reference),
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

# --- Exercise 4.2: a size-threshold offloader -----------------------------------------------


def _oracle_threshold(min_bytes):
    return Offloader(min_bytes=min_bytes, device_type="cpu", mode="copy")


def _threshold_on_simulated_gpu(hooks, min_bytes):
    """A 4096-byte and a 512-byte activation, packed on a simulated GPU.

    (No parameter here: a fake GPU tensor that requires grad cannot enter autograd without a
    real GPU; the CPU cases judge the parameter rule.)"""
    if isinstance(hooks, Offloader):  # the oracle: the Offloader's rule, written out
        hooks = threshold_hooks(min_bytes)
    pack, unpack = hooks
    with _simulated_gpu():
        big, small = torch.empty(16, 64, device="cuda"), torch.empty(128, device="cuda")
        return _on_simulated_gpu(pack, unpack, [big, small])


def _run_threshold(answer, model_name, min_bytes):
    """Forward + backward under the hooks; observe gradients and what went to the host."""
    if model_name == "simulated-gpu":
        return _threshold_on_simulated_gpu(answer(min_bytes), min_bytes)
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
        offloaded, held, itself = {}, [], []

        def observed_pack(t):
            packed = pack(t)
            inside = _tensors_in(packed)
            itself.append(any(p is t for p in inside))
            if inside and not any(_shares_storage(p, t) for p in inside):
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

# --- Exercise 4.3: predict whether forward is compute-bound or transfer-bound ------------


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


# --- Exercise 4.4: predict where offloading costs no step time -------------------------------


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
