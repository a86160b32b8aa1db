"""Does course.offload.offloader keep gradients exact while it moves, keeps and counts saved tensors?

torch is the oracle: every program runs once with no hooks and once under an
:class:`Offloader`, and the gradients must be bit-identical. Byte counts are checked against
counts taken independently with torch's own ``saved_tensors_hooks``. GPU-only behaviour
(side stream, pinned pool, peak memory) is marked ``gpu`` and skipped on the CPU.
"""

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course import trace
from course.offload import BenchmarkResult, HostBufferPool, Offloader, benchmark, plot

pytestmark = pytest.mark.lesson04
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
ROOT = Path(__file__).resolve().parents[1]


def copying(**kw):
    """An offloader that really copies on the CPU (every tensor, unless told otherwise)."""
    return Offloader(**{"min_bytes": 0, "device_type": "cpu", "mode": "copy", **kw})


def grads(fn, ctx, params):
    """Run ``fn`` under ``ctx`` (forward) then backward outside it; return the gradients."""
    for p in params:
        p.grad = None
    with ctx:
        loss = fn()
    loss.backward()
    return [p.grad.clone() for p in params]


def assert_same_grads(fn, params, ctx):
    expected = grads(fn, contextlib.nullcontext(), params)
    got = grads(fn, ctx, params)
    for e, g in zip(expected, got):
        assert torch.equal(e, g)


def mlp(width=32, depth=3):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def saved_log(fn):
    """(tensor nbytes, storage nbytes, is a parameter's storage) per pack call, via torch's hooks."""
    log = []

    def pack(t):
        log.append(t)
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = fn()
    return loss, log


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("mode", ["copy", "passthrough"])
def test_mlp_gradients_match_torch(mode):
    model, x = mlp(), torch.randn(8, 32, requires_grad=True)
    params = [x, *model.parameters()]
    assert_same_grads(lambda: model(x).square().sum(), params, copying(mode=mode))


def test_transformer_layer_gradients_match_torch():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    x = torch.randn(3, 5, 32, requires_grad=True)
    off = copying()
    assert_same_grads(lambda: layer(x).square().sum(), [x, *layer.parameters()], off)
    assert off.stats.offloaded_bytes > 0 and off.stats.kept_param > 0


class _ScaledExp(torch.autograd.Function):
    """Saves an input, its view and its output: y = exp(a) * b[0]."""

    @staticmethod
    def forward(ctx, a, b):
        y = a.exp() * b[0]
        ctx.save_for_backward(a, a[1:], y, b)
        return y

    @staticmethod
    def backward(ctx, gy):
        a, a_tail, y, b = ctx.saved_tensors
        assert torch.equal(a_tail, a[1:])
        gb = torch.zeros_like(b)
        gb[0] = (gy * y / b[0]).sum()
        return gy * y, gb


def test_custom_function_gradients_match_torch():
    a = torch.randn(6, 4, requires_grad=True)
    b = torch.rand(3, requires_grad=True) + 0.5
    b.retain_grad()
    off = copying()
    assert_same_grads(lambda: _ScaledExp.apply(a * 1, b).sum(), [a], off)
    assert off.stats.aliased == 1  # a[1:] reused a's host copy


def test_retain_graph_unpacks_twice():
    model, x = mlp(), torch.randn(8, 32)
    off = copying()
    expected = grads(lambda: model(x).sum() * 2, contextlib.nullcontext(), list(model.parameters()))
    for p in model.parameters():
        p.grad = None
    with off:
        loss = model(x).sum()
    loss.backward(retain_graph=True)
    loss.backward()  # the host copies are still there; each storage comes back once more
    for p, e in zip(model.parameters(), expected):
        assert torch.equal(p.grad, e)
    assert off.stats.unpacked == 2 * off.stats.packed


@pytest.mark.parametrize("inside", [False, True], ids=["outside", "inside"])
def test_double_backward_matches_torch(inside):
    torch.manual_seed(0)
    w = torch.randn(5, 5, requires_grad=True)

    def second_derivative(ctx):
        with ctx:
            y = (w.tanh() @ w).sin().sum()
        with ctx if inside else contextlib.nullcontext():
            (g,) = torch.autograd.grad(y, w, create_graph=True)
            z = (g * g).sum()
        return torch.autograd.grad(z, w)[0]

    off = copying()
    assert torch.equal(second_derivative(contextlib.nullcontext()), second_derivative(off))
    assert off.stats.offloaded_bytes > 0


# ------------------------------------------------------------- one fetch per backward


def fetches_per_storage(lines):
    """storage index -> how many unpacks copied it back (not counting shared ones)."""
    counts = {}
    for line in lines:
        if line.startswith("unpack") and "offloaded=True" in line:
            storage = int(line.split("storage=")[1].split()[0])
            fetched = "source=resident" not in line
            counts[storage] = counts.get(storage, 0) + fetched
    return counts


def relu_mlp(width=64, depth=8):
    """Linear + ReLU blocks: relu's output is saved by relu and again by the next addmm."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        *[m for _ in range(depth) for m in (torch.nn.Linear(width, width), torch.nn.ReLU())]
    )


def test_is_each_storage_fetched_once_per_backward():
    model, x = relu_mlp(), torch.randn(16, 64, requires_grad=True)
    params = [x, *model.parameters()]
    expected = grads(lambda: model(x).square().sum(), contextlib.nullcontext(), params)
    off = copying()
    with trace.record() as events:
        got = grads(lambda: model(x).square().sum(), off, params)
    assert all(torch.equal(e, g) for e, g in zip(expected, got))  # bit-identical
    counts = fetches_per_storage(events.lines())
    assert counts and set(counts.values()) == {1}
    shared = sum("source=resident" in line for line in events.lines())
    assert shared == 8  # each relu output: fetched for the next addmm (or square), shared with relu
    assert off.stats.h2d_bytes == off.stats.offloaded_bytes  # out once, back once
    assert off.stats.moved_bytes == 2 * off.stats.offloaded_bytes


def test_does_retain_graph_fetch_once_per_backward_and_let_go_after_the_last_use():
    model, x = relu_mlp(depth=3), torch.randn(4, 64, requires_grad=True)
    off = copying()
    with off:
        loss = model(x).sum()
    copies = [ref() for ref in off._order]
    for round_ in (1, 2):
        with trace.record() as events:
            loss.backward(retain_graph=True)
        assert set(fetches_per_storage(events.lines()).values()) == {1}
        assert off.stats.h2d_bytes == round_ * off.stats.offloaded_bytes
        assert all(c.held is None and c.unpacks == 0 for c in copies)  # nothing kept after


def test_does_an_unpack_outside_backward_leave_the_count_alone():
    a = torch.randn(32, requires_grad=True)
    off = copying()
    with off:
        b = (a * 1).exp()  # exp saves its result b
        y = (b * b).sum()  # mul saves b twice: three users of one host copy
    assert torch.equal(b.grad_fn._saved_result, b)  # fetched, not counted, not held
    with trace.record() as events:
        y.backward()
    assert fetches_per_storage(events.lines()) == {0: 1}
    torch.testing.assert_close(a.grad, 2 * b.detach() * b.detach(), rtol=0, atol=0)


# --------------------------------------------------------------------------- aliasing


class _SaveViews(torch.autograd.Function):
    """Saves x, x[1:] and x.t(); backward checks the three still alias one storage."""

    aliased = None

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x, x[1:], x.t())
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        x, tail, xt = ctx.saved_tensors
        ptrs = {t.untyped_storage().data_ptr() for t in (x, tail, xt)}
        _SaveViews.aliased = len(ptrs) == 1 and torch.equal(tail, x[1:]) and torch.equal(xt, x.t())
        return g


def test_views_share_one_host_copy():
    x = torch.randn(16, 8, requires_grad=True)
    off = copying()
    with off:
        y = _SaveViews.apply(x * 1)
    y.sum().backward()
    assert off.stats.offloaded_bytes == 16 * 8 * 4  # the base once, not three times
    assert off.stats.aliased == 2
    assert _SaveViews.aliased  # unpacked views alias each other like the originals


def test_inplace_change_between_saves_makes_a_new_copy():
    # torch's save_on_cpu(pin_memory=True) copies at every pack: the oracle for values.
    # Eager refuses this program (exp's saved output is written); so does the checking
    # Offloader (tests/test_offload_versions.py), so we compare with the check off.
    def program(ctx):
        a = torch.arange(6.0, requires_grad=True)
        with ctx:
            b = a * 1
            c = b.exp()  # saves exp's output c
            c2 = c.clone()
            c.mul_(1.0)  # bumps c's version without changing values
            d = c * c2  # saves c (new version) and c2
        d.sum().backward()
        return a.grad

    off = copying(check_versions=False)
    assert torch.equal(program(torch.autograd.graph.save_on_cpu(pin_memory=True)), program(off))
    assert off.stats.aliased == 0  # c was saved twice, at two versions: two host copies
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        program(contextlib.nullcontext())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        program(copying())


def test_a_new_storage_at_a_freed_address_is_not_an_alias():
    # Two storages over one block of memory: the first dies, the second gets its address
    # (and the same version). save_on_cpu(pin_memory=True) copies at pack time: the oracle.
    a = torch.randn(256, requires_grad=True)
    memory = bytearray(1024)

    def program(ctx):
        a.grad = None
        with ctx:
            t1 = torch.frombuffer(memory, dtype=torch.float32).fill_(1.0)
            y1 = t1 * a  # mul saves t1 (a, a leaf, is kept)
            address = t1.untyped_storage().data_ptr()
            del t1  # the storage dies, the memory does not
            t2 = torch.frombuffer(memory, dtype=torch.float32).fill_(2.0)
            assert t2.untyped_storage().data_ptr() == address
            y2 = t2 * a
        (y1 + y2).sum().backward()
        return a.grad.clone()

    off = copying()
    assert torch.equal(program(off), program(torch.autograd.graph.save_on_cpu(pin_memory=True)))
    assert torch.equal(program(off), torch.full((256,), 3.0)) and off.stats.aliased == 0


# --------------------------------------------------------------------- what is kept


def test_parameters_are_never_offloaded():
    model, x = mlp(), torch.randn(8, 32)
    param_ptrs = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
    _, log = saved_log(lambda: model(x).sum())
    param_packs = sum(t.untyped_storage().data_ptr() in param_ptrs for t in log)
    distinct = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in log}
    off = copying()
    with off:
        model(x).sum()
    # addmm saves the weights of layers 2 and 3 (x needs no grad, so layer 1's is not saved)
    assert param_packs == 2 and off.stats.kept_param == param_packs
    assert off.stats.saved_bytes == sum(distinct.values())
    assert off.stats.offloaded_bytes == sum(n for p, n in distinct.items() if p not in param_ptrs)


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((64,), 3.0))

    def forward(self, x):
        return x * self.scale


def test_buffers_of_given_modules_are_kept():
    m, x = _Scaled(), torch.randn(4, 64, requires_grad=True)
    for modules, kept, offloaded in [((), 0, 256), ((m,), 1, 0)]:
        off = copying(modules=modules)
        assert_same_grads(lambda: m(x).sum(), [x], off)
        assert (off.stats.kept_param, off.stats.offloaded_bytes) == (kept, offloaded)


@given(min_bytes=st.integers(0, 5000))
@settings(max_examples=30, deadline=None)
def test_threshold_is_respected(min_bytes):
    x = torch.randn(4, 8)
    a = torch.randn(8, 16, requires_grad=True)
    program = lambda: (x @ a).exp().sum(dim=1).square().sum()  # noqa: E731
    _, log = saved_log(program)
    assert [t.untyped_storage().nbytes() for t in log] == [128, 256, 16]  # x, exp(x @ a), its row sums
    small = sum(n < min_bytes for n in (128, 256, 16))
    off = copying(min_bytes=min_bytes)
    assert_same_grads(program, [a], off)
    assert off.stats.kept_small == small
    assert (
        off.stats.kept_small + off.stats.kept_param + off.stats.aliased + len(off._order) == off.stats.packed
    )


def test_sparse_and_conjugate_tensors_are_kept():
    s = torch.sparse_coo_tensor([[0, 1, 2], [2, 0, 1]], [1.0, 2.0, 3.0], (3, 3), check_invariants=True)
    a = torch.randn(3, 4, requires_grad=True)
    z = torch.randn(4, dtype=torch.complex64, requires_grad=True)

    def program():
        w = (z * 1).conj()  # a lazy conjugate view: copying its bytes would drop the conj bit
        return torch.sparse.mm(s, a * 1).sum() + (w * w).abs().sum()

    off = copying()
    assert_same_grads(program, [a, z], off)
    assert off.stats.kept_other == 3  # the sparse matrix, and w saved twice by mul
    assert off.stats.offloaded_bytes == 4 * 8  # abs's input w * w, a plain complex tensor


def test_exclude_region_keeps_everything_inside():
    a = torch.randn(64, requires_grad=True)
    off = copying()
    with off:
        b = (a * 1).exp()  # exp's result: offloaded
        with off.exclude():
            c = (b * 1).sin()  # sin's input (b * 1): kept
            with off.exclude():
                d = c.cos()  # cos's input c: kept (nested)
        e = d.tanh()  # tanh's output: offloaded again
    e.sum().backward()
    assert off.stats.kept_excluded == 2
    assert off.stats.offloaded_bytes == 2 * 64 * 4
    with off:
        pass
    assert off._excluded == 0


def test_trace_events_say_what_moved():
    a = torch.randn(8, requires_grad=True)
    off = copying()
    with trace.record() as events:
        with off:
            y = (a * a).exp()
        y.sum().backward()
    lines = events.lines()
    assert lines[:3] == [
        "pack t0 (8,) offloaded=False reason=param",
        "pack t0 (8,) offloaded=False reason=param",
        "pack t1 (8,) alias=False offloaded=True storage=0",
    ]
    # exp's backward first: its output comes back from the host as a new tensor (t2)
    assert lines[3:] == [
        "unpack ExpBackward0 t2 (8,) offloaded=True saved=t1 source=copied storage=0",
        "unpack MulBackward0 t3 (8,) offloaded=False reason=param saved=t0",
        "unpack MulBackward0 t4 (8,) offloaded=False reason=param saved=t0",
    ]


# ---------------------------------------------------------------- modes, reprs, pool


def test_reprs_are_deterministic():
    assert (
        repr(Offloader(device_type="cpu")) == "Offloader(device='cpu', mode='passthrough', min_bytes=1048576)"
    )
    assert repr(copying(min_bytes=16)) == "Offloader(device='cpu', mode='copy', min_bytes=16)"
    if not torch.cuda.is_available():
        assert repr(Offloader()) == "Offloader(device='cpu', mode='passthrough', min_bytes=1048576)"
    assert repr(HostBufferPool()) == "HostBufferPool(pin_memory=False, allocations=0, reuses=0, free=0)"


def test_bad_modes_raise():
    with pytest.raises(ValueError, match="mode must be one of"):
        Offloader(mode="fast")
    with pytest.raises(ValueError, match="mode='stream' needs"):
        Offloader(device_type="cpu", mode="stream")


def test_passthrough_moves_nothing_but_counts():
    model, x = mlp(), torch.randn(8, 32)
    off = Offloader(device_type="cpu", min_bytes=0)
    assert_same_grads(lambda: model(x).sum(), list(model.parameters()), off)
    assert off.stats.moved_bytes == 0 and off.stats.kept_passthrough > 0 and off.stats.saved_bytes > 0


def test_pool_buffers_are_reused_across_steps():
    model, x = mlp(), torch.randn(8, 32)
    off = copying()
    grads(lambda: model(x).sum(), off, list(model.parameters()))
    first = off.pool.allocations
    grads(lambda: model(x).sum(), off, list(model.parameters()))
    assert first > 0 and off.pool.allocations == first and off.pool.reuses == first


# The timing model (course/offload/model.py) has its own tests: tests/test_offload_model.py.


# ------------------------------------------------------------------------- harness


def test_harness_on_cpu_reports_sane_fields():
    model, x = mlp(width=64), torch.randn(16, 64)
    r = benchmark(model, [x], steps=2, progress=False)
    assert isinstance(r, BenchmarkResult) and (r.device, r.label, r.steps) == ("cpu", "CPU", 2)
    assert [row.strategy for row in r.rows] == [
        "none",
        "identity hooks",
        "save_on_cpu",
        "save_on_cpu(pin_memory=True)",
        "course",
    ]
    assert all(row.peak_bytes is None and row.step_s > 0 for row in r.rows)
    assert len({row.saved_bytes for row in r.rows}) == 1  # one definition for every strategy
    moved = {row.strategy: row.moved_bytes for row in r.rows}
    assert moved["none"] == moved["identity hooks"] == moved["save_on_cpu"] == moved["course"] == 0
    _, log = saved_log(lambda: model(x).sum())
    assert moved["save_on_cpu(pin_memory=True)"] == sum(t.nbytes for t in log)  # every save copied
    assert r.table().splitlines()[0].startswith("strategy (CPU, 2 steps)")
    assert "x none" in r.table() and "x none" not in r.table(times=False)


def test_harness_counts_weights_in_save_on_cpu_bytes():
    # The MLP: 8 layers of width 1024, batch 64, input requiring no grad.
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        *[m for _ in range(8) for m in (torch.nn.Linear(1024, 1024), torch.nn.ReLU())]
    )
    strategies = {
        "save_on_cpu(pin_memory=True)": lambda: torch.autograd.graph.save_on_cpu(pin_memory=True),
        "course": lambda: copying(),
    }
    r = benchmark(model, [torch.randn(64, 1024)], strategies=strategies, steps=1, progress=False)
    # addmm saves weight.t() (a view of the weight's storage) for the input's gradient, so
    # layers 2..8 save theirs; layer 1's input needs no grad.
    weights = 7 * 1024 * 1024 * 4
    act = 64 * 1024 * 4  # one activation: the input, or one relu output
    assert (
        r.row("course").saved_bytes == r.row("save_on_cpu(pin_memory=True)").saved_bytes == weights + 9 * act
    )
    assert round(100 * weights / (weights + 9 * act)) == 93
    # torch copies every save: the weights, the input, and relu outputs 1..7 twice (relu and
    # the next addmm save the same storage); on the CPU its unpack copies nothing back.
    assert r.row("save_on_cpu(pin_memory=True)").moved_bytes == weights + (1 + 2 * 7 + 1) * act
    # course copies each activation storage once and never a weight
    assert r.row("course").offloaded_bytes == 9 * act


def test_harness_accepts_custom_strategies_and_plots():
    import matplotlib

    matplotlib.use("Agg")
    model, x = mlp(), torch.randn(8, 32)
    r = benchmark(model, [x], strategies={"copy": lambda: copying()}, steps=1, progress=False)
    row = r.row("copy")
    assert row.offloaded_bytes > 0 and row.moved_bytes == 2 * row.offloaded_bytes  # out once, back once
    ax = plot(r)
    assert ax.get_ylabel() == "ms per step" and "CPU" in ax.get_title()
    with pytest.raises(KeyError):
        benchmark(model, [x], strategies=["nope"])


def test_benchmark_script_quick_runs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "offload.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "CPU" in out.stdout and "course" in out.stdout


# ---------------------------------------- stream bookkeeping, with a recording fake device


class _FakeStream:
    def __init__(self, device, name):
        self.device, self.name = device, name

    def wait_stream(self, other):
        self.device.log.append(f"{self.name} waits for {other.name}")

    def wait_event(self, event):
        self.device.log.append(f"{self.name} waits for event {event.n}")


class _FakeEvent:
    def __init__(self, device):
        self.device, self.n = device, len(device.events)
        device.events.append(self)

    def record(self, stream):
        self.device.log.append(f"event {self.n} on {stream.name}")

    def query(self):
        return True


class _FakeDevice:
    """Just the part of ``torch.cuda`` the stream mode calls, logging who waits for what."""

    def __init__(self):
        self.log, self.events = [], []
        self.current = self.compute = _FakeStream(self, "compute")

    def Stream(self, device):  # noqa: N802 - torch.cuda's name
        return _FakeStream(self, "side")

    def Event(self):  # noqa: N802
        return _FakeEvent(self)

    def current_stream(self, device=None):
        return self.current

    @contextlib.contextmanager
    def stream(self, s):
        previous, self.current = self.current, s
        try:
            yield
        finally:
            self.current = previous


def faked_stream_mode(prefetch):
    off = copying(prefetch=prefetch)
    off.mode, off._module = "stream", _FakeDevice()  # the CPU does the copies for real
    return off


@pytest.mark.parametrize("prefetch", [0, 1, 2])
def test_stream_mode_prefetches_in_reverse_pack_order(prefetch):
    a = torch.randn(16, requires_grad=True)
    program = lambda: a.exp().exp().exp().exp().sum()  # noqa: E731 - each exp saves its output
    off = faked_stream_mode(prefetch)
    assert_same_grads(program, [a], off)
    log = off._module.log
    # forward: four device-to-host copies, each on the side stream after the compute stream
    assert log[:8] == [line for i in range(4) for line in ("side waits for compute", f"event {i} on side")]
    # backward: the last pack first; after that every storage was already on its way
    with trace.record() as events:
        off = faked_stream_mode(prefetch)
        assert_same_grads(program, [a], off)
    sources = [e.split("source=")[1].split()[0] for e in events.lines() if e.startswith("unpack")]
    assert sources == ["copied"] + (["prefetched"] * 3 if prefetch else ["copied"] * 3)
    storages = [e.split("storage=")[1].split()[0] for e in events.lines() if e.startswith("unpack")]
    assert storages == ["3", "2", "1", "0"]
    assert off.stats.prefetched == (3 if prefetch else 0)
    # the compute stream waits once per unpack, and only for events of host-to-device copies
    waits = [line for line in off._module.log if line.startswith("compute waits for event")]
    assert len(waits) == 4 and all(int(w.split()[-1]) >= 4 for w in waits)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_does_stream_mode_fetch_each_storage_once_too(prefetch):
    model, x = relu_mlp(width=16, depth=4), torch.randn(4, 16, requires_grad=True)
    params = [x, *model.parameters()]
    expected = grads(lambda: model(x).square().sum(), contextlib.nullcontext(), params)
    off = faked_stream_mode(prefetch)
    with trace.record() as events:
        got = grads(lambda: model(x).square().sum(), off, params)
    assert all(torch.equal(e, g) for e, g in zip(expected, got))
    assert set(fetches_per_storage(events.lines()).values()) == {1}
    assert off.stats.h2d_bytes == off.stats.offloaded_bytes
    # one wait on the compute stream per fetch, none for the unpacks that share it
    waits = [line for line in off._module.log if line.startswith("compute waits for event")]
    assert len(waits) == len(fetches_per_storage(events.lines()))


# ------------------------------------------------------------------------- GPU only


def cuda_mlp(width=1024, depth=8):
    return mlp(width, depth).cuda()


@pytest.mark.gpu
@gpu
def test_stream_mode_gradients_match_torch_on_gpu():
    model, x = cuda_mlp(), torch.randn(256, 1024, device="cuda", requires_grad=True)
    off = Offloader(min_bytes=0)
    assert repr(off) == "Offloader(device='cuda', mode='stream', min_bytes=0, prefetch=2)"
    params = [x, *model.parameters()]
    expected = grads(lambda: model(x).square().sum(), contextlib.nullcontext(), params)
    for _ in range(2):  # the second run reuses pooled buffers and a warm side stream
        off.reset_stats()
        got = grads(lambda: model(x).square().sum(), off, params)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e)  # same kernels on the same stream: equal in practice
    assert off.stats.prefetched > 0 and off.stats.kept_param == 8  # the 8 weights (x needs grad)


@pytest.mark.gpu
@gpu
def test_side_stream_copies_and_pinned_pool_reuse():
    model, x = cuda_mlp(), torch.randn(256, 1024, device="cuda")
    off = Offloader(min_bytes=0)
    grads(lambda: model(x).sum(), off, list(model.parameters()))
    torch.cuda.synchronize()
    first = off.pool.allocations
    assert off.pool.pin_memory and first > 0
    assert set(off._side) == {torch.device("cuda", torch.cuda.current_device())}
    assert off._side[next(iter(off._side))] != torch.cuda.current_stream()
    grads(lambda: model(x).sum(), off, list(model.parameters()))
    torch.cuda.synchronize()
    assert off.pool.allocations == first and off.pool.reuses >= first
    assert all(buf.is_pinned() for bufs in off.pool._free.values() for buf, _ in bufs)


@pytest.mark.gpu
@gpu
def test_retain_graph_and_views_on_gpu():
    x = torch.randn(512, 512, device="cuda", requires_grad=True)
    off = Offloader(min_bytes=0)
    with off:
        y = _SaveViews.apply(x * 1)
        z = (x * 1).exp().sum()
    (y.sum() + z).backward(retain_graph=True)
    assert _SaveViews.aliased
    (y.sum() + z).backward()
    assert torch.allclose(x.grad, 2 * (1 + x.exp()))


@pytest.mark.gpu
@gpu
def test_offloading_reduces_peak_memory():
    model, x = cuda_mlp(4096, 8), torch.randn(4096, 4096, device="cuda")
    r = benchmark(model, [x], strategies=["none", "course"], steps=2, progress=False)
    assert r.row("course").peak_bytes < r.row("none").peak_bytes
