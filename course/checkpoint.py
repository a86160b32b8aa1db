"""The course's ``torch.utils.checkpoint`` (non-reentrant): the public names, from where they are built.

Read it side by side with torch's module; the names and signatures are the same::

    torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)   # torch's
    course.checkpoint.checkpoint(fn, x, use_reentrant=False)        # ours

Where each name is built:

- :mod:`course.autograd.checkpoint`: ``checkpoint``, ``set_checkpoint_early_stop``,
  ``noop_context_fn``, ``CheckpointError`` (torch's class, so ``except`` clauses written for
  torch catch ours);
- :mod:`course.autograd.selective`: ``create_selective_checkpoint_contexts``,
  ``SelectiveCheckpointContext``, ``SAC_IGNORED_OPS``, ``CheckpointPolicy`` (torch's enum,
  so policies written for torch work unchanged);
- :mod:`course.autograd.checkpoint_sequential`: ``checkpoint_sequential``, a chain of
  layers cut into checkpointed segments;
- :mod:`course.autograd.checkpoint_debug`: ``set_checkpoint_debug_enabled`` (and what
  ``debug=True`` records);
- :mod:`course.autograd.checkpoint_state`: the RNG and autocast state carried from the
  forward to the recomputation.

Example:
    >>> import torch
    >>> from course import checkpoint as ckpt
    >>> ckpt.CheckpointPolicy.MUST_SAVE is torch.utils.checkpoint.CheckpointPolicy.MUST_SAVE
    True
    >>> x = torch.ones(2, requires_grad=True)
    >>> ckpt.checkpoint(torch.exp, x, use_reentrant=False).sum().backward()
    >>> x.grad
    tensor([2.7183, 2.7183])

Which parts are ours and which are torch's, and how ours differs (the reentrant path is
torch's own, called for you), is said in :mod:`course.autograd.checkpoint` and the modules
above; ``GraphExecGroup`` and the reentrant helpers are not part of the course (a
``GraphExecGroup`` of torch's is honoured).
"""

from course.autograd.checkpoint import CheckpointError, checkpoint, noop_context_fn, set_checkpoint_early_stop
from course.autograd.checkpoint_debug import set_checkpoint_debug_enabled
from course.autograd.checkpoint_sequential import checkpoint_sequential
from course.autograd.selective import (
    SAC_IGNORED_OPS,
    CheckpointPolicy,
    SelectiveCheckpointContext,
    create_selective_checkpoint_contexts,
)

__all__ = [
    "SAC_IGNORED_OPS",
    "CheckpointError",
    "CheckpointPolicy",
    "SelectiveCheckpointContext",
    "checkpoint",
    "checkpoint_sequential",
    "create_selective_checkpoint_contexts",
    "noop_context_fn",
    "set_checkpoint_debug_enabled",
    "set_checkpoint_early_stop",
]
