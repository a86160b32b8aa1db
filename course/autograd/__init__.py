"""The course's side of ``torch/autograd/graph.py``, one concept per module.

- :mod:`course.autograd.graph`: ``Node``, ``GradientEdge``, ``get_gradient_edge``,
  ``increment_version`` (lesson 01);
- :mod:`course.autograd.hooks`: ``register_multi_grad_hook`` and the engine's whole-graph
  logging (lesson 02);
- :mod:`course.autograd.creation`: ``node_creation_hook``, torch 2.14's hook on every node as
  it is made, by our own means on 2.13 too (lesson 02);
- :mod:`course.autograd.callbacks`: ``queue_callback``, torch 2.15's callback at the end of a
  backward, on the engine's own queue on 2.13 and 2.14 too (lesson 02);
- :mod:`course.autograd.saved_tensors`: ``saved_tensors_hooks``, ``save_on_cpu``,
  ``disable_saved_tensors_hooks`` (lesson 03);
- :mod:`course.autograd.mutation`: ``allow_mutation_on_saved_tensors`` (lesson 05);
- :mod:`course.autograd.version_check`: ``checked_hooks``, saved-tensor hooks that keep
  autograd's in-place check (course's own; lessons 03, 04 and 08);
- :mod:`course.autograd.checkpoint`: non-reentrant ``checkpoint`` on our saved-tensor hooks,
  with :mod:`course.autograd.checkpoint_state` (RNG and autocast state carried into the
  recomputation) and :mod:`course.autograd.checkpoint_debug` (``debug=True``'s op lists);
- :mod:`course.autograd.selective`: ``create_selective_checkpoint_contexts`` and torch's
  ``CheckpointPolicy`` (lesson 09);
- :mod:`course.autograd.checkpoint_sequential`: ``checkpoint_sequential``, a chain of layers cut
  into checkpointed segments (lesson 09);
- :mod:`course.autograd.overlap`: whether two strided views of one storage share an element,
  from sizes and strides alone (``allow_mutation_on_saved_tensors``'s question, lesson 05).

:mod:`course.checkpoint` gathers the checkpoint names under ``torch.utils.checkpoint``'s.

:mod:`course.autograd_graph` gathers their public names under torch's module name.

What is ours and what is torch's: the autograd graph, its engine, the hook stacks and the
version counters are torch's C++. The graph modules are annotated copies of torch's thin Python
layer over them, making the same ``torch._C`` calls; ``register_multi_grad_hook`` and
``allow_mutation_on_saved_tensors`` keep torch's algorithm with re-written bookkeeping. The
checkpoint modules re-tell torch's Python ``torch/utils/checkpoint.py`` on our hooks, under its
names; ``version_check`` is ours alone (torch has no such check under hooks).
"""
