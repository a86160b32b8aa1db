"""A joint graph built in stages you can step through: a small, visible AOTAutograd.

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
>>> from course.joint import export_joint
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

* torch runs a metadata pass and then traces the joint once; we trace your program three
  times: the forward (stage 1), the functionalized forward (stage 2; a forward with no
  in-place op is functional already, so stage 2 *is* stage 1's graph), and the joint
  (stage 4). Each traces the program, never the previous stage's graph: a custom
  ``autograd.Function``, a ``no_grad`` block or a hook changes gradients without leaving an
  aten op behind. The joint is traced without ``FunctionalTensorMode`` when stage 1 found no
  in-place op (NOTE [Functionalizing the joint only when needed] in
  :mod:`course.joint_trace`).
* torch clones a mutated input before the forward (``clone``, ``clone_1``); our joint
  returns the mutated wrapper's new value directly and has no such clones.
* We build only plain-tensor graphs. Tensor subclasses, mutated inputs that alias each other
  (synthetic bases), several outputs viewing one intermediate (intermediate bases), metadata
  mutations, in-place updates of inputs that require grad, and RNG functionalization
  (``functionalize_rng_ops``: Philox seed inputs) raise ``NotImplementedError`` naming the
  feature. Plain dropout works, as in torch by default.
* Inputs and outputs must be tensors (torch also bakes in ints and floats), and something
  must require grad (torch would return an inference graph).
* We also partition (torch's ``default_partition`` unless you pass ``partition_fn``); torch
  leaves that to ``aot_compile_joint_with_descriptors``.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch._functorch.partitioners import default_partition
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from course import descriptors as D
from course import require_supported_torch
from course import joint_trace as J
from course.joint_stage import Stage, make_stage

require_supported_torch("course.joint")

__all__ = ["JointWithDescriptors", "Stage", "export_joint"]

class JointWithDescriptors:
    """What :func:`export_joint` returns (torch's ``JointWithDescriptors``, plus stages).

    Attributes:
        graph_module: the joint graph; call it as ``graph_module(primals, tangents)``.
        params_spec, buffers_spec: parameter and buffer FQNs, in placeholder order.
        stages: the :class:`Stage` snapshots, in order; ``stage(name)`` picks one.
        fw_module, bw_module: the partitioned graphs.
        num_fwd_outputs: how many leading outputs are forward ones (mutations + user outputs).
        tangent_mask: per forward output, whether it has a tangent placeholder.
        timings: ``{stage name: seconds}`` it took to build each stage (not printed anywhere).
    """

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"no stage {name!r}; stages are {[s.name for s in self.stages]}")

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


def _flat_inputs(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    flat, _ = pytree.tree_flatten((tuple(args), kwargs))
    for i, a in enumerate(flat):
        if not isinstance(a, torch.Tensor):
            raise TypeError(
                f"export_joint: input {i} is {type(a).__name__}, not a Tensor; only tensor "
                "inputs become placeholders. Bind other arguments with functools.partial or "
                "a module attribute."
            )
        if is_traceable_wrapper_subclass(a) or type(a) not in (torch.Tensor, torch.nn.Parameter):
            raise NotImplementedError(
                f"input {i} is a tensor subclass ({type(a).__name__}): torch flattens it into "
                "SubclassGetAttrAOTInput placeholders" + J._NOT_BUILT
            )
    return flat


def _functional_call(mod: Any, fqns: list[str], n_args: int, in_spec: Any) -> Callable:
    """``fn(*params_and_buffers, *flat_args) -> flat outputs``, like torch's create_functional_call."""

    def fn(*primals: torch.Tensor) -> list[torch.Tensor]:
        state, flat = dict(zip(fqns, primals)), primals[len(fqns):]
        args, kwargs = pytree.tree_unflatten(list(flat), in_spec)
        if isinstance(mod, torch.nn.Module):
            # tie_weights=False: a Parameter under two names is two inputs, as in torch.
            out = torch.func.functional_call(mod, state, args, kwargs, tie_weights=False)
        else:
            out = mod(*args, **kwargs)
        outs, _ = pytree.tree_flatten(out)
        if not outs or any(not isinstance(o, torch.Tensor) for o in outs):
            kinds = sorted({type(o).__name__ for o in outs if not isinstance(o, torch.Tensor)})
            raise TypeError(
                f"export_joint: the function must return tensors (or tuples/lists/dicts of "
                f"them); it returned {type(out).__name__} holding {kinds or 'nothing'}"
            )
        return outs

    return fn


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
            (tracing runs under a ``FakeTensorMode``).
        decompositions: an aten decomposition table (torch's argument). Like torch, we apply
            it in the joint trace only, below autograd: ``addmm`` still differentiates as
            ``addmm``, and then both it and its backward ops are decomposed.
        partition_fn: torch's ``default_partition`` or ``min_cut_rematerialization_partition``.

    Returns:
        A :class:`JointWithDescriptors`.

    Raises:
        TypeError: an input or output is not a tensor.
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
    kwargs = dict(kwargs or {})
    is_mod = isinstance(module_or_fn, torch.nn.Module)
    params = dict(module_or_fn.named_parameters(remove_duplicate=False)) if is_mod else {}
    buffers = dict(module_or_fn.named_buffers(remove_duplicate=False)) if is_mod else {}
    flat_args = _flat_inputs(args, kwargs)
    _, in_spec = pytree.tree_flatten((tuple(args), kwargs))
    for name, t in {**params, **buffers}.items():
        if is_traceable_wrapper_subclass(t):
            raise NotImplementedError(f"{name} is a tensor subclass" + J._NOT_BUILT)
    real = [*params.values(), *buffers.values(), *flat_args]
    requires_grad = [t.requires_grad for t in real]
    if not any(requires_grad):
        raise ValueError(
            "export_joint: nothing requires grad (no parameter that requires grad and no input "
            "with requires_grad=True), so there is no backward to build. torch would return an "
            "inference graph; use make_fx for that."
        )
    primal_descs = [D.ParamAOTInput(k) for k in params] + [D.BufferAOTInput(k) for k in buffers]
    primal_descs += [D.PlainAOTInput(i) for i in range(len(flat_args))]
    fn = _functional_call(module_or_fn, [*params, *buffers], len(flat_args), in_spec)

    timings: dict[str, float] = {}
    stages, meta = _build_stages(fn, real, primal_descs, requires_grad, partition_fn, timings, decompositions)
    fw_stage, bw_stage = stages[-2], stages[-1]
    return JointWithDescriptors(
        graph_module=stages[4].graph_module,
        stages=stages,
        params_spec=list(params),
        buffers_spec=list(buffers),
        params=params,
        buffers=buffers,
        in_spec=in_spec,
        fw_module=fw_stage.graph_module,
        bw_module=bw_stage.graph_module,
        num_fwd_outputs=len(stages[1].graph.output_node().args[0]),
        tangent_mask=meta.tangent_mask,
        timings=timings,
    )


def _fakes(real: list[torch.Tensor]) -> tuple[FakeTensorMode, list[torch.Tensor]]:
    """Fake copies (shapes, dtypes, requires_grad; no data) in a fresh FakeTensorMode."""
    mode, seen = FakeTensorMode(), set()
    fakes = []
    for t in real:  # a tensor met twice (tied weights) gets a second fake, sharing storage
        fakes.append(mode.from_tensor(t if id(t) not in seen else _alias(t)))
        seen.add(id(t))
    return mode, fakes


def _alias(t: torch.Tensor) -> torch.Tensor:
    return t.detach().requires_grad_(t.requires_grad)


def _build_stages(fn, real, primal_descs, requires_grad, partition_fn, timings, decomps):
    stages: list[Stage] = []
    clock = [time.perf_counter()]

    def snap(name: str, gm: fx.GraphModule, with_descs: bool = False) -> None:
        now = time.perf_counter()  # the time to build this stage (its text not included)
        timings[name], clock[0] = now - clock[0], now
        stages.append(make_stage(name, gm, with_descs))
        clock[0] = time.perf_counter()

    # Stage 1 runs the in-place ops for real (on fakes), so it gets fakes of its own.
    mode, primals = _fakes(real)
    with mode:
        fw, fw_meta = J.trace_forward(fn, primals)
    if any(J._is_mutating(n) for n in fw.graph.nodes):
        mode, primals = _fakes(real)
    with mode:
        return _build_rest(fn, fw, fw_meta, primals, primal_descs, requires_grad, partition_fn, snap,
                           stages, decomps)


def _build_rest(fn, fw, fw_meta, primals, primal_descs, requires_grad, partition_fn, snap, stages,
                decomps):
    if torch._functorch.config.functionalize_rng_ops and any(
        torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()) for n in fw.graph.nodes
    ):
        raise NotImplementedError(
            "random ops with functionalize_rng_ops=True: torch adds Philox seed and offset "
            "inputs (PhiloxForwardSeedAOTInput)" + J._NOT_BUILT
        )
    snap("traced_forward", fw)
    ffw, meta = J.trace_functionalized_forward(fn, fw, primals, fw_meta)
    snap("functionalized_forward", ffw)
    if not any(meta.tangent_mask):
        raise ValueError(
            "export_joint: no output requires grad (e.g. it is detached, or aliases an input), "
            "so the joint would have no tangents and no backward. torch would return an "
            "inference graph; use make_fx for that."
        )
    snap("joint_function", J.add_tangent_placeholders(ffw, meta))
    vals = [n.meta["val"] for n in ffw.graph.output_node().args[0]]
    tangents = [torch.empty_like(v, memory_format=torch.contiguous_format)
                for v, m in zip(vals, meta.tangent_mask) if m]
    mutates = ffw is not fw  # stage 2 retraced the program because stage 1 had in-place ops
    joint = J.trace_joint(fn, meta, primals, tangents, mutates=mutates, decompositions=decomps)
    snap("traced_joint", joint)
    J.attach_descriptors(joint, primal_descs, meta, requires_grad)
    snap("descriptors", joint, with_descs=True)
    fw_mod, bw_mod = J.partition(joint, (primals, tangents), len(vals), partition_fn)
    snap("partitioned_forward", fw_mod, with_descs=True)
    snap("partitioned_backward", bw_mod, with_descs=True)
    return stages, meta
