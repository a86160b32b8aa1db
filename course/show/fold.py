"""Deep drawings folded into bands that stand side by side, so they fit a laptop screen.

A layered drawing of a long chain is tall and narrow: at 1366x768 only its first rows fit
under a stepper's buttons. :func:`fold_rows` cuts the rows into bands and stands them left
to right; an edge from one band to the next is cut into two stubs, and the drawing names
the far end at each (``to n4`` under the first band, ``from n3`` over the next), as a
flowchart continues on the next column.

Example:
    >>> import networkx as nx
    >>> from course.show.layout import layered_layout
    >>> folded = fold_rows(layered_layout(nx.path_graph(5, create_using=nx.DiGraph)), max_rows=3)
    >>> folded["bands"], sorted(folded["continued"])   # five rows: bands of 2 and 3
    ([[0, 1], [2, 3, 4]], [(1, 2)])
    >>> fold_rows(layered_layout(nx.path_graph(2, create_using=nx.DiGraph)), 3)["continued"]
    {}
"""

from __future__ import annotations

__all__ = ["fold_rows"]


def _balanced_bands(depth: int, max_rows: int) -> list[range]:
    """``depth`` rows cut into the fewest bands of at most ``max_rows``, sizes within one."""
    n = -(-depth // max_rows)
    edges = [round(i * depth / n) for i in range(n + 1)]
    return [range(a, b) for a, b in zip(edges, edges[1:])]


def fold_rows(layout: dict, max_rows: int, gap: float = 36.0) -> dict:
    """Stand the rows of ``layout`` in bands of at most ``max_rows``, side by side.

    Each band is moved to start at the top and to sit ``gap`` right of the band before. An
    edge from one band to a later one is cut where it leaves its band: its route ends under
    the band (``routes``) and goes on from above the next band (``continued``), and a
    drawing names the far end at each cut. Returns a new layout with ``bands`` (the graph's
    nodes per band) and ``continued`` added; a layout that fits is returned with one band.
    """
    rows, pos = layout["rows"], layout["pos"]
    if len(rows) <= max_rows:  # it fits: unchanged
        return dict(layout, bands=[[n for r in rows for n in r]], continued={})
    bands = _balanced_bands(len(rows), max_rows)
    band_of = {n: b for b, ks in enumerate(bands) for k in ks for n in rows[k]}
    size = layout["sizes"]
    # A band's top and bottom y, and its x extent, from its boxes and the routes in it.
    top = [max(pos[n][1] + size[n][1] / 2 for k in ks for n in rows[k]) for ks in bands]
    low = [min(pos[n][1] - size[n][1] / 2 for k in ks for n in rows[k]) for ks in bands]
    spans: list[list[float]] = [[] for _ in bands]
    for n, (cx, _) in pos.items():
        spans[band_of[n]] += [cx - size[n][0] / 2, cx + size[n][0] / 2]
    for route in layout["routes"].values():
        for px, py in route:
            spans[next((b for b in range(len(bands)) if py >= low[b] - 1e-6), len(bands) - 1)].append(px)
    shift, right = [], 0.0
    for b in range(len(bands)):  # (dx, dy) moving band b to the top, right of band b - 1
        shift.append((right - min(spans[b]) + (gap if b else 0.0), top[0] - top[b]))
        right = max(spans[b]) + shift[b][0]

    def moved(p, b):
        return (p[0] + shift[b][0], p[1] + shift[b][1])

    stub = 10.0  # how far a cut edge runs past its band's edge
    routes, continued = {}, {}
    for (a, c), route in layout["routes"].items():
        ba, bc = band_of[a], band_of[c]
        if ba == bc:
            routes[a, c] = [moved(p, ba) for p in route]
            continue
        head = [p for p in route if p[1] >= low[ba]]
        tail = [p for p in route if p[1] <= top[bc]]
        routes[a, c] = [moved(p, ba) for p in head + [(head[-1][0], low[ba] - stub)]]
        continued[a, c] = [moved(p, bc) for p in [(tail[0][0], top[bc] + stub)] + tail]
    out = dict(
        layout, pos={n: moved(p, band_of[n]) for n, p in pos.items()}, routes=routes, continued=continued
    )
    out["bands"] = [[n for k in ks for n in rows[k]] for ks in bands]
    return out
