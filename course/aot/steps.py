"""The pieces :func:`course.aot.joint.export_joint` is made of, one function per step.

How they fit together is told once, in :mod:`course.aot.joint` (the export, and which
stages are built when); here each function says what it does on its own. In short: the
export runs :func:`collect_metadata` (an untraced pass), :func:`trace_joint` and
:func:`attach_descriptors`; the teaching stages (:func:`trace_forward`,
:func:`trace_functionalized_forward`, :func:`add_tangent_placeholders`, :func:`partition`)
are built later, on demand, by :class:`course.aot.stage.StageBuilder`. Each tracing function
traces the *program* again; none of them reads the previous stage's graph, because what
autograd does (a custom ``autograd.Function``, a ``no_grad`` block, a hook) leaves no aten op
behind to read.

What is ours and what is torch's: the tracing machinery is torch's (``make_fx`` records
aten ops; ``FunctionalTensorMode`` with ``to_fun`` / ``from_fun`` / ``has_data_mutation``
removes mutations; ``torch.autograd.grad`` writes the backward; torch's partitioner splits
the joint). The course's code is the order of the steps, the bookkeeping
(:class:`ForwardMeta`, which torch keeps in ``ViewAndMutationMeta``), the checks that refuse
what we do not build (each ``NotImplementedError`` names the descriptor torch would use), and
the descriptors, which are :mod:`course.aot.descriptors`' classes.

NOTE [Which outputs get a tangent]
    torch's ``fn_prepped_for_autograd`` asks for a tangent for (1) every mutated input whose
    new value requires grad (``x.mul_(w)``), and (2) every user output that requires grad
    and is not an alias of an input or of another output. We compute (1) from the
    functional wrappers after the forward and (2) from storages and ``_is_view()``.

Differences from torch: see :mod:`course.aot.joint`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch._dispatch.python import enable_python_dispatcher
from torch._functorch._aot_autograd.functional_utils import (
    from_fun,
    has_data_mutation,
    has_metadata_mutation,
    to_fun,
)
from torch._functorch._aot_autograd.graph_capture_wrappers import set_partitioner_tag_is_backward
from torch._functorch.partitioners import _is_tangent
from torch._higher_order_ops.effects import has_effects, with_effects
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx
from torch.multiprocessing.reductions import StorageWeakRef

from course import require_supported_torch
from course.aot import descriptors

require_supported_torch("course.aot.joint")

__all__ = [
    "ForwardMeta",
    "add_tangent_placeholders",
    "attach_descriptors",
    "collect_metadata",
    "partition",
    "trace_forward",
    "trace_functionalized_forward",
    "trace_joint",
]

#: An explicit, empty decomposition table for every ``make_fx`` call. Given no table at all,
#: torch 2.14's ``make_fx`` rewrites ``detach`` into ``alias`` (2.13's does not); torch's
#: own export passes a table, so its graphs keep ``detach``, and so do ours on both releases.
NO_DECOMPOSITIONS: dict = {}

NOT_BUILT = (
    "; course.aot.joint does not build that, use "
    "torch._functorch.aot_autograd.aot_export_joint_with_descriptors"
)


@dataclass
class ForwardMeta:
    """What the functionalized trace learned (torch keeps this in ``ViewAndMutationMeta``)."""

    mutated_inp_indices: list[int] = field(default_factory=list)  # inputs with data mutations
    output_requires_grad: list[bool] = field(default_factory=list)
    tangent_mask: list[bool] = field(default_factory=list)  # per functional output
    num_user_outputs: int = 0


def trace_forward(fn: Callable[..., list], primals: list) -> tuple[fx.GraphModule, ForwardMeta]:
    """Stage 1: ``make_fx`` of the functional call, mutations (``add_``, ``copy_``) still in it.

    While tracing we also note which outputs require grad and which alias an input or
    another output (NOTE [Which outputs get a tangent]): ``make_fx`` records below autograd,
    so the traced tensors carry real ``requires_grad`` and view relations.
    """
    meta = ForwardMeta()

    def forward(primals: list) -> list:
        versions = [p._version for p in primals]  # bumped by every in-place op
        layouts = [(p.shape, p.stride()) for p in primals]  # changed by t_(), resize_, ...
        outs = fn(*primals)
        _check_aliased_mutations(
            primals, [(p.shape, p.stride()) != lay for p, lay in zip(primals, layouts)], metadata=True
        )
        _check_aliased_mutations(primals, [p._version != v for p, v in zip(primals, versions)])
        meta.output_requires_grad = [o.requires_grad for o in outs]
        meta.tangent_mask = _tangent_mask(primals, outs)
        meta.num_user_outputs = len(outs)
        return outs

    return make_fx(forward, NO_DECOMPOSITIONS)(primals), meta


def _storage(t: torch.Tensor) -> StorageWeakRef:
    return StorageWeakRef(t.untyped_storage())


def _tangent_mask(f_args: list, f_outs: list) -> list[bool]:
    """NOTE [Which outputs get a tangent], part (2), for the user outputs."""
    inp_storages = {_storage(a) for a in f_args}
    mask = []
    for o in f_outs:
        s = _storage(o)
        if s in inp_storages:  # torch: OutputType.alias_of_input -> no tangent
            mask.append(False)
            continue
        sharing = [p for p in f_outs if _storage(p) == s]
        if len(sharing) > 1 and all(p._is_view() for p in sharing):
            raise NotImplementedError(
                "several outputs are views of one intermediate: torch returns that base as an "
                "extra output (IntermediateBaseAOTOutput)" + NOT_BUILT
            )
        # A view whose base is another output is an alias of that output: no tangent.
        mask.append(o.requires_grad and not (len(sharing) > 1 and o._is_view()))
    return mask


def _check_aliased_mutations(primals: list, mutated: list[bool], *, metadata: bool = False) -> None:
    storages = [_storage(p) for p in primals]
    for i, m in enumerate(mutated):
        if m and storages.count(storages[i]) > 1 and metadata:
            raise NotImplementedError(
                f"input {i} has its metadata mutated (e.g. t_(), resize_) and aliases another "
                "input: torch returns it as MetadataMutationAOTOutput" + NOT_BUILT
            )
        if m and storages.count(storages[i]) > 1:
            raise NotImplementedError(
                f"input {i} is mutated and aliases another input: torch merges them into a "
                "synthetic base (SyntheticBaseAOTInput / ViewBaseAOTInput)" + NOT_BUILT
            )


def _check_input_mutations(f_args: list, primals: list, meta: ForwardMeta) -> None:
    storages = [_storage(p) for p in primals]
    for i, (f, p) in enumerate(zip(f_args, primals)):
        if has_metadata_mutation(f, p, check_only_storage_mutation=False):
            aliased = storages.count(storages[i]) > 1
            raise NotImplementedError(
                f"input {i} has its metadata mutated (e.g. t_(), resize_)"
                + (
                    " and aliases another input: torch returns it as MetadataMutationAOTOutput"
                    if aliased
                    else ": torch replays the change on the caller's tensor"
                )
                + NOT_BUILT
            )
    for i, (f, p) in enumerate(zip(f_args, primals)):
        if not has_data_mutation(f):
            continue
        _check_aliased_mutations(primals, [j == i for j in range(len(primals))])
        if p.requires_grad:
            raise NotImplementedError(
                f"input {i} requires grad and is mutated in place: torch clones it before "
                "the forward and gives the mutation a tangent" + NOT_BUILT
            )
        meta.mutated_inp_indices.append(i)


def _run_functionalized(fn: Callable[..., list], primals: list, meta: ForwardMeta) -> list:
    """Run ``fn`` on ``to_fun`` wrappers (under a FunctionalTensorMode) and fill ``meta``."""
    # See torch's Note [Disabling Functionalize TLS Above Python Functionalization]
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)):
        f_args = [to_fun(p) for p in primals]
        f_outs = list(fn(*f_args))
    _check_input_mutations(f_args, primals, meta)
    meta.output_requires_grad = [o.requires_grad for o in f_outs]
    user_mask = _tangent_mask(f_args, f_outs)
    # A mutated input gets a tangent when its new value requires grad (x.mul_(w)).
    mutated_mask = [f_args[i].requires_grad for i in meta.mutated_inp_indices]
    meta.tangent_mask = mutated_mask + user_mask
    meta.num_user_outputs = len(f_outs)
    mutated = [from_fun(f_args[i]) for i in meta.mutated_inp_indices]
    return mutated + [from_fun(o) for o in f_outs]


def trace_functionalized_forward(
    fn: Callable[..., list], fw: fx.GraphModule, primals: list, fw_meta: ForwardMeta
) -> tuple[fx.GraphModule, ForwardMeta]:
    """Stage 2: trace the program under functionalization; mutated inputs become leading outputs.

    Like torch's ``create_functionalized_fn`` + ``fn_input_mutations_to_outputs``: wrap every
    input with ``to_fun``, run, ask each wrapper ``has_data_mutation``, and return the
    updated values *before* the user outputs (torch's order). A stage 1 graph ``fw`` with no
    in-place op is functional already: we return it (and ``fw_meta``) as it is. We trace
    ``fn`` rather than replay ``fw`` because ``requires_grad`` is a fact about the program
    (a ``no_grad`` block, a custom ``autograd.Function``), not about its aten ops.
    """
    if not any(is_mutating(n) for n in fw.graph.nodes):
        return fw, fw_meta
    meta = ForwardMeta()

    def functionalized(primals: list) -> list:
        return _run_functionalized(fn, primals, meta)

    with enable_python_dispatcher(), FunctionalTensorMode(_allow_token_discovery=True):
        gm = make_fx(functionalized, NO_DECOMPOSITIONS)(primals)
    return gm, meta


class _InPlaceSpotter(FunctionalTensorMode):
    """A FunctionalTensorMode that also notes whether the program ran an in-place op."""

    def __init__(self) -> None:
        super().__init__(_allow_token_discovery=True)
        self.saw_mutation = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.saw_mutation and _is_mutating_op(func):
            self.saw_mutation = True
        return super().__torch_dispatch__(func, types, args, kwargs)


def collect_metadata(fn: Callable[..., list], primals: list) -> tuple[ForwardMeta, bool, list]:
    """What the joint needs, from one untraced run: ``(meta, ran an in-place op, outputs)``.

    torch's ``run_functionalized_fw_and_collect_metadata``: the program runs once under a
    ``FunctionalTensorMode`` on fake inputs, with no ``make_fx`` recording it. The wrappers
    say which inputs were mutated; the outputs say which require grad and which alias.
    It raises the same errors as stages 1-2 would (NotImplementedError for what we do not
    build); the stages themselves are traced later, when a learner asks for them.
    """
    meta = ForwardMeta()
    mode = _InPlaceSpotter()
    with enable_python_dispatcher(), mode:
        outs = _run_functionalized(fn, primals, meta)
    return meta, mode.saw_mutation or bool(meta.mutated_inp_indices), outs


def add_tangent_placeholders(fw: fx.GraphModule, meta: ForwardMeta) -> fx.GraphModule:
    """Stage 3: the joint function's inputs: ``(primals, tangents)``, one tangent per masked output.

    Only a picture: a copy of stage 2 with unused ``tangents_k`` placeholders, so a learner
    sees what ``joint(primals, tangents)`` will receive before the backward is traced.
    """
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    out_node = fw.graph.output_node()
    for node in fw.graph.nodes:
        if node is out_node:
            last = [n for n in graph.nodes if n.op == "placeholder"][-1]
            with graph.inserting_after(last):
                for k in range(sum(meta.tangent_mask), 0, -1):
                    graph.placeholder(f"tangents_{k}")
            graph.output(fx.node.map_arg(node.args[0], env.__getitem__))
        else:
            env[node] = graph.node_copy(node, env.__getitem__)
    return fx.GraphModule(fw, graph)


# NOTE [Ops that mutate without saying so]
#     An op's schema marks the arguments it writes (``Tensor(a!)``), and that is how we tell
#     whether a program needs functionalizing (in a graph, or as the metadata pass runs it).
#     A few batch-norm kernels write their running statistics in place yet declare nothing
#     (``native_batch_norm(..., Tensor? running_mean, ...)``); functionalization rewrites them
#     to ``_native_batch_norm_legit_functional``. Skip them and the joint silently loses the
#     running-stat updates that torch returns as InputMutationAOTOutput, so we list them here.
_UNDECLARED_MUTATIONS = frozenset(
    getattr(torch.ops.aten, name).default
    for name in ("native_batch_norm", "_batch_norm_impl_index", "cudnn_batch_norm", "miopen_batch_norm")
)


def _is_mutating_op(op: Any) -> bool:
    if not isinstance(op, torch._ops.OpOverload):
        return False
    return op._schema.is_mutable or op in _UNDECLARED_MUTATIONS


def is_mutating(node: fx.Node) -> bool:
    return _is_mutating_op(node.target)


def trace_joint(
    fn: Callable[..., list],
    meta: ForwardMeta,
    primals: list,
    tangents: list,
    *,
    mutates: bool,
    decompositions: dict | None = None,
) -> fx.GraphModule:
    """Stage 4: ``make_fx`` of ``joint(primals, tangents) -> (outs, grads)`` (torch's ``create_joint``).

    The forward is your program traced again, and the backward is whatever
    ``torch.autograd.grad`` does, recorded. We trace the program, not stage 2's graph: a
    custom ``autograd.Function``, a ``no_grad`` block or a tensor hook changes the gradient
    but leaves no trace among the aten ops. Nodes get torch's ``partitioner_tag``.

    NOTE [Functionalizing the joint only when needed]
        torch traces the joint under ``FunctionalTensorMode``. When the program ran no in-place
        op (``mutates=False``: :func:`collect_metadata` saw none, as stage 1 would show none),
        we first trace without it (half the dispatch work); if the recorded backward holds an
        in-place op (a custom backward may), we trace again under functionalization, as torch
        does.
    """
    args = (fn, meta, primals, tangents, decompositions)
    gm = _trace_joint(*args, functionalize=mutates)
    if not mutates and any(is_mutating(n) for n in gm.graph.nodes):
        gm = _trace_joint(*args, functionalize=True)
    _check_no_effects(gm)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _check_no_effects(gm: fx.GraphModule) -> None:
    """Refuse a joint that calls an op with side effects (``aten._print``, an effectful custom
    op): torch orders such ops by threading a *token* through the graph, an extra input and
    output per side (ForwardTokenAOTInput/Output, BackwardTokenAOTInput/Output). We have no
    tokens, so without this check the op would sit in the graph unordered and unmarked."""
    for node in gm.graph.nodes:
        op = node.args[1] if node.target is with_effects else node.target
        if isinstance(op, torch._ops.OpOverload) and has_effects(op):
            where = "backward" if node.meta.get("partitioner_tag") == "is_backward" else "forward"
            raise NotImplementedError(
                f"the {where} calls {op}, an op with side effects: torch threads an effect token "
                f"through the joint for it ({where.capitalize()}TokenAOTInput / "
                f"{where.capitalize()}TokenAOTOutput)" + NOT_BUILT
            )


def _trace_joint(fn, meta, primals, tangents, decomps, *, functionalize: bool) -> fx.GraphModule:
    wrap, unwrap = (to_fun, from_fun) if functionalize else (lambda t: t, lambda t: t)

    def joint(primals: list, tangents: list) -> tuple[tuple, tuple]:
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize)):
            f_primals = [wrap(p) for p in primals]
            f_tangents = [wrap(t) for t in tangents]
            outs = list(fn(*f_primals))
            # torch's order: the new values of mutated inputs first, then the user outputs.
            outs = [f_primals[i] for i in meta.mutated_inp_indices] + outs
            for node in get_proxy_mode().tracer.graph.nodes:  # as torch's create_joint does
                node.meta["partitioner_tag"] = "is_backward" if _is_tangent(node) else "is_forward"
            needed = [o for o, m in zip(outs, meta.tangent_mask) if m]
            grad_primals = [p for p, t in zip(f_primals, primals) if t.requires_grad]
            with fx_traceback.preserve_node_meta(), set_partitioner_tag_is_backward():
                grads = iter(torch.autograd.grad(needed, grad_primals, f_tangents, allow_unused=True))
            all_grads = [next(grads) if p.requires_grad else None for p in primals]
        return tuple(unwrap(o) for o in outs), tuple(unwrap(g) for g in all_grads)

    mode = FunctionalTensorMode(_allow_token_discovery=True) if functionalize else nullcontext()
    with enable_python_dispatcher(), mode:
        return make_fx(joint, NO_DECOMPOSITIONS if decomps is None else decomps)(primals, tangents)


def attach_descriptors(
    gm: fx.GraphModule, primal_descs: list, meta: ForwardMeta, requires_grad: list[bool]
) -> tuple[list, list]:
    """Stage 5: ``node.meta["desc"]`` on every placeholder, a list of them on the output node."""
    out_descs = [descriptors.InputMutationAOTOutput(primal_descs[i]) for i in meta.mutated_inp_indices]
    out_descs += [descriptors.PlainAOTOutput(i) for i in range(meta.num_user_outputs)]
    tangent_descs = [descriptors.TangentAOTInput(d) for d, m in zip(out_descs, meta.tangent_mask) if m]
    grad_descs = [descriptors.GradAOTOutput(d) if rg else None for d, rg in zip(primal_descs, requires_grad)]
    placeholders = gm.graph.find_nodes(op="placeholder")
    for node, desc in zip(placeholders, primal_descs + tangent_descs, strict=True):
        node.meta["desc"] = desc
    gm.graph.output_node().meta["desc"] = out_descs + grad_descs
    return primal_descs + tangent_descs, out_descs + grad_descs


def partition(
    joint: fx.GraphModule, joint_inputs: Any, num_fwd_outputs: int, partition_fn: Callable
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Stages 6-7: torch's partitioner splits the joint; saved activations get descriptors.

    The partitioner writes torch's ``SavedForBackwardsAOTOutput``; we turn them into ours.
    """
    fw, bw = partition_fn(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs)
    for gm in (fw, bw):
        out = gm.graph.output_node()
        out.meta["desc"] = [
            descriptors.from_torch(d)
            if d is not None and not isinstance(d, (descriptors.AOTInput, descriptors.AOTOutput))
            else d
            for d in out.meta.get("desc", [])
        ]
    return fw, bw
