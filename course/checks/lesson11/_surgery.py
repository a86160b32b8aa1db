"""The two halves of exercise 11.2's surgery, as the known answers of its check assemble them:
copies to the host in the forward (after the value's last reader, or wherever a wrong answer
puts them) and reloads in the backward, each half right, so that an answer built from them is
wrong in the one way its name says.
"""

from __future__ import annotations

import torch

#: The copy both directions use (torch's pass inserts the same op).
DEVICE_PUT = torch.ops.prims.device_put.default
HOST = torch.device("cpu")


def last_reader(node):
    """The last forward node that reads ``node`` or a view of it (torch's
    ``_find_all_effective_users``), found walking the graph backwards from its end (``node``
    itself when nothing reads it)."""
    views = {node}
    for n in node.graph.nodes:  # every view of node, and views of those, in graph order
        if getattr(n.target, "is_view", False) and any(a in views for a in n.all_input_nodes):
            views.add(n)
    return next(
        (n for n in reversed(node.graph.nodes) if n.op != "output" and views & set(n.all_input_nodes)), node
    )


def copies_to_host(fw_module, num_fwd_outputs, chosen, after=None):
    """The forward half of 11.2, as most of the check's wrong answers get it right: each chosen saved
    value copied to the host after its last reader (or after ``after(node)``), the forward
    returning the copy in its place. Returns ``[(k, node)]``: each moved value and its position
    among the saved values (the backward's placeholder for it has its name)."""
    out = fw_module.graph.output_node()
    returned = list(out.args[0])
    moved = []
    for k, node in enumerate(returned[num_fwd_outputs:]):
        if node.name in chosen:
            with fw_module.graph.inserting_after((after or last_reader)(node)):
                returned[num_fwd_outputs + k] = fw_module.graph.call_function(DEVICE_PUT, (node, HOST))
            moved.append((k, node))
    out.args = (tuple(returned),)
    return moved


def reload_before_every_reader(bw_module, moved, device=None):
    """The backward half, right (with ``device``, a wrong one: every reload to that device): a
    copy back before the first reader, every reader rewired."""
    held_all = {n.name: n for n in bw_module.graph.find_nodes(op="placeholder")}
    for _k, node in moved:
        held = held_all[node.name]
        readers = [n for n in bw_module.graph.nodes if held in n.all_input_nodes]
        with bw_module.graph.inserting_before(readers[0]):
            reload = bw_module.graph.call_function(DEVICE_PUT, (held, device or node.meta["val"].device))
        for reader in readers:
            reader.replace_input_with(held, reload)


def offload_these(fw_module, bw_module, num_fwd_outputs, chosen):
    """Offload the saved values named in ``chosen``, right: what the wrong answers that only
    choose wrongly get right; what they get wrong is ``chosen``."""
    reload_before_every_reader(bw_module, copies_to_host(fw_module, num_fwd_outputs, chosen))
    for gm in (fw_module, bw_module):
        gm.recompile()


def direct_last_reader(node):
    """The last forward node that reads ``node`` itself (a view's readers not followed)."""
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    return max((u for u in node.users if u.op != "output"), key=order.get, default=node)
