"""How much slower (or faster) is course.autograd_graph than torch.autograd.graph?

The same workloads run under torch's and course's version of each API, in one process,
interleaved (torch, course, course, torch, ...), many repeats. We print, per API and
workload, the median time of each and the median of the paired ratios course/torch
(1.00 = as fast as torch; below 1 = faster). Also shown: each API's cost over the bare
workload (torch/plain), for scale, and the ratio of the best runs of each (the
machine's other load disturbs those least).

Workloads, small (per-op Python overhead is what the APIs add):
  chain  200 small elementwise ops on a (64,) tensor, a third of them in place, + backward
  mlp    8 layers Linear(64, 64) + tanh on a (32, 64) batch, forward + backward

and, for allow_mutation_on_saved_tensors, three at the sizes people train with; each writes
in place to memory that backward has saved, between forward and backward:
  linear2048     Linear(2048, 2048) on a (64, 2048) batch; weight.mul_(0.999) under no_grad
                 (addmm saved weight.t(): the whole weight is cloned, in torch and in course)
  odd_columns    (1024, 1024) tensor b whose b[:, ::2] was saved; b[:, 1::2].mul_(2)
                 (other bytes: nothing to clone)
  encoder512     TransformerEncoderLayer(512, 8, 2048) on a (4, 32, 512) batch; every
                 parameter p.mul_(0.999) under no_grad (an optimizer step before backward)
Each is also run once per context for correctness: the gradients must equal the same
program's without the context, with the write moved after backward ("right" columns).
Their "plain" is that program: torch/plain is what the context costs.

Usage:  python benchmarks/autograd_graph.py [--quick] [--repeats N] [--large-repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.autograd.graph as torch_graph

import course.autograd.mutation as course_mutation
import course.autograd.saved_tensors as course_saved

try:
    from course.autograd_graph import register_multi_grad_hook as course_multi_grad_hook
except ImportError:
    try:
        from course.autograd.hooks import register_multi_grad_hook as course_multi_grad_hook
    except ImportError:
        course_multi_grad_hook = None


def make_chain():
    a = torch.randn(64, requires_grad=True)

    def run(register=None):
        x = a * 1.0
        for i in range(200):
            if i % 3 == 0:
                x = x.sin()  # saves its input
            elif i % 3 == 1:
                x = x * 1.001  # saves nothing (a number)
            else:
                x.add_(0.01)  # in place, on a tensor nobody saved
        handle = register([a, x], lambda grads: None) if register else None
        x.sum().backward()
        a.grad = None
        if handle is not None:
            handle.remove()

    return run


def make_mlp():
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(64, 64), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers)
    params = list(model.parameters())
    x = torch.randn(32, 64)

    def run(register=None):
        handle = register(params, lambda grads: None) if register else None
        model(x).sum().backward()
        for p in params:
            p.grad = None
        if handle is not None:
            handle.remove()

    return run


def make_linear2048():
    """One step: forward in the context, weight.mul_ under no_grad, backward."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(2048, 2048)
    x = torch.randn(64, 2048, requires_grad=True)  # a hidden layer's input: addmm saves weight.t()
    params = [x, *layer.parameters()]

    def update():
        with torch.no_grad():
            layer.weight.mul_(0.999)

    return _step(lambda: layer(x).square().sum(), update, params)


def make_odd_columns():
    torch.manual_seed(0)
    a = torch.randn(1024, 1024, requires_grad=True)
    kept = {}

    def loss():
        kept["b"] = b = a * 1.0
        return (b[:, ::2] ** 2).sum()  # pow saves the strided view b[:, ::2]

    return _step(loss, lambda: kept.pop("b")[:, 1::2].mul_(2), [a])


def make_encoder512():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True)
    x = torch.randn(4, 32, 512, requires_grad=True)
    params = [x, *layer.parameters()]

    def update():
        with torch.no_grad():
            for p in layer.parameters():
                p.mul_(0.999)

    return _step(lambda: layer(x).square().sum(), update, params)


def _step(loss_fn, write, params):
    """``run(allow)``: forward, ``write()``, backward inside ``allow()``; returns the grads.

    ``allow=None`` is the plain program: no context, and the write comes after backward, so
    it changes nothing backward reads (the oracle for "right", and "plain" for scale).
    """

    def run(allow=None):
        for p in params:
            p.grad = None
        if allow is None:
            loss_fn().backward()
            write()
        else:
            with allow():
                loss = loss_fn()
                write()
                loss.backward()
        return [p.grad for p in params]

    return run


LARGE = {"linear2048": make_linear2048, "odd_columns": make_odd_columns, "encoder512": make_encoder512}


def is_right(make, allow):
    """Does ``allow``'s context give the plain program's gradients (fresh state each)?"""
    expected, got = make()(None), make()(allow)
    return all(torch.allclose(g, e, rtol=1e-5, atol=1e-6) for g, e in zip(got, expected))


def _identity_pack(t):
    return t.detach()


def _identity_unpack(t):
    return t


def apis():
    """name -> (torch variant, course variant); each variant runs one workload once."""

    def under(ctx_factory):
        def variant(work):
            with ctx_factory():
                work()

        return variant

    table = {
        "saved_tensors_hooks": (
            under(lambda: torch_graph.saved_tensors_hooks(_identity_pack, _identity_unpack)),
            under(lambda: course_saved.saved_tensors_hooks(_identity_pack, _identity_unpack)),
        ),
        "save_on_cpu": (
            under(torch_graph.save_on_cpu),
            under(course_saved.save_on_cpu),
        ),
        "allow_mutation_on_saved_tensors": (
            under(torch_graph.allow_mutation_on_saved_tensors),
            under(course_mutation.allow_mutation_on_saved_tensors),
        ),
    }
    if course_multi_grad_hook is not None:
        table["register_multi_grad_hook"] = (
            lambda work: work(torch_graph.register_multi_grad_hook),
            lambda work: work(course_multi_grad_hook),
        )
    return table


def timed(fn, *args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def measure(work, torch_variant, course_variant, repeats):
    """Median seconds of (plain, torch, course), the median paired ratio course/torch, and
    the ratio of the fastest runs (least disturbed by other processes on a shared machine)."""
    for _ in range(3):  # warm up both
        torch_variant(work)
        course_variant(work)
    t_plain, t_torch, t_course, ratios = [], [], [], []
    for i in range(repeats):
        t_plain.append(timed(work))  # the bare workload, for scale
        if i % 2:  # alternate who goes first
            tc, tt = timed(course_variant, work), timed(torch_variant, work)
        else:
            tt, tc = timed(torch_variant, work), timed(course_variant, work)
        t_torch.append(tt)
        t_course.append(tc)
        ratios.append(tc / tt)
    medians = [statistics.median(t) for t in (t_plain, t_torch, t_course)]
    return (*medians, statistics.median(ratios), min(t_course) / min(t_torch))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 3 repeats, 1 of the large workloads"
    )
    parser.add_argument("--repeats", type=int, default=150)
    parser.add_argument("--large-repeats", type=int, default=15, help="repeats of the large workloads")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    torch.set_num_threads(1)  # less noise on a shared machine

    workloads = {"chain": make_chain(), "mlp": make_mlp()}
    print(f"torch {torch.__version__}, {repeats} interleaved repeats, 1 thread")
    if course_multi_grad_hook is None:
        print(
            "note: register_multi_grad_hook skipped (course.autograd_graph / course.autograd.hooks "
            "do not provide it yet)"
        )
    header = f"{'api':34s} {'workload':8s} {'torch ms':>9s} {'course ms':>10s} "
    print(header + f"{'course/torch':>13s} {'(best runs)':>12s} {'torch/plain':>12s}")
    for api, (torch_variant, course_variant) in apis().items():
        for name, work in workloads.items():
            plain, tt, tc, ratio, best = measure(work, torch_variant, course_variant, repeats)
            print(
                f"{api:34s} {name:8s} {tt * 1e3:9.3f} {tc * 1e3:10.3f} "
                f"{ratio:13.2f} {best:12.2f} {tt / plain:12.2f}"
            )
    large(1 if args.quick else args.large_repeats)


def large(repeats):
    """allow_mutation_on_saved_tensors at real sizes: the same columns, plus who is right."""
    contexts = {
        "torch": torch_graph.allow_mutation_on_saved_tensors,
        "course": course_mutation.allow_mutation_on_saved_tensors,
    }
    print(f"\nallow_mutation_on_saved_tensors at real sizes, {repeats} interleaved repeats")
    print(
        f"{'workload':14s} {'torch ms':>9s} {'course ms':>10s} {'course/torch':>13s} {'(best runs)':>12s} "
        f"{'torch/plain':>12s} {'torch right':>12s} {'course right':>13s}"
    )
    for name, make in LARGE.items():
        right = {who: "yes" if is_right(make, allow) else "NO" for who, allow in contexts.items()}
        run = make()
        plain, tt, tc, ratio, best = measure(
            run, lambda work: work(contexts["torch"]), lambda work: work(contexts["course"]), repeats
        )
        print(
            f"{name:14s} {tt * 1e3:9.2f} {tc * 1e3:10.2f} {ratio:13.2f} {best:12.2f} "
            f"{tt / plain:12.2f} {right['torch']:>12s} {right['course']:>13s}"
        )


if __name__ == "__main__":
    main()
