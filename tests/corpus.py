"""The shared corpus: small modules and functions whose joint graphs the tests compare.

Every case names one thing AOTAutograd must handle (a parameter, a buffer mutation, an
input that needs no grad, outputs that alias each other, a tensor subclass, ...). Tests of
``course.aot.descriptors`` / ``course.aot.fx_utils`` export each case with torch's
``aot_export_joint_with_descriptors`` and compare course against torch on that graph;
tests of ``course.aot.joint`` build the same cases with ``course.aot.joint.export_joint``.

Use it from a test file (pytest puts ``tests/`` on ``sys.path``)::

    from corpus import CASES, PLAIN_CASES, get_case, torch_joint

    @pytest.mark.parametrize("case", PLAIN_CASES, ids=lambda c: c.name)
    def test_something(case):
        mod, args = case.build()          # fresh module and example args, seeded
        gm = torch_joint(case.name)       # torch's joint GraphModule, cached per session

A case is a :class:`Case`: ``name``, ``doc`` (what it exercises), ``make_module`` and
``make_args`` (factories, seeded, fresh objects each call; functions are wrapped in
:class:`FunctionModule` whose ``fn`` is the plain function), ``plain`` (True when torch
exports it with plain tensors only; False for the tensor-subclass case, where fx_utils
raises ``RuntimeError``) and ``tags`` (the AOTAutograd features it exercises, e.g.
``"buffer_mutation"``, ``"intermediate_base"``, ``"view_base"``, ``"subclass"``), so a
builder that skips a feature can select the cases it supports.
"""

import contextlib
import dataclasses
import functools
from collections.abc import Callable

import torch
import torch.fx as fx
from torch import nn

__all__ = ["CASES", "CASE_NAMES", "PLAIN_CASES", "Case", "FunctionModule", "get_case", "torch_joint"]


class FunctionModule(nn.Module):
    """An ``nn.Module`` whose forward calls ``fn`` (export APIs take modules, not functions)."""

    def __init__(self, fn: Callable):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)

    def extra_repr(self) -> str:
        return self.fn.__name__


@dataclasses.dataclass(frozen=True)
class Case:
    """One corpus entry: a module factory, an args factory, and what it exercises."""

    name: str
    doc: str
    make_module: Callable[[], nn.Module]
    make_args: Callable[[], tuple]
    plain: bool = True
    tags: frozenset = frozenset()

    def build(self) -> tuple[nn.Module, tuple]:
        """A fresh (module, args) pair, seeded so every call gives the same values."""
        torch.manual_seed(0)
        mod = self.make_module()
        return mod, self.make_args()


def _randn(*shape: int, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=grad)


# ---- modules -----------------------------------------------------------------------------


class ReadOnlyBuffer(nn.Module):
    """A parameter and a registered buffer that forward only reads."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3))
        self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x):
        return x * self.scale * self.weight


class TiedLinear(nn.Module):
    """Two linear layers sharing one weight Parameter (``b.weight is a.weight``)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3, bias=False)
        self.b = nn.Linear(3, 3, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


# ---- functions ---------------------------------------------------------------------------


def int_output(x):
    return x.sin(), x.argmax()  # argmax is an integer tensor: no tangent for it


def no_grad_input(x, y):
    return x * y + x  # y does not require grad: its grad output is None


def input_mutation(x, w):
    x.add_(1)  # mutation the backward need not see
    return x * w


def input_mutation_differentiable(x, w):
    x.mul_(w)  # x now depends on w: the mutation gets a tangent
    return x.sin()


def view_of_input(x):
    return x[0], x.sin()  # x[0] aliases the input: torch regenerates it, no tangent


def aliased_outputs(x):
    y = x * 2
    return y[0], y[1]  # both view y: torch returns y as an intermediate base


def aliased_inputs(a, b):
    a.mul_(2)  # a and b overlap in one base: torch passes the base instead
    return a + b


def double(x):
    return x * 2


def _aliased_input_args():
    base = _randn(4, grad=True).clone()
    return base[:2], base[1:3]


def _two_tensor_args():
    from torch.testing._internal.two_tensor import TwoTensor

    return (TwoTensor(torch.randn(3), torch.randn(3)).requires_grad_(),)


def _fn(fn: Callable) -> Callable[[], nn.Module]:
    return lambda: FunctionModule(fn)


CASES: tuple[Case, ...] = (
    Case("linear", "nn.Linear(3, 2); x needs no grad", lambda: nn.Linear(3, 2), lambda: (_randn(4, 3),)),
    Case(
        "mlp",
        "Linear-ReLU-Linear",
        lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
        lambda: (_randn(5, 4),),
    ),
    Case(
        "batchnorm_train",
        "BatchNorm1d in training mode mutates its running-stat buffers",
        lambda: nn.BatchNorm1d(3).train(),
        lambda: (_randn(4, 3),),
        tags=frozenset({"buffer", "buffer_mutation"}),
    ),
    Case(
        "readonly_buffer",
        "a buffer read, never written",
        ReadOnlyBuffer,
        lambda: (_randn(3),),
        tags=frozenset({"buffer"}),
    ),
    Case(
        "tied_params",
        "one Parameter under two names",
        TiedLinear,
        lambda: (_randn(2, 3),),
        tags=frozenset({"tied"}),
    ),
    Case(
        "int_output",
        "an integer (non-differentiable) output",
        _fn(int_output),
        lambda: (_randn(3, grad=True),),
        tags=frozenset({"int_output"}),
    ),
    Case(
        "no_grad_input",
        "one input requires grad, one does not",
        _fn(no_grad_input),
        lambda: (_randn(3, grad=True), _randn(3)),
        tags=frozenset({"no_grad_input"}),
    ),
    Case(
        "input_mutation",
        "an input mutated in place (non-differentiably)",
        _fn(input_mutation),
        lambda: (_randn(3), _randn(3, grad=True)),
        tags=frozenset({"input_mutation"}),
    ),
    Case(
        "input_mutation_differentiable",
        "an input mutated in place by a value that requires grad",
        _fn(input_mutation_differentiable),
        lambda: (_randn(3), _randn(3, grad=True)),
        tags=frozenset({"input_mutation", "differentiable_mutation"}),
    ),
    Case(
        "view_of_input",
        "an output that is a view of an input",
        _fn(view_of_input),
        lambda: (_randn(2, 3, grad=True),),
        tags=frozenset({"output_aliases_input"}),
    ),
    Case(
        "aliased_outputs",
        "two outputs that alias each other",
        _fn(aliased_outputs),
        lambda: (_randn(2, 3, grad=True),),
        tags=frozenset({"intermediate_base"}),
    ),
    Case(
        "aliased_inputs",
        "two overlapping views of one base as inputs, one mutated",
        _fn(aliased_inputs),
        _aliased_input_args,
        tags=frozenset({"view_base", "input_mutation", "differentiable_mutation"}),
    ),
    Case(
        "transformer_encoder_layer",
        "TransformerEncoderLayer(d_model=16, nhead=2, dropout=0)",
        lambda: nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True),
        lambda: (_randn(2, 5, 16),),
        tags=frozenset({"transformer"}),
    ),
    Case(
        "two_tensor_input",
        "a TwoTensor (tensor subclass) input: fx_utils raises RuntimeError",
        _fn(double),
        _two_tensor_args,
        plain=False,
        tags=frozenset({"subclass"}),
    ),
)

CASE_NAMES: tuple[str, ...] = tuple(c.name for c in CASES)
PLAIN_CASES: tuple[Case, ...] = tuple(c for c in CASES if c.plain)


def get_case(name: str) -> Case:
    """The case called ``name``; KeyError listing the names if there is none."""
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(f"no corpus case {name!r}; cases: {', '.join(CASE_NAMES)}")


@functools.cache
def torch_joint(name: str) -> fx.GraphModule:
    """Torch's joint graph of case ``name``, exported once per test session.

    Shared between tests: read it, do not mutate it (copy it with ``copy.deepcopy`` first).
    """
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

    mod, args = get_case(name).build()
    with contextlib.ExitStack() as stack:
        return aot_export_joint_with_descriptors(stack, mod, args).graph_module
