"""A notebook's cells read from its JSON, torch-free: the one reader every command uses.

A ``.ipynb`` stores a cell's source as one string or as a list of lines; every reader of the
course (the grader, ``course progress``, the room, the house rules, the workspace's edit hash)
goes through :func:`source`, so none of them can disagree about what a cell says::

    >>> import json
    >>> text = json.dumps({"cells": [{"cell_type": "markdown", "source": "# Hi"},
    ...                              {"cell_type": "code", "source": ["x = 1", " + 1"]}]})
    >>> code_cells(text)
    [(1, 'x = 1 + 1')]
    >>> code_cells("[]")
    Traceback (most recent call last):
    ...
    ValueError: not a Jupyter notebook: its JSON has no list of cells
"""

from __future__ import annotations

import json

__all__ = ["cells", "code_cells", "source"]


def source(cell: dict) -> str:
    """A cell's source as one string, however the file stored it."""
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def cells(data: str | bytes) -> list[dict]:
    """Every cell of the notebook whose JSON is ``data``.

    Raises:
        ValueError: ``data`` is not JSON, or its JSON holds no list of cells; the message says
            which, starting "not a Jupyter notebook".
    """
    try:
        notebook = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"not a Jupyter notebook: not JSON ({e})") from None
    found = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(found, list) or not all(isinstance(c, dict) for c in found):
        raise ValueError("not a Jupyter notebook: its JSON has no list of cells")
    return found


def code_cells(data: str | bytes) -> list[tuple[int, str]]:
    """``(index, source)`` of every code cell, the index counting every cell from 0.

    Raises:
        ValueError: as :func:`cells`.
    """
    return [(i, source(c)) for i, c in enumerate(cells(data)) if c.get("cell_type") == "code"]
