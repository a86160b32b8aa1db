"""Exercise 1.1, walk the graph breadth first: how a call is run and observed, the oracle, the visible
and hidden cases, and the known wrong answers (each with the hint it earns) and right answers
written differently.
"""

from __future__ import annotations

import collections
import sys

import networkx as nx

from course.autograd.hooks import iter_graph
from course.checks import case, exercise, wrong
from course.checks.solutions.lesson01 import bfs_names
from course.content.lesson01 import GRAPHS

_LIBRARY_WALK = "walked the graph with course.autograd.hooks.iter_graph"


def _walk_graph(answer, graph):
    """The answer's names on a fresh graph; or, when the answer let lesson 2's iter_graph (the
    walk this exercise rebuilds) do the walking, that fact instead of its names."""
    root, used = GRAPHS[graph]().grad_fn, []
    previous = sys.getprofile()

    def watch(frame, event, arg):  # sees every Python call, generators resumed included
        if event == "call" and frame.f_code is iter_graph.__code__:
            used.append(True)

    sys.setprofile(watch)
    try:
        names = answer(root)
    finally:
        sys.setprofile(previous)
    return {_LIBRARY_WALK: True} if used else names


def _library_walk(root):
    return [node.name() for node in iter_graph([root])]


def _networkx_bfs(root):
    """The oracle of 1.1: networkx's breadth-first search over the graph as a DiGraph.

    An edge goes from a node to each of its next functions, in next_functions order (a
    DiGraph keeps its neighbours in insertion order, and ``bfs_edges`` visits them in that
    order); None edges are left out. The walk is networkx's, not ours.
    """
    graph, stack = nx.DiGraph(), [root]
    graph.add_node(root)
    while stack:
        node = stack.pop()
        for nxt, _ in node.next_functions:
            if nxt is not None:
                if nxt not in graph:
                    stack.append(nxt)
                graph.add_edge(node, nxt)
    return [root.name()] + [v.name() for _, v in nx.bfs_edges(graph, root)]


def _depth_first(root):
    seen, names = set(), []

    def visit(node):
        seen.add(node)
        names.append(node.name())
        for nxt, _ in node.next_functions:
            if nxt is not None and nxt not in seen:
                visit(nxt)

    visit(root)
    return names


def _forgets_none(root):
    seen, queue, names = {root}, collections.deque([root]), []
    while queue:
        node = queue.popleft()
        names.append(node.name())
        for nxt, _ in node.next_functions:
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)  # None goes in too, and None.name() fails
    return names


def _no_seen_set(root):
    queue, names = collections.deque([root]), []
    while queue:
        node = queue.popleft()
        names.append(node.name())
        queue.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return names


def _seen_by_name(root):
    seen, queue, names = {root.name()}, collections.deque([root]), []
    while queue:
        node = queue.popleft()
        names.append(node.name())
        for nxt, _ in node.next_functions:
            if nxt is not None and nxt.name() not in seen:
                seen.add(nxt.name())
                queue.append(nxt)
    return names


def _seen_when_popped(root):  # right, written differently: a node may wait twice in the queue
    seen, queue, names = set(), [root], []
    while queue:
        node = queue.pop(0)
        if node in seen:
            continue
        seen.add(node)
        names.append(node.name())
        queue += [nxt for nxt, _ in node.next_functions if nxt is not None]
    return names


def _type_names(root):
    # The right order, but the class names: 'AccumulateGrad' instead of its name().
    return [name.rsplit("::", 1)[-1] for name in bfs_names(root)]


exercise(
    "1.1",
    name="bfs_names",
    title="Walk the autograd graph breadth first",
    solution=bfs_names,
    oracle=_networkx_bfs,
    run=_walk_graph,
    points=2,
    cases=[case("mlp", label="the MLP loss of this lesson (GRAPHS['mlp'])")],
    hidden=[
        case("shared", label="h = w * 2; (h.sin() + h.cos()).sum(): one node feeds two"),
        case("unbind", label="a, b = w.unbind(); a * b + w.sum(): two edges to one node"),
        case("deep", label="three residual blocks h = h + h.tanh()"),
    ],
    wrong=[
        wrong(
            _depth_first,
            "that is depth-first order: you went down the first edge to the bottom before "
            "visiting the siblings. Breadth first uses a queue (collections.deque, popleft), "
            "so every node one edge from the root comes before any node two edges away.",
        ),
        wrong(
            _forgets_none,
            "next_functions holds (None, 0) where an input needs no gradient (x and y in the "
            "MLP); skip those edges instead of queueing None.",
        ),
        wrong(
            _no_seen_set,
            "a node reached along two paths (a shared input, both outputs of unbind) is one "
            "node: keep a set of the nodes you have queued and list each once.",
        ),
        wrong(
            _seen_by_name,
            "two different nodes can have the same name (two MmBackward0, three "
            "AccumulateGrad in the MLP): remember nodes by identity (a set of Node objects), "
            "not by name().",
        ),
        wrong(
            _library_walk,
            "the order is right, but iter_graph (the walk lesson 2's logger uses) did the "
            "walking: this exercise is that walk. Keep your own queue of nodes and your own "
            "set of nodes already queued.",
        ),
        wrong(
            _type_names,
            "the order is right, but list node.name(): for a leaf's node it is "
            "'torch::autograd::AccumulateGrad', not the class name 'AccumulateGrad'.",
        ),
    ],
    right=[_seen_when_popped],
    hint="breadth first means first in, first out: a queue. Every node is listed once, even "
    "when two paths reach it, and a None edge is an input that needs no gradient.",
)
