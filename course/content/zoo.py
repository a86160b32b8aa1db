"""Lesson 07's descriptor zoo: for each descriptor class, the smallest program that makes it.

``ZOO`` maps a program's name to a :class:`ZooProgram`: the stage of AOTAutograd that makes
the classes it is there to show, how torch produces it (``via``), and why AOTAutograd needs
them. :func:`torch_descriptors` runs a program through torch; :func:`course_descriptors`
through :mod:`course.aot.joint` (which refuses, naming the case, what it does not build). For
the Philox and Dummy classes, which no CPU graph shows, the descriptors are built by hand,
with the reason. Lesson 07's zoo section prints them; tests/test_zoo.py compares torch,
``from_torch`` and course.joint. Lessons 06 and 07 export their own programs with
:func:`export_graph_module` and wrap plain functions in :class:`Fn`; exercise 7.5 predicts
the outputs of one more such program.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings
from collections.abc import Callable

import torch
import torch.fx as fx
from torch import nn
from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

from course.aot import descriptors as cd

__all__ = [
    "ZOO",
    "Fn",
    "ZooProgram",
    "course_descriptors",
    "export_graph_module",
    "inner_sizes",
    "torch_descriptors",
    "zoo_classes",
]


def export_graph_module(mod: nn.Module, args: tuple) -> fx.GraphModule:
    """Torch's joint graph of ``mod(*args)``, with descriptors (the GraphModule only)."""
    with contextlib.ExitStack() as stack:
        return aot_export_joint_with_descriptors(stack, mod, args).graph_module


class Fn(nn.Module):
    """Export takes modules: wrap a plain function of tensors."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


class PrintInBackward(torch.autograd.Function):
    """``x * 2`` whose backward prints: a side effect that only the backward has."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        torch.ops.aten._print("backward ran")
        return grad * 2


class StashOnCtx(torch.autograd.Function):
    """``sin(x) * 2`` that keeps ``sin(x)`` as ``ctx.y`` instead of ``save_for_backward``."""

    @staticmethod
    def forward(ctx, x):
        y = x.sin()
        ctx.y = y  # stashed on ctx: eager autograd checks no version counter for it
        return y * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2 * ctx.y.cos()


def _mutate_first(a, b):
    a.mul_(2)  # a and b share memory, so this changes b too
    return a + b


def _mutate_and_transpose(a, b):
    a.mul_(2)
    b.t_()  # a metadata mutation: b's shape and strides change, its data does not
    return a + 1


def _two_views(x):
    y = x * 2
    return y[0], y[1]


def _print_in_forward(x):
    torch.ops.aten._print("forward ran")
    return x.sin()


def _dropout(x):
    return nn.functional.dropout(x, 0.5, training=True)


def _symbolic_two_tensor():
    """A TwoTensor whose sizes are symbols (s0, s1): what torch.compile(dynamic=True) feeds."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.testing._internal.two_tensor import TwoTensor

    mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=False)
    fake = mode.from_tensor(TwoTensor(torch.randn(2, 3), torch.randn(2, 3)))
    return mode, fake.requires_grad_()


def _two_tensor():
    from torch.testing._internal.two_tensor import TwoTensor

    return TwoTensor(torch.randn(3), torch.randn(3)).requires_grad_()


def _aliases_of_a_grad_base():
    base = torch.randn(4, requires_grad=True).clone()  # not a leaf: its views may be mutated
    return base[:2], base[1:3]


def _detached_aliases():
    base = torch.randn(4)
    return base[:2].detach(), base[1:3].detach()  # share memory, but neither has a ._base


def _detached_square_aliases():
    base = torch.randn(2, 2)
    return base.detach(), base.t().detach()


@dataclasses.dataclass(frozen=True)
class ZooProgram:
    """One program of the zoo.

    Attributes:
        stage: the AOTAutograd stage that makes ``shows`` (as in course.aot.descriptors).
        shows: the descriptor classes this program is the smallest example of.
        why: one sentence: why AOTAutograd needs them.
        make: ``() -> (module, args)``, or ``(module, args, fake mode)`` when the inputs are
            fake tensors with symbolic sizes.
        via: how torch produces them: "export" (aot_export_joint_with_descriptors),
            "compile" (torch.compile's partitioner, the forward graph's outputs), "cuda"
            (export under functionalize_rng_ops, on a CUDA device only), "hand" (no program:
            see ``hand``).
        hand: for "cuda" and "hand", the descriptors built by hand, as torch would place them.
    """

    stage: str
    shows: tuple[str, ...]
    why: str
    make: Callable[[], tuple]
    via: str = "export"
    hand: tuple = ()
    program: str = ""  # the program in one line, for the lesson's printout


def _fn(fn, make_args):
    return lambda: (Fn(fn), make_args())


ZOO: dict[str, ZooProgram] = {
    "linear": ZooProgram(
        "1 plain",
        ("ParamAOTInput", "PlainAOTInput", "PlainAOTOutput"),
        "the graph has no calling convention, so each input says which parameter or argument it is",
        lambda: (nn.Linear(3, 2), (torch.randn(4, 3),)),
    ),
    "batchnorm": ZooProgram(
        "1 plain",
        ("BufferAOTInput",),
        "buffers are inputs too, kept apart from parameters because they get no gradient",
        lambda: (nn.BatchNorm1d(3).train(), (torch.randn(4, 3),)),
    ),
    "linear_backward": ZooProgram(
        "3 autograd",
        ("TangentAOTInput", "GradAOTOutput"),
        "the joint runs the backward too: it takes d(loss)/d(output) in and gives each input's gradient out",
        lambda: (nn.Linear(3, 2), (torch.randn(4, 3),)),
    ),
    "batchnorm_update": ZooProgram(
        "2 views and mutations",
        ("InputMutationAOTOutput",),
        "a functional graph cannot write a buffer, so it returns the new value and the caller copies it back",
        lambda: (nn.BatchNorm1d(3).train(), (torch.randn(4, 3),)),
    ),
    "aliased_inputs": ZooProgram(
        "2 views and mutations",
        ("ViewBaseAOTInput",),
        "two inputs share memory and one is written: the graph takes their common base once and "
        "rebuilds both views from it, so the write reaches both",
        _fn(_mutate_first, _aliases_of_a_grad_base),
    ),
    "detached_aliases": ZooProgram(
        "2 views and mutations",
        ("SyntheticBaseAOTInput",),
        "the same, for aliases with no ._base to share (detached views): AOTAutograd makes up a "
        "base over their whole storage",
        _fn(_mutate_first, _detached_aliases),
    ),
    "aliased_transpose_": ZooProgram(
        "2 views and mutations",
        ("MetadataMutationAOTOutput",),
        "an aliased input merged into a synthetic base also had its shape changed (t_()): the "
        "graph returns it so the runtime can apply the new shape to the caller's tensor",
        _fn(_mutate_and_transpose, _detached_square_aliases),
    ),
    "two_views": ZooProgram(
        "2 views and mutations",
        ("IntermediateBaseAOTOutput",),
        "outputs that view one intermediate are rebuilt as views outside the graph's "
        "autograd.Function, from this extra output, so autograd's view tracking still works on them",
        _fn(_two_views, lambda: torch.randn(2, 3, requires_grad=True)),
    ),
    "two_tensor": ZooProgram(
        "4 subclasses",
        ("SubclassGetAttrAOTInput", "SubclassGetAttrAOTOutput"),
        "compiled code sees plain tensors only: a subclass enters as its inner tensors, one "
        "placeholder per attribute",
        _fn(lambda t: t * 2, _two_tensor),
    ),
    "two_tensor_symbolic": ZooProgram(
        "4 subclasses",
        (
            "SubclassSizeAOTInput",
            "SubclassSizeAOTOutput",
            "SubclassStrideAOTInput",
            "SubclassStrideAOTOutput",
        ),
        "with symbolic sizes, rebuilding the subclass needs its outer sizes and strides, so the "
        "symbols that are not constants travel as extra integer inputs and outputs",
        lambda: (Fn(lambda t: t * 2), *_symbolic_two_tensor()[::-1]),
    ),
    "print_forward": ZooProgram(
        "5 tokens and RNG",
        ("ForwardTokenAOTInput", "ForwardTokenAOTOutput"),
        "a functional graph may reorder or drop ops with no data dependence, so a side effect "
        "takes a token in and gives a new one out, which fixes its order",
        _fn(_print_in_forward, lambda: torch.randn(3, requires_grad=True)),
    ),
    "print_backward": ZooProgram(
        "5 tokens and RNG",
        ("BackwardTokenAOTInput", "BackwardTokenAOTOutput"),
        "the same for a side effect in the backward, which gets a token of its own",
        _fn(lambda x: PrintInBackward.apply(x).sin(), lambda: torch.randn(3, requires_grad=True)),
    ),
    "dropout_rng": ZooProgram(
        "5 tokens and RNG",
        (
            "PhiloxForwardSeedAOTInput",
            "PhiloxForwardBaseOffsetAOTInput",
            "PhiloxBackwardSeedAOTInput",
            "PhiloxBackwardBaseOffsetAOTInput",
            "PhiloxUpdatedForwardOffsetAOTOutput",
            "PhiloxUpdatedBackwardOffsetAOTOutput",
        ),
        "with functionalize_rng_ops, random numbers are a pure function of (seed, offset): the "
        "seeds come in and the advanced offsets go out, so a recomputed dropout draws the same mask",
        _fn(_dropout, lambda: torch.randn(4, requires_grad=True)),
        via="cuda",
        # as torch's RNG wrapper lays them out: seeds and offsets after primals and tangents,
        # an updated offset after each half of the output
        hand=(
            cd.PlainAOTInput(0),
            cd.TangentAOTInput(cd.PlainAOTOutput(0)),
            cd.PhiloxForwardSeedAOTInput(),
            cd.PhiloxForwardBaseOffsetAOTInput(),
            cd.PhiloxBackwardSeedAOTInput(),
            cd.PhiloxBackwardBaseOffsetAOTInput(),
            cd.PlainAOTOutput(0),
            cd.PhiloxUpdatedForwardOffsetAOTOutput(),
            cd.GradAOTOutput(cd.PlainAOTInput(0)),
            cd.PhiloxUpdatedBackwardOffsetAOTOutput(),
        ),
    ),
    "saved_sin": ZooProgram(
        "6 partitioner",
        ("SavedForBackwardsAOTOutput",),
        "split into forward and backward graphs, the forward returns what the backward needs",
        _fn(lambda x: x.sin(), lambda: torch.randn(3, requires_grad=True)),
        via="compile",
    ),
    "stash_on_ctx": ZooProgram(
        "6 partitioner",
        ("SavedForBackwardsNoVcCheckAOTOutput",),
        "a tensor a custom Function kept as ctx.y (not save_for_backward) was never version "
        "checked in eager, so the compiled backward must not check it either",
        _fn(StashOnCtx.apply, lambda: torch.randn(3, requires_grad=True)),
        via="compile",
    ),
    "dummy": ZooProgram(
        "1 plain",
        ("DummyAOTInput", "DummyAOTOutput"),
        "placeholders for internal calls that need a descriptor argument but have no real one",
        lambda: (None, ()),
        via="hand",
        hand=(cd.DummyAOTInput(0), cd.DummyAOTOutput(0)),
    ),
}


_PROGRAM_TEXT = {
    "linear": "nn.Linear(3, 2)(x), x = randn(4, 3)",
    "batchnorm": "nn.BatchNorm1d(3).train()(x)",
    "linear_backward": "nn.Linear(3, 2)(x), the joint's backward half",
    "batchnorm_update": "nn.BatchNorm1d(3).train()(x), which writes its running stats",
    "aliased_inputs": "a.mul_(2); return a + b   (a, b = base[:2], base[1:3]; base requires grad)",
    "detached_aliases": "a.mul_(2); return a + b   (a, b = base[:2].detach(), base[1:3].detach())",
    "aliased_transpose_": "a.mul_(2); b.t_(); return a + 1   (a, b = m.detach(), m.t().detach())",
    "two_views": "y = x * 2; return y[0], y[1]",
    "two_tensor": "t * 2   (t = TwoTensor(a, b), a subclass holding two tensors)",
    "two_tensor_symbolic": "t * 2   (the same TwoTensor, its sizes symbols s0, s1)",
    "print_forward": "aten._print('forward ran'); return x.sin()",
    "print_backward": "PrintInBackward.apply(x).sin()   (its backward calls aten._print)",
    "dropout_rng": "dropout(x, 0.5) with functionalize_rng_ops=True",
    "saved_sin": "x.sin(), split by torch.compile's partitioner",
    "stash_on_ctx": "StashOnCtx.apply(x)   (forward keeps ctx.y = x.sin()), split the same way",
    "dummy": "no program",
}
ZOO = {name: dataclasses.replace(p, program=_PROGRAM_TEXT[name]) for name, p in ZOO.items()}


def _descs(gm: fx.GraphModule) -> tuple[list, list]:
    """(placeholder descriptors, output descriptors) of a graph, as stored (None kept)."""
    return (
        [n.meta.get("desc") for n in gm.graph.find_nodes(op="placeholder")],
        list(gm.graph.output_node().meta.get("desc", [])),
    )


def _built(name: str) -> tuple:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        made = ZOO[name].make()
    mod, args = made[0], made[1]
    return mod, (args if isinstance(args, tuple) else (args,)), (made[2] if len(made) > 2 else None)


def _compiled_forward(mod: nn.Module, args: tuple) -> fx.GraphModule:
    """The forward graph torch.compile's partitioner (default_partition) makes for mod."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import default_partition

    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm

    backend = aot_autograd(fw_compiler=keep, bw_compiler=keep, partition_fn=default_partition)
    torch.compile(mod, backend=backend, fullgraph=True)(*args)  # compiles the forward and backward
    return graphs[0]


@functools.cache
def torch_descriptors(name: str) -> tuple[tuple, tuple]:
    """What torch makes for ``ZOO[name]``: (placeholder descriptors, output descriptors),
    torch's own objects. "compile" programs give the partitioned forward graph's.

    Raises:
        RuntimeError: a "cuda" program without CUDA (torch refuses to functionalize a CPU
            random op); a "hand" program (torch makes none: see ``ZOO[name].hand``).
    """
    prog = ZOO[name]
    if prog.via == "hand":
        raise RuntimeError(f"{name}: torch {torch.__version__} makes these descriptors in no program")
    mod, args, fake_mode = _built(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if prog.via == "compile":
            gm = _compiled_forward(mod, args)
        elif prog.via == "cuda":
            with torch._functorch.config.patch(functionalize_rng_ops=True):
                gm = export_graph_module(
                    mod.to("cuda") if torch.cuda.is_available() else mod,
                    tuple(a.to("cuda") if torch.cuda.is_available() else a for a in args),
                )
        else:
            with fake_mode or contextlib.nullcontext():
                gm = export_graph_module(mod, args)
    inputs, outputs = _descs(gm)
    return tuple(inputs), tuple(outputs)


def course_descriptors(name: str) -> tuple[tuple, tuple]:
    """What course.joint makes for ``ZOO[name]`` (placeholders, outputs): the joint's, or for
    a "compile" program the partitioned forward's.

    Raises:
        NotImplementedError: course.joint does not build this case; the message names it.
    """
    from course.aot.joint import export_joint

    prog = ZOO[name]
    mod, args, fake_mode = _built(name)
    if prog.via == "hand":
        raise NotImplementedError(f"{name}: no program makes these descriptors")
    with warnings.catch_warnings(), torch._functorch.config.patch(functionalize_rng_ops=prog.via == "cuda"):
        warnings.simplefilter("ignore")
        jd = export_joint(mod, args)
        inputs, outputs = _descs(jd.fw_module if prog.via == "compile" else jd.graph_module)
    return tuple(inputs), tuple(outputs)


def zoo_classes(descs) -> list[str]:
    """The class names among ``descs`` (nested ones included), in first-seen order."""
    seen: list[str] = []

    def walk(d):
        if d is None:
            return
        if type(d).__name__ not in seen:
            seen.append(type(d).__name__)
        for f in dataclasses.fields(d):
            inner = getattr(d, f.name)
            if dataclasses.is_dataclass(inner):
                walk(inner)

    for d in descs:
        walk(d)
    return seen


def inner_sizes(descs) -> list:
    """The descriptors among ``descs`` that carry an *inner* tensor's size or stride.

    Torch 2.14 passes, for a subclass with symbolic sizes, the sizes and strides of each inner
    tensor too (``SubclassSizeAOTInput(base=SubclassGetAttrAOTInput(...), idx=0)``); torch
    2.13 passes only the outer ones. Lesson 07 prints the zoo without these, so that it reads
    the same on both, and says what 2.14 adds.

    >>> inner = cd.SubclassSizeAOTInput(cd.SubclassGetAttrAOTInput(cd.PlainAOTInput(0), "a"), 0)
    >>> outer = cd.SubclassSizeAOTInput(cd.PlainAOTInput(0), 0)
    >>> inner_sizes([inner, outer, None])
    [SubclassSizeAOTInput(base=SubclassGetAttrAOTInput(base=PlainAOTInput(idx=0), attr='a'), idx=0)]
    """
    sized = (
        "SubclassSizeAOTInput",
        "SubclassStrideAOTInput",
        "SubclassSizeAOTOutput",
        "SubclassStrideAOTOutput",
    )
    getattrs = ("SubclassGetAttrAOTInput", "SubclassGetAttrAOTOutput")
    return [
        d for d in descs if d is not None and type(d).__name__ in sized and type(d.base).__name__ in getattrs
    ]
