"""Is every sentence of course/ in our own words, not copied from torch?

The course mirrors torch's names and signatures on purpose; its sentences must be its own.
We read every ``course/**/*.py`` with ``tokenize`` (comments) and ``ast`` (docstrings and
every other string literal: error messages, printed text) and look for each line, and
each sentence, longer than 40 characters in the text of torch's three files the course
mirrors most closely (``torch/autograd/graph.py`` and AOTAutograd's ``descriptors.py`` and
``fx_utils.py``), whitespace normalised on both sides.

Two kinds of text are not counted:

- code: a line that parses as Python once a doctest prompt is removed (``>>> a =
  torch.ones(5, requires_grad=True)``, a repr such as ``TangentAOTInput(output=...)``).
  Calls, signatures and reprs are meant to be torch's;
- the conformance messages in ``CONFORMANCE`` below: error messages that tests or lessons
  compare with torch's, word for word. Each entry says why, and must still be used (and
  still be torch's text), so the list cannot quietly outgrow its reasons.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
import torch

from course.house.rules import offence

PACKAGE = Path(__file__).resolve().parents[1] / "course"
TORCH = Path(torch.__file__).resolve().parent
TORCH_FILES = [
    TORCH / "autograd" / "graph.py",
    TORCH / "_functorch" / "_aot_autograd" / "descriptors.py",
    TORCH / "_functorch" / "_aot_autograd" / "fx_utils.py",
    TORCH / "utils" / "checkpoint.py",
]
MIN_CHARS = 40

# (file under course/, start of the message) -> why it must stay torch's text.
CONFORMANCE = {
    ("aot/fx_utils.py", "Subclasses are currently not supported by this function"): (
        "the RuntimeError of the nine get_* functions on a subclass graph; tests/test_fx_utils.py "
        "compares it with torch's and lesson 07 prints both"
    ),
    ("autograd/graph.py", "It is not possible to get the gradient edge"): (
        "get_gradient_edge's RuntimeError for a tensor without grad; tests/test_graph.py "
        "compares error type and message with torch's"
    ),
    ("autograd/mutation.py", "Trying to backward outside of the 'allow_mutation_on_saved_tensors'"): (
        "allow_mutation_on_saved_tensors' AssertionError (typo 'contextin' included); "
        "tests/test_mutation.py and lesson 05's stored output show torch's text"
    ),
    ("autograd/mutation.py", "allow_mutation_on_saved_tensors contexts cannot be nested"): (
        "the RuntimeError for a nested context; tests/test_mutation.py and lesson 05 compare it with torch's"
    ),
}


def normalise(text: str) -> str:
    return " ".join(text.split())


def chunks(source: str):
    """(line, text) for each block of consecutive comment lines and each string literal.

    An f-string gives its literal parts, one per line (what it adds at run time is not
    text we wrote).
    """
    block: list[str] = []
    start = last = None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        line = tok.start[0]
        if block and line == last + 1:
            block.append(tok.string.lstrip("#"))
        else:
            if block:
                yield start, "\n".join(block)
            block, start = [tok.string.lstrip("#")], line
        last = line
    if block:
        yield start, "\n".join(block)
    nodes = list(ast.walk(ast.parse(source)))
    f_string_parts = {id(v) for node in nodes if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in f_string_parts:  # read with its f-string, below
                yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
            yield node.lineno, "\n".join(parts)


def is_code(line: str) -> bool:
    """Does the line (doctest prompt removed) parse as Python, or hold no word at all?"""
    text = re.sub(r"^(>>>|\.\.\.)(\s|$)", "", line.strip()).strip()
    if not re.search(r"[A-Za-z]", text):
        return True
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def units(text: str):
    """Each line of a chunk, then each sentence of its prose (code lines left out)."""
    lines = text.splitlines()
    yield from lines
    prose = normalise(" ".join(line for line in lines if not is_code(line)))
    yield from re.split(r"(?<=[.;:!?])\s+", prose)


def torch_text() -> str:
    return "\n".join(normalise(text) for path in TORCH_FILES for _, text in chunks(path.read_text()))


def copied(source: str, torch_words: str):
    """(line, text, whole chunk) of each line or sentence of ``source`` found in ``torch_words``."""
    for line, text in chunks(source):
        for unit in units(text):
            unit = normalise(unit)
            if len(unit) > MIN_CHARS and not is_code(unit) and unit in torch_words:
                yield line, unit, normalise(text)


def exempt(relpath: str, chunk: str) -> bool:
    return any(relpath == path and chunk.startswith(start) for path, start in CONFORMANCE)


def torch_sentences_in(relpath: str, source: str, torch_words: str) -> list[str]:
    """One house-rule offence for each line or sentence of course/``relpath`` (its text
    ``source``) that is torch's, word for word, conformance messages aside."""
    hits = sorted(
        {(line, unit) for line, unit, chunk in copied(source, torch_words) if not exempt(relpath, chunk)}
    )
    return [
        offence("own-words", f"course/{relpath}:{line}", f"torch's sentence {unit!r}") for line, unit in hits
    ]


@pytest.fixture(scope="module")
def torch_words() -> str:
    return torch_text()


def test_torch_files_are_there(torch_words):
    """Does the check read torch's three files (and so could it find anything at all)?"""
    assert all(path.is_file() for path in TORCH_FILES)
    assert "Describes where an input from an AOTAutograd produced FX graph comes from" in torch_words


def test_a_copied_docstring_comment_or_message_is_found(torch_words):
    """Would a torch sentence pasted into a docstring, a comment or a message be caught?"""
    source = '''
class ForwardTokenAOTInput:
    """The world token which is threaded through side-effectful operations"""

# The world token output for side-effectful calls, returned so we cannot DCE it, forward only
def f(x):
    raise RuntimeError(f"bad {x}: It is not possible to get the gradient edge for a Tensor that "
                       "does not require gradients")
'''
    found = [unit for _, unit, _ in copied(source, torch_words)]
    assert "The world token which is threaded through side-effectful operations" in found
    assert any(unit.startswith("The world token output for side-effectful calls") for unit in found)
    assert any("gradient edge for a Tensor" in unit for unit in found)


def test_code_and_short_lines_are_not_counted(torch_words):
    """Doctest code, reprs and short phrases may coincide with torch's: they are not sentences."""
    source = '''
def f():
    """Example.

    >>> a = torch.rand(2, 3, requires_grad=True)
    TangentAOTInput(output=PlainAOTOutput(idx=1))
    """
    raise NotImplementedError("Subclasses must implement expr()")
'''
    assert list(copied(source, torch_words)) == []


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_sentence_of_torch_in_course(path, torch_words):
    """No docstring, comment or message line of this module copies torch's text (conformance aside)?"""
    offences = torch_sentences_in(path.relative_to(PACKAGE).as_posix(), path.read_text(), torch_words)
    assert offences == [], "\n".join(offences)


@pytest.mark.parametrize("key", sorted(CONFORMANCE), ids=lambda k: f"{k[0]}:{k[1][:30]}")
def test_each_conformance_exemption_is_used_and_is_torch_text(key, torch_words):
    """Is every exempted message still in course/ and still torch's text (no stale allowance)?"""
    relpath, start = key
    chunks_there = [normalise(text) for _, text in chunks((PACKAGE / relpath).read_text())]
    assert any(chunk.startswith(start) for chunk in chunks_there), f"{relpath} no longer says {start!r}"
    assert start in torch_words
