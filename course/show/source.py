"""The course's source beside torch's, in the notebook: highlighted, the differences marked.

A learner's JupyterLab opens in their lesson folder, which holds no ``course/`` source, so
a lesson shows the code where the learner is::

    >>> import torch.autograd.graph as tg
    >>> import course.autograd_graph as cg
    >>> view = show_source(cg.GradientEdge, tg.GradientEdge)
    >>> view                                   # the stable form a saved notebook keeps
    SourcePair(course.autograd.graph.GradientEdge | torch.autograd.graph.GradientEdge)
    >>> print(view.text.splitlines()[0])       # doctest: +ELLIPSIS
    course: course/autograd/graph.py:... | torch: torch/autograd/graph.py:...

In JupyterLab the last line of a cell shows the HTML form: two columns, the course's on
the left and torch's on the right, each line highlighted by pygments, with the lines that
differ marked (difflib): yellow where both sides changed a line, green where only the
course has it, red where only torch has it. ``print(view)`` prints the same as text, in
the manner of ``diff --side-by-side`` (``|`` changed, ``<`` only ours, ``>`` only torch's).

A torch object written in C++ (``torch.mul``, a ``Node`` class) has no Python source; its
column says so::

    >>> import torch
    >>> print(show_source(cg.GradientEdge, torch.mul).torch_note)
    torch.mul has no Python source: it is a builtin written in C++ (torch/csrc, aten/src/ATen)

Lines are compared without their indentation, so a method moved into a class still counts as
the same line.
"""

from __future__ import annotations

import ast
import difflib
import html
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path

from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer
from pygments.token import STANDARD_TYPES

__all__ = ["SourcePair", "line_up", "show_source", "source_of"]

#: Row backgrounds of the HTML view, by difflib opcode.
ROW_COLORS = {"replace": "#fff3c4", "delete": "#e6f4ea", "insert": "#fdecea", "equal": ""}
_MARKS = {"replace": "|", "delete": "<", "insert": ">", "equal": " "}
_WIDTH = 72  # characters of each column in the text form
#: The colours of pygments' default style, for the tokens inside a view only.
CSS = HtmlFormatter(style="default").get_style_defs(".course-source")


def _name(obj) -> str:
    """``module.qualname`` of a function, class or module (``torch.mul`` for a builtin)."""
    if inspect.ismodule(obj):
        return obj.__name__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    qualname = getattr(obj, "__qualname__", getattr(obj, "__name__", repr(obj)))
    if qualname.startswith("_VariableFunctionsClass."):  # torch.mul and the other C++ functions
        module, qualname = "torch", qualname.split(".", 1)[1]  # where a learner calls them from
    if module == "builtins":  # a class made in C++ (a Node type): name torch's module for it
        import torch

        for where, mod in (("torch._C._functions", torch._C._functions), ("torch._C", torch._C)):
            if getattr(mod, qualname, None) is obj:
                module = where
    return f"{module}.{qualname}"


def _short_path(path: str) -> str:
    """The file's path from its top package folder (``torch/autograd/graph.py``)."""
    parts = Path(path).parts
    for top in ("course", "torch"):
        if top in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(top) :])
    return Path(path).name


def source_of(obj) -> tuple[list[str], str, str]:
    """``(lines, where, note)``: the source lines of ``obj``, ``"path:first line"``, and a
    note that is empty when there is source and says why there is none otherwise.

    Example:
        >>> import torch
        >>> source_of(torch.mul)[0], source_of(torch.mul)[2][:30]
        ([], 'torch.mul has no Python source')
    """
    name = _name(obj)
    try:
        lines, first = inspect.getsourcelines(obj)
        path = inspect.getsourcefile(obj) or inspect.getfile(obj)
    except (TypeError, OSError):
        kind = (
            "a builtin written in C++ (torch/csrc, aten/src/ATen)"
            if name.startswith("torch")
            else "not written in Python or its file is missing"
        )
        return [], "", f"{name} has no Python source: it is {kind}"
    return [line.rstrip("\n") for line in lines], f"{_short_path(path)}:{max(first, 1)}", ""


def _css_class(ttype) -> str:
    """Pygments' short CSS class for a token type (``"k"`` for a keyword), from its family."""
    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    return STANDARD_TYPES[ttype]


def _highlighted(lines: list[str]) -> list[str]:
    """Each line as HTML, its tokens in spans of pygments' classes (styled by :data:`CSS`)."""
    out, line = [], []
    for ttype, value in PythonLexer(stripnl=False, ensurenl=False).get_tokens("\n".join(lines)):
        css = _css_class(ttype)
        for k, piece in enumerate(value.split("\n")):
            if k:
                out.append("".join(line))
                line = []
            if piece:
                text = html.escape(piece)
                line.append(f'<span class="{css}">{text}</span>' if css else text)
    out.append("".join(line))
    return (out + [""] * len(lines))[: len(lines)]


def _without_docstrings(lines: list[str]) -> list[int]:
    """The indices of ``lines`` that are not in a docstring (of the object or anything in it)."""
    tree = ast.parse(textwrap.dedent("\n".join(lines)))
    drop = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(getattr(node.body[0], "value", None), ast.Constant)
            and isinstance(node.body[0].value.value, str)
        ):
            drop.update(range(node.body[0].lineno - 1, node.body[0].end_lineno))
    return [i for i in range(len(lines)) if i not in drop]


@dataclass(frozen=True)
class SourcePair:
    """The course's source and torch's, lined up. ``rows`` holds, per shown line,
    ``(opcode, course line number or None, torch line number or None)``, numbers counted
    from 0 in ``course_lines`` / ``torch_lines``."""

    course_name: str
    torch_name: str
    course_lines: tuple[str, ...]
    torch_lines: tuple[str, ...]
    course_where: str
    torch_where: str
    torch_note: str
    rows: tuple[tuple[str, int | None, int | None], ...]
    course_numbers: tuple[int, ...] = ()  # each shown line's number in the object's source
    torch_numbers: tuple[int, ...] = ()

    def __repr__(self) -> str:
        # What a saved notebook keeps as text/plain: no line numbers, which move between releases.
        return f"SourcePair({self.course_name} | {self.torch_name or 'no torch side'})"

    def counts(self) -> dict[str, int]:
        """How many rows are equal, changed (``replace``), only ours (``delete``), only torch's."""
        out = {op: 0 for op in _MARKS}
        for op, _, _ in self.rows:
            out[op] += 1
        return out

    @property
    def text(self) -> str:
        """The side-by-side text form (the fallback where no HTML is shown)."""
        head = f"course: {self.course_where}"
        head += f" | torch: {self.torch_where or self.torch_note}" if self.torch_name else ""
        out = [head]
        for op, i, j in self.rows:
            left = self.course_lines[i] if i is not None else ""
            right = self.torch_lines[j] if j is not None else ""
            if not self.torch_lines:  # one column: the line as it is
                out.append(left)
                continue
            left = left if len(left) <= _WIDTH else left[: _WIDTH - 1] + "~"  # ~: cut here
            out.append(f"{left:<{_WIDTH}} {_MARKS[op]} {right}".rstrip())
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        ours, theirs = _highlighted(list(self.course_lines)), _highlighted(list(self.torch_lines))
        two = bool(self.torch_name)
        cell = "padding:0 6px;vertical-align:top;white-space:pre;font-family:monospace;text-align:left"
        num = "padding:0 4px;color:#888;text-align:right;user-select:none;font-family:monospace"
        head = (
            f'<th colspan="2" style="text-align:left">{html.escape(self.course_name)}<br><small>'
            f"{html.escape(self.course_where)}</small></th>"
        )
        if two:
            head += (
                f'<th colspan="2" style="text-align:left">{html.escape(self.torch_name)}<br>'
                f"<small>{html.escape(self.torch_where or self.torch_note)}</small></th>"
            )
        body = []
        for op, i, j in self.rows:
            bg = f"background:{ROW_COLORS[op]};" if ROW_COLORS[op] else ""
            tds = [
                f'<td style="{num}">{"" if i is None else self.course_numbers[i]}</td>',
                f'<td style="{bg}{cell}">{"" if i is None else ours[i]}</td>',
            ]
            if two:
                tds += [
                    f'<td style="{num}">{"" if j is None else self.torch_numbers[j]}</td>',
                    f'<td style="{bg}{cell}">{"" if j is None else theirs[j]}</td>',
                ]
            body.append(f'<tr class="course-source-{op}">' + "".join(tds) + "</tr>")
        if two and not self.torch_lines:
            body.append(
                f'<tr><td></td><td></td><td></td><td style="{cell}"><i>'
                f"{html.escape(self.torch_note)}</i></td></tr>"
            )
        legend = (
            (
                "<div><small>yellow: changed on both sides; green: only the course; "
                "red: only torch</small></div>"
            )
            if two
            else ""
        )
        return (
            f"<style>{CSS}</style>"
            f'<div class="course-source" style="max-height:70vh;overflow:auto">{legend}'
            f'<table style="border-collapse:collapse;font-size:12px">'
            f"<tr>{head}</tr>{''.join(body)}</table></div>"
        )


def line_up(ours: list[str], theirs: list[str]) -> list[tuple[str, int | None, int | None]]:
    """Line up two sources with difflib, comparing lines without their indentation."""
    if not theirs:
        return [("equal", i, None) for i in range(len(ours))]
    matcher = difflib.SequenceMatcher(
        None, [s.strip() for s in ours], [s.strip() for s in theirs], autojunk=False
    )
    rows = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows += [(op, i, j) for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i = i1 + k if i1 + k < i2 else None
            j = j1 + k if j1 + k < j2 else None
            rows.append(
                (
                    "replace" if i is not None and j is not None else "delete" if i is not None else "insert",
                    i,
                    j,
                )
            )
    return rows


def show_source(course_obj, torch_obj=None, docstrings: bool = True) -> SourcePair:
    """The source of ``course_obj`` (a function, class or module) beside ``torch_obj``'s.

    Args:
        course_obj: the course's object, e.g. ``course.autograd_graph.GradientEdge``.
        torch_obj: torch's counterpart (``torch.autograd.graph.GradientEdge``), or None to
            show the course's source alone.
        docstrings: False leaves every docstring out on both sides, so the code is
            compared with the code (line numbers stay those of the whole source).

    Returns:
        A :class:`SourcePair`: the last expression of a cell shows it as HTML in JupyterLab;
        ``print`` gives the text form.

    Raises:
        TypeError: ``course_obj`` has no Python source (it must be the course's own code).

    Example:
        >>> import torch.autograd.graph as tg
        >>> import course.autograd_graph as cg
        >>> code = show_source(cg.get_gradient_edge, tg.get_gradient_edge, docstrings=False)
        >>> any("Returns:" in line for line in code.course_lines)   # the docstring's
        False
        >>> code.course_lines[1].strip()
        'if not tensor.requires_grad:'
    """
    ours, course_where, note = source_of(course_obj)
    if note:
        raise TypeError(f"show_source shows the course's Python code; {note}")
    theirs, torch_where, torch_note = source_of(torch_obj) if torch_obj is not None else ([], "", "")
    keep_ours, keep_theirs = range(len(ours)), range(len(theirs))
    if not docstrings:
        keep_ours, keep_theirs = _without_docstrings(ours), _without_docstrings(theirs) if theirs else []
    ours, theirs = [ours[i] for i in keep_ours], [theirs[j] for j in keep_theirs]
    return SourcePair(
        _name(course_obj),
        _name(torch_obj) if torch_obj is not None else "",
        tuple(ours),
        tuple(theirs),
        course_where,
        torch_where,
        torch_note,
        tuple(line_up(ours, theirs)),
        tuple(i + 1 for i in keep_ours),
        tuple(j + 1 for j in keep_theirs),
    )
