"""Public face of :mod:`course.aot.fx_utils` (kept at this path: lessons and tests import it).

The nine ``get_*`` functions of ``torch._functorch._aot_autograd.fx_utils``; the code, its
explanations and which parts are ours and which torch's live in :mod:`course.aot.fx_utils`.
"""

from course.aot.fx_utils import (
    get_all_input_and_grad_nodes,
    get_all_output_and_tangent_nodes,
    get_buffer_nodes,
    get_named_buffer_nodes,
    get_named_param_nodes,
    get_param_and_grad_nodes,
    get_param_nodes,
    get_plain_input_and_grad_nodes,
    get_plain_output_and_tangent_nodes,
)

__all__ = [
    "get_all_input_and_grad_nodes",
    "get_all_output_and_tangent_nodes",
    "get_buffer_nodes",
    "get_named_buffer_nodes",
    "get_named_param_nodes",
    "get_param_and_grad_nodes",
    "get_param_nodes",
    "get_plain_input_and_grad_nodes",
    "get_plain_output_and_tangent_nodes",
]
