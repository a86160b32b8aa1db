"""A joint graph built in stages you can step through: a small, visible AOTAutograd.

This module tells the story of the export, once (:mod:`course.aot.steps` holds its pieces,
:mod:`course.aot.stage` the snapshots).

What is ours and what is torch's: torch's is every tracer and transform it runs (``make_fx``,
``FunctionalTensorMode``, ``torch.autograd.grad``, the partitioner); ours is
:func:`export_joint` itself, the order and bookkeeping of the steps, the descriptors it
attaches, and :class:`JointWithDescriptors` (a dataclass shaped like torch's, plus the stages).

torch's ``aot_export_joint_with_descriptors(stack, mod, args)`` returns, in one opaque call,
the *joint graph*: one FX graph that takes ``(primals, tangents)`` and returns the forward
outputs and the gradients, with a descriptor on every input and output saying what it is.
:func:`export_joint` builds the same graph in seven named stages::

    1 traced_forward          make_fx of mod(*args) with params/buffers as inputs; add_ visible
    2 functionalized_forward  no mutation left: updated buffers come back as leading outputs
    3 joint_function          the joint's inputs, (primals, tangents): one tangent per output
                              that requires grad
    4 traced_joint            make_fx of joint(primals, tangents) -> (outs, grads): the
                              program again, then torch.autograd.grad, recorded
    5 descriptors             ParamAOTInput(target='0.weight'), TangentAOTInput(...), ...
    6 partitioned_forward     torch's partitioner: forward + SavedForBackwardsAOTOutput(idx=k)
    7 partitioned_backward    saved activations + tangents -> grads

>>> import torch
>>> from course.aot.joint import export_joint
>>> torch.manual_seed(0) and None
>>> jd = export_joint(torch.nn.Linear(3, 2), (torch.randn(4, 3),))
>>> [s.name for s in jd.stages]      # doctest: +NORMALIZE_WHITESPACE
['traced_forward', 'functionalized_forward', 'joint_function', 'traced_joint',
 'descriptors', 'partitioned_forward', 'partitioned_backward']
>>> for n in jd.graph_module.graph.find_nodes(op="placeholder"):
...     print(n.name, n.meta["desc"])
primals_1 ParamAOTInput(target='weight')
primals_2 ParamAOTInput(target='bias')
primals_3 PlainAOTInput(idx=0)
tangents_1 TangentAOTInput(output=PlainAOTOutput(idx=0))
>>> jd.graph_module.graph.output_node().meta["desc"]   # doctest: +NORMALIZE_WHITESPACE
[PlainAOTOutput(idx=0), GradAOTOutput(grad_of=ParamAOTInput(target='weight')),
 GradAOTOutput(grad_of=ParamAOTInput(target='bias')), None]

The invariants (the same as torch's, checked by tests/test_joint.py against torch)::

    placeholders: params, buffers, plain inputs, tangents     # OK  torch's order
    outputs: input mutations, user outputs, grads             # OK  torch's order
    grads: one per primal, None where it does not require grad
    a tangent for an output that aliases an input             # BAD torch gives none

Differences from torch
----------------------

* The export does torch's work: one untraced metadata pass under ``FunctionalTensorMode``
  (``collect_metadata``, torch's ``run_functionalized_fw_and_collect_metadata``), then the
  joint traced once (stage 4) and its descriptors (stage 5). The other stages are built the
  first time you ask (``jd.stages``, ``jd.stage(name)``, ``jd.fw_module``; NOTE [Stages on
  demand] in :mod:`course.aot.stage`): the forward (stage 1), the functionalized forward
  (stage 2; a forward with no in-place op is functional already, so stage 2 *is* stage 1's
  graph), and the partitioner (stages 6-7). Each traces the program, never the previous
  stage's graph: a custom ``autograd.Function``, a ``no_grad`` block or a hook changes
  gradients without leaving an aten op behind. The joint is traced without
  ``FunctionalTensorMode`` when the metadata pass saw no in-place op (NOTE [Functionalizing
  the joint only when needed] in :mod:`course.aot.steps`).
* torch clones a mutated input before the forward (``clone``, ``clone_1``); our joint
  returns the mutated wrapper's new value directly and has no such clones.
* We build only plain-tensor graphs. Tensor subclasses (SubclassGetAttrAOTInput, ...),
  mutated inputs that alias each other (ViewBaseAOTInput, SyntheticBaseAOTInput), several
  outputs viewing one intermediate (IntermediateBaseAOTOutput), metadata mutations
  (MetadataMutationAOTOutput), in-place updates of inputs that require grad, ops with side
  effects (effect tokens: ForwardTokenAOTInput, BackwardTokenAOTInput) and RNG
  functionalization (``functionalize_rng_ops``: Philox seed inputs) raise
  ``NotImplementedError`` naming the case and the descriptor torch would use; lesson 07's
  zoo runs each through both (tests/test_zoo.py). Plain dropout works, as in torch by default.
* A custom ``autograd.Function`` is traced *through*, as torch's export does: a tensor it
  keeps as ``ctx.y`` is saved as ``SavedForBackwardsAOTOutput``, where ``torch.compile``
  (whose Dynamo captures the Function whole) says ``SavedForBackwardsNoVcCheckAOTOutput``.
* Outputs must be tensors (torch returns a non-tensor output as a constant among the
  graph's outputs), and something must require grad (torch would return an inference graph).
  A non-tensor *input* is baked in as torch bakes it (NOTE [Constants keep a placeholder]).
* We also partition (torch's ``default_partition`` unless you pass ``partition_fn``); torch
  leaves that to ``aot_compile_joint_with_descriptors``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch._functorch.partitioners import default_partition
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from course import require_supported_torch
from course.aot import descriptors, steps
from course.aot.stage import Stage, StageBuilder, fakes

require_supported_torch("course.aot.joint")
_TORCH = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])  # (2, 13)

__all__ = ["JointWithDescriptors", "Stage", "export_joint"]


@dataclass
class JointWithDescriptors:
    """What :func:`export_joint` returns: torch's ``JointWithDescriptors`` fields we share,
    plus the stages.

    Stages 1-3 and 6-7 are built on first access (NOTE [Stages on demand] in
    :mod:`course.aot.stage`); ``graph_module`` (stages 4-5) exists from the start.
    """

    #: The joint graph; call it as ``graph_module(primals, tangents)``.
    graph_module: fx.GraphModule
    #: Parameter and buffer FQNs, in placeholder order (torch's names for these fields).
    params_spec: list[str]
    buffers_spec: list[str]
    #: The module's parameters and buffers at export time, ``{fqn: tensor}``: :meth:`run`'s defaults.
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    #: How the module's ``(args, kwargs)`` flatten into plain-input placeholders.
    in_spec: Any
    #: How the user outputs unflatten into what the module returns (torch's ``out_spec``):
    #: ``pytree.tree_unflatten(user_outputs, jd.out_spec)``.
    out_spec: Any
    #: How many leading outputs are forward ones (input mutations + user outputs).
    num_fwd_outputs: int
    #: Per forward output, whether it has a tangent placeholder.
    tangent_mask: list[bool]
    #: ``{step: seconds}`` each stage built so far took, plus ``"metadata"``, the export's
    #: untraced metadata pass (not printed anywhere: times differ between runs).
    timings: dict[str, float]
    #: Builds the teaching stages when first asked for them.
    stage_builder: StageBuilder = field(repr=False)

    @property
    def stages(self) -> list[Stage]:
        """All seven stages, in order; the first access builds those not built yet."""
        return self.stage_builder.stages()

    def stage(self, name: str) -> Stage:
        """One stage by name, built (with what it needs) on first access."""
        return self.stage_builder.stage(name)

    @property
    def fw_module(self) -> fx.GraphModule:
        return self.stage("partitioned_forward").graph_module

    @property
    def bw_module(self) -> fx.GraphModule:
        return self.stage("partitioned_backward").graph_module

    def __call__(self, primals: list, tangents: list) -> tuple[tuple, tuple]:
        """Run the joint graph on real tensors: ``(outs, grads)``, torch's calling convention."""
        with torch.no_grad():
            return self.graph_module(list(primals), list(tangents))

    def run(self, args=(), kwargs=None, *, params=None, buffers=None, tangents=None) -> dict:
        """Run the joint on new inputs; returns ``{output descriptor: tensor}``.

        Args:
            args, kwargs: the module's inputs (tensors).
            params, buffers: ``{fqn: tensor}``; default: the module's current ones.
            tangents: one per tangent placeholder; default: ``ones_like`` each output.
        """
        params = {**self.params, **(params or {})}
        buffers = {**self.buffers, **(buffers or {})}
        flat, _ = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
        primals = [params[k] for k in self.params_spec] + [buffers[k] for k in self.buffers_spec]
        primals += flat
        if tangents is None:
            fw_outs = self.fw_module(*primals)[: self.num_fwd_outputs]
            tangents = [torch.ones_like(o) for o, m in zip(fw_outs, self.tangent_mask) if m]
        outs, grads = self(primals, tangents)
        descs = self.graph_module.graph.output_node().meta["desc"]
        return {d: v for d, v in zip(descs, [*outs, *grads]) if d is not None}


def _flat_inputs(args: tuple, kwargs: dict) -> tuple[list[torch.Tensor], dict[int, Any]]:
    """The flat inputs as the trace sees them, and the constants among them by position.

    A leaf that is not a tensor (a float, an int, a bool, a string) is baked into the graph, as
    torch's export does: it keeps its placeholder (``PlainAOTInput(idx=k)``, no gradient), but
    the trace reads the Python value, so no node uses the placeholder. The trace sees an empty
    stand-in tensor there (NOTE [Constants keep a placeholder]).
    """
    flat, _ = pytree.tree_flatten((tuple(args), kwargs))
    tensors, constants = [], {}
    for i, a in enumerate(flat):
        if not isinstance(a, torch.Tensor):
            constants[i] = a
            tensors.append(torch.empty(0))  # one each: a stand-in met twice would be an alias
        elif is_traceable_wrapper_subclass(a) or type(a) not in (torch.Tensor, torch.nn.Parameter):
            raise NotImplementedError(
                f"input {i} is a tensor subclass ({type(a).__name__}): torch flattens it into "
                "SubclassGetAttrAOTInput placeholders" + steps.NOT_BUILT
            )
        else:
            tensors.append(a)
    return tensors, constants


# NOTE [Constants keep a placeholder]
# torch's export flattens (args, kwargs) and gives every leaf a placeholder, tensors or not.
# 1. A non-tensor leaf's value is read while tracing, so it is a constant of the graph:
#    ``x * scale`` with scale=2.5 records ``aten.mul.Tensor(x, 2.5)``.
# 2. Its placeholder stays (the calling convention is one primal per flat input), no node
#    uses it, and its gradient output is None. Its ``meta["val"]`` is the number itself from
#    torch 2.14 on (make_fx records int, float and bool inputs), absent on 2.13 and for others.
# 3. So calling the graph with another value there changes nothing: export again instead.
#    jd.run((x,), {"scale": 2.5})    # yes: the value it was exported with
#    jd.run((x,), {"scale": 3.0})    # no: still computes with 2.5, as torch's graph would


def _functional_call(
    mod: Any, fqns: list[str], in_spec: Any, constants: dict[int, Any], seen: dict | None = None
) -> Callable:
    """``fn(*params_and_buffers, *flat_args) -> flat outputs``, like torch's create_functional_call;
    each call writes the pytree spec of the outputs it flattened into ``seen["out_spec"]``.
    ``constants`` replace their stand-ins (NOTE [Constants keep a placeholder])."""
    seen = {} if seen is None else seen

    def fn(*primals: torch.Tensor) -> list[torch.Tensor]:
        state, flat = dict(zip(fqns, primals)), primals[len(fqns) :]
        flat = [constants.get(i, a) for i, a in enumerate(flat)]
        args, kwargs = pytree.tree_unflatten(flat, in_spec)
        if isinstance(mod, torch.nn.Module):
            # tie_weights=False: a Parameter under two names is two inputs, as in torch.
            out = torch.func.functional_call(mod, state, args, kwargs, tie_weights=False)
        else:
            out = mod(*args, **kwargs)
        outs, seen["out_spec"] = pytree.tree_flatten(out)
        if not outs or any(not isinstance(o, torch.Tensor) for o in outs):
            kinds = sorted({type(o).__name__ for o in outs if not isinstance(o, torch.Tensor)})
            raise TypeError(
                f"export_joint: the function must return tensors (or tuples/lists/dicts of "
                f"them); it returned {type(out).__name__} holding {kinds or 'nothing'}"
            )
        return outs

    return fn


@dataclass
class _Primals:
    """What the export's inputs are: the module's state, the flat inputs, their descriptors."""

    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    real: list[torch.Tensor]  # params, buffers, flat inputs (a stand-in for each constant)
    descs: list  # one AOTInput per entry of ``real``
    constants: dict[int, Any]  # flat input position -> the value baked in
    in_spec: Any

    @property
    def fqns(self) -> list[str]:
        return [*self.params, *self.buffers]


def _primals(module_or_fn: Callable, args: tuple, kwargs: dict) -> _Primals:
    """Collect the placeholders' tensors and descriptors: params, buffers, then plain inputs."""
    is_mod = isinstance(module_or_fn, torch.nn.Module)
    params = dict(module_or_fn.named_parameters(remove_duplicate=False)) if is_mod else {}
    buffers = dict(module_or_fn.named_buffers(remove_duplicate=False)) if is_mod else {}
    flat_args, constants = _flat_inputs(args, kwargs)
    _, in_spec = pytree.tree_flatten((tuple(args), kwargs))
    for name, t in {**params, **buffers}.items():
        if is_traceable_wrapper_subclass(t):
            raise NotImplementedError(f"{name} is a tensor subclass" + steps.NOT_BUILT)
    descs = [descriptors.ParamAOTInput(k) for k in params]
    descs += [descriptors.BufferAOTInput(k) for k in buffers]
    descs += [descriptors.PlainAOTInput(i) for i in range(len(flat_args))]
    real = [*params.values(), *buffers.values(), *flat_args]
    return _Primals(params, buffers, real, descs, constants, in_spec)


def export_joint(
    module_or_fn: Callable,
    args: tuple,
    kwargs: dict | None = None,
    *,
    decompositions: dict | None = None,
    partition_fn: Callable = default_partition,
) -> JointWithDescriptors:
    """Build the joint graph of ``module_or_fn(*args, **kwargs)`` in named stages.

    Args:
        module_or_fn: an ``nn.Module`` (its parameters and buffers become placeholders) or a
            plain function of tensors.
        args, kwargs: example inputs; only their shapes, dtypes and ``requires_grad`` are used
            (tracing runs under a ``FakeTensorMode``). A non-tensor input (a float, an int) is
            baked into the graph, as in torch (NOTE [Constants keep a placeholder]).
        decompositions: an aten decomposition table (torch's argument). Like torch, we apply
            it in the joint trace only, below autograd: ``addmm`` still differentiates as
            ``addmm``, and then both it and its backward ops are decomposed.
        partition_fn: torch's ``default_partition`` or ``min_cut_rematerialization_partition``.

    Returns:
        A :class:`JointWithDescriptors`.

    Raises:
        TypeError: an output is not a tensor.
        ValueError: nothing requires grad, or no output requires grad (no tangents).
        NotImplementedError: a feature torch's exporter handles and we do not build.

    Example:
        >>> import torch
        >>> jd = export_joint(torch.nn.Linear(3, 2), (torch.randn(4, 3),))
        >>> jd.params_spec, jd.buffers_spec
        (['weight', 'bias'], [])
        >>> sorted(repr(d) for d in jd.run((torch.randn(4, 3),)))[0]
        "GradAOTOutput(grad_of=ParamAOTInput(target='bias'))"
    """
    inputs = _primals(module_or_fn, args, dict(kwargs or {}))
    seen: dict = {}  # the outputs' pytree spec, written by the metadata pass
    fn = _functional_call(module_or_fn, inputs.fqns, inputs.in_spec, inputs.constants, seen)
    timings: dict[str, float] = {}
    mode, primals, meta, mutates, outs = _collect_metadata(fn, inputs.real, timings)
    with mode:
        clock = time.perf_counter()
        tangents = _tangents(meta, outs)
        joint = steps.trace_joint(fn, meta, primals, tangents, mutates=mutates, decompositions=decompositions)
        timings["traced_joint"] = time.perf_counter() - clock
    clock = time.perf_counter()
    steps.attach_descriptors(joint, inputs.descs, meta, [t.requires_grad for t in inputs.real])
    _mark_constants(joint, len(inputs.fqns), inputs.constants)
    timings["descriptors"] = time.perf_counter() - clock
    return JointWithDescriptors(
        graph_module=joint,
        params_spec=list(inputs.params),
        buffers_spec=list(inputs.buffers),
        params=inputs.params,
        buffers=inputs.buffers,
        in_spec=inputs.in_spec,
        out_spec=seen["out_spec"],
        num_fwd_outputs=len(meta.mutated_inp_indices) + meta.num_user_outputs,
        tangent_mask=meta.tangent_mask,
        timings=timings,
        stage_builder=StageBuilder(
            fn=fn,
            real=inputs.real,
            module=module_or_fn,
            meta=meta,
            joint=joint,
            joint_inputs=(primals, tangents),
            fake_mode=mode,
            partition_fn=partition_fn,
            timings=timings,
        ),
    )


def _collect_metadata(fn: Callable, real: list[torch.Tensor], timings: dict[str, float]) -> tuple:
    """The untraced metadata pass on fakes, then the errors it lets us name:
    ``(mode, fake primals, meta, mutates, fake outputs)``."""
    clock = time.perf_counter()
    mode, primals = fakes(real)
    try:
        with mode:
            meta, mutates, outs = steps.collect_metadata(fn, primals)
    except NotImplementedError:
        _check_forward(fn, real)  # in the staged build, stage 1's errors come first
        raise
    timings["metadata"] = time.perf_counter() - clock
    if not any(t.requires_grad for t in real):  # after the pass, so what we do not build is named first
        raise ValueError(
            "export_joint: nothing requires grad (no parameter that requires grad and no input "
            "with requires_grad=True), so there is no backward to build. torch would return an "
            "inference graph; use make_fx for that."
        )
    if torch._functorch.config.functionalize_rng_ops:  # the check reads stage 1's graph
        _check_forward(fn, real)
    if not any(meta.tangent_mask):
        raise ValueError(
            "export_joint: no output requires grad (e.g. it is detached, or aliases an input), "
            "so the joint would have no tangents and no backward. torch would return an "
            "inference graph; use make_fx for that."
        )
    return mode, primals, meta, mutates, outs


def _mark_constants(gm: fx.GraphModule, n_state: int, constants: dict[int, Any]) -> None:
    """A constant's placeholder holds what torch's holds (NOTE [Constants keep a placeholder])."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    for i, value in constants.items():
        node = placeholders[n_state + i]
        assert not node.users, f"{node.name} stands for a constant and should have no users"
        if _TORCH >= (2, 14) and isinstance(value, (int, float, bool)):
            node.meta["val"] = value  # 2.14's make_fx keeps a Python number's value
        else:
            del node.meta["val"]  # 2.13's keeps nothing, and no release a string


def _tangents(meta: steps.ForwardMeta, outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """One fake tangent per forward output that gets one (contiguous, like torch's)."""
    return [
        torch.empty_like(o, memory_format=torch.contiguous_format)
        for o, m in zip(outs, meta.tangent_mask)
        if m
    ]


def _check_forward(fn: Callable, real: list[torch.Tensor]) -> None:
    """Trace stage 1 for its errors only: eager's own (an in-place op on a leaf that requires
    grad) and, under ``functionalize_rng_ops``, random ops we would need seeds for."""
    mode, primals = fakes(real)
    with mode:
        fw, _ = steps.trace_forward(fn, primals)
    seeded = (torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()) for n in fw.graph.nodes)
    if torch._functorch.config.functionalize_rng_ops and any(seeded):
        raise NotImplementedError(
            "random ops with functionalize_rng_ops=True: torch adds Philox seed and offset "
            "inputs (PhiloxForwardSeedAOTInput)" + steps.NOT_BUILT
        )
