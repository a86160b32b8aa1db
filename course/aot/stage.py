"""One snapshot of :func:`course.aot.joint.export_joint`: a named graph and its stable printout.

What is ours and what is torch's: all of this module is ours (torch has no stages to show):
:class:`Stage`, the snapshot, and :class:`StageBuilder`, which builds the teaching stages on demand (NOTE
[Stages on demand] below). The graphs inside are traced by torch's ``make_fx``.

A :class:`Stage` holds the ``graph_module`` as it was after one step, a sentence saying what
the step did, and ``text``: the graph's Python code followed, once descriptors exist, by a
table of what each placeholder and output means. The text has node names and op names
only (no memory addresses, no timings), so it prints the same on every run::

    == descriptors ==
    node.meta['desc'] on every placeholder, ...
    def forward(self, primals, tangents):
        ...
    # inputs
    #   primals_1: ParamAOTInput(target='weight')
    ...
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

from course.aot import steps

__all__ = ["STAGE_NAMES", "Stage", "StageBuilder", "make_stage"]

_EXPLAIN = {
    "traced_forward": "make_fx records the aten ops of the functional call; parameters, "
    "buffers and inputs are placeholders; in-place updates (add_, copy_) are still there.",
    "functionalized_forward": "The program traced again under FunctionalTensorMode (stage 1's "
    "graph if it had no in-place op): no mutation is left; each mutated input's new value is "
    "returned first, before the user outputs.",
    "joint_function": "The joint's signature (primals, tangents): one tangent per output "
    "that requires grad and does not alias an input or another output.",
    "traced_joint": "make_fx of joint(primals, tangents): the program traced again (functionalized "
    "if stage 1 had in-place ops), then torch.autograd.grad(outputs, primals that require grad, "
    "tangents), recorded.",
    "descriptors": "node.meta['desc'] on every placeholder, and a list on the output node: "
    "what each input and output means.",
    "partitioned_forward": "The partitioner's forward: primals in; mutations, outputs and the "
    "activations saved for backward (SavedForBackwardsAOTOutput) out.",
    "partitioned_backward": "The partitioner's backward: saved activations and tangents in, grads out.",
}


@dataclass(frozen=True)
class Stage:
    """One snapshot: ``name``, ``explanation``, ``graph_module`` and its stable ``text``."""

    name: str
    explanation: str
    graph_module: fx.GraphModule
    text: str

    @property
    def graph(self) -> fx.Graph:
        return self.graph_module.graph

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Stage(name={self.name!r}, nodes={len(self.graph.nodes)})"


def _format(name: str, gm: fx.GraphModule, with_descs: bool) -> str:
    """Deterministic text: the graph's code, then the descriptor table (no addresses)."""
    code = "\n".join(line for line in gm.code.strip().splitlines() if line.strip())
    lines = [f"== {name} ==", _EXPLAIN[name], code]
    if with_descs:
        out = gm.graph.output_node()
        lines.append("# inputs")
        lines += [f"#   {n.name}: {n.meta.get('desc')}" for n in gm.graph.find_nodes(op="placeholder")]
        lines.append("# outputs")
        for k, (v, d) in enumerate(zip(out.args[0], out.meta.get("desc", []))):
            lines.append(f"#   {k} {getattr(v, 'name', v)}: {d}")
    return "\n".join(lines)


#: The stages of :func:`course.aot.joint.export_joint`, in the order they are built.
STAGE_NAMES = tuple(_EXPLAIN)


def make_stage(name: str, gm: fx.GraphModule, with_descs: bool = False) -> Stage:
    """Snapshot ``gm`` as stage ``name``; ``with_descs`` adds the descriptor table."""
    return Stage(name, _EXPLAIN[name], gm, _format(name, gm, with_descs))


# NOTE [Stages on demand]
#     The joint graph needs one untraced metadata pass and one traced joint (torch's work);
#     the teaching stages 1-3 each trace the program again, and stages 6-7 run the
#     partitioner. :class:`StageBuilder` builds those when first asked for (``jd.stages``,
#     ``jd.stage(name)``, ``jd.fw_module``), from the same program, inputs and settings the
#     export used, so they print what building them during the export would print. As they
#     trace the module when you ask, not when you exported it, we put the export's
#     ``training`` flags and grad mode back while tracing, and refuse (RuntimeError) if a
#     parameter, buffer or input changed its shape, dtype, strides or ``requires_grad``
#     since. Other edits to the module (a new attribute, a patched ``forward``) would show
#     in stages 1-3: ask for the stages before you change it.


def fakes(real: list[torch.Tensor]) -> tuple[FakeTensorMode, list[torch.Tensor]]:
    """Fake copies (shapes, dtypes, requires_grad; no data) in a fresh FakeTensorMode."""
    mode, seen = FakeTensorMode(), set()
    fakes = []
    for t in real:  # a tensor met twice (tied weights) gets a second fake, sharing storage
        fakes.append(mode.from_tensor(t if id(t) not in seen else _alias(t)))
        seen.add(id(t))
    return mode, fakes


def _alias(t: torch.Tensor) -> torch.Tensor:
    return t.detach().requires_grad_(t.requires_grad)


def _tensor_facts(real: list[torch.Tensor]) -> list[tuple]:
    return [(t.shape, t.stride(), t.dtype, t.device, t.requires_grad) for t in real]


class StageBuilder:
    """The stages of one export, each built on first use (NOTE [Stages on demand])."""

    def __init__(
        self,
        *,
        fn,
        real,
        module,
        meta,
        joint,
        joint_inputs,
        fake_mode,
        partition_fn,
        timings: dict[str, float],
    ) -> None:
        self._fn, self._real, self._meta, self._joint = fn, real, meta, joint
        self._joint_inputs, self._fake_mode = joint_inputs, fake_mode
        self._partition_fn = partition_fn
        self._timings = timings
        self._facts = _tensor_facts(real)
        self._grad_enabled = torch.is_grad_enabled()
        mods = module.modules() if isinstance(module, torch.nn.Module) else ()
        self._training = [(m, m.training) for m in mods]
        # The private cache: name -> Stage, filled as stages are built.
        self._built: dict[str, Stage] = {
            "traced_joint": make_stage("traced_joint", joint),
            "descriptors": make_stage("descriptors", joint, with_descs=True),
        }

    def stage(self, name: str) -> Stage:
        if name not in STAGE_NAMES:
            raise KeyError(f"no stage {name!r}; stages are {list(STAGE_NAMES)}")
        if name not in self._built:
            self._build_forward() if name in STAGE_NAMES[:3] else self._build_partition()
        return self._built[name]

    def stages(self) -> list[Stage]:
        return [self.stage(name) for name in STAGE_NAMES]

    def built(self) -> set[str]:
        """The names of the stages built so far (asking builds nothing)."""
        return set(self._built)

    def _timed(self, name: str, build: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = build()
        self._timings[name] = time.perf_counter() - t0
        return out

    @contextlib.contextmanager
    def _as_exported(self):
        if _tensor_facts(self._real) != self._facts:
            raise RuntimeError(
                "export_joint: a parameter, buffer or input changed its shape, dtype, strides "
                "or requires_grad since the export, so its stages would not match the joint; "
                "export again"
            )
        now = [(m, m.training) for m, _ in self._training]
        try:
            for m, flag in self._training:
                m.training = flag
            with torch.set_grad_enabled(self._grad_enabled):
                yield
        finally:
            for m, flag in now:
                m.training = flag

    def _build_forward(self) -> None:
        """Stages 1-3: the forward traced, functionalized if needed, and the joint's signature."""
        with self._as_exported():

            def traced():  # stage 1 runs the in-place ops for real (on fakes): fakes of its own
                mode, primals = fakes(self._real)
                with mode:
                    return steps.trace_forward(self._fn, primals)

            fw, fw_meta = self._timed("traced_forward", traced)
            self._built["traced_forward"] = make_stage("traced_forward", fw)

            def functionalized():
                mutating = any(map(steps.is_mutating, fw.graph.nodes))  # else stage 2 is stage 1
                mode, primals = fakes(self._real) if mutating else (nullcontext(), None)
                with mode:
                    return steps.trace_functionalized_forward(self._fn, fw, primals, fw_meta)

            ffw, meta = self._timed("functionalized_forward", functionalized)
            self._built["functionalized_forward"] = make_stage("functionalized_forward", ffw)
        if meta != self._meta:  # the traced stages and the export's metadata pass must agree
            raise AssertionError(f"export_joint: stage 2 found {meta}, the export {self._meta}")
        joint_fn = self._timed("joint_function", lambda: steps.add_tangent_placeholders(ffw, meta))
        self._built["joint_function"] = make_stage("joint_function", joint_fn)

    def _build_partition(self) -> None:
        """Stages 6-7: the partitioner's forward and backward (the joint is not retraced)."""
        n_fwd = len(self._meta.mutated_inp_indices) + self._meta.num_user_outputs

        def partitioned():
            with self._fake_mode:
                return steps.partition(self._joint, self._joint_inputs, n_fwd, self._partition_fn)

        fw, bw = self._timed("partitioned_forward", partitioned)
        self._built["partitioned_forward"] = make_stage("partitioned_forward", fw, with_descs=True)
        self._timings["partitioned_backward"] = 0.0  # built with the forward, by the same call
        self._built["partitioned_backward"] = make_stage("partitioned_backward", bw, with_descs=True)
