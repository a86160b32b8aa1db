"""Reading what a learner controls, and writing it back out where it cannot do harm.

Everything the grader reads from a learner (a notebook, an outcome file, a CI report) is a
file the learner could have made a FIFO, a symlink to ``/dev/zero`` or a classmate's notebook,
or a 1 GiB document. Everything the grader writes that came from learner code (an error
message, a name, a note) is text the learner chose, and it lands in a terminal, an XML file,
a spreadsheet or a web page. This module owns both directions::

    >>> clean_text("ok\\x1b[32m passed\\x1b[0m\\x00")        # OK: no escape reaches a terminal
    'ok passed'
    >>> clean_text("x" * 50, limit=10)
    'xxxxxxxxx…'
    >>> csv_cell("=HYPERLINK(\\"http://evil\\")")         # OK: a spreadsheet shows it as text
    '\\'=HYPERLINK("http://evil")'
    >>> csv_cell("-3"), csv_cell("ada")
    ('-3', 'ada')

``read_regular`` opens without following a symlink, refuses anything but a regular file
(FIFO, device, folder) before reading a byte, and refuses a file over its size cap::

    read_regular(Path("00_warmup.ipynb"), limit=64 << 20)   # OK: bytes
    read_regular(Path("link-to-classmate.ipynb"))          # BAD: Untrusted("a symbolic link ...")
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

__all__ = ["NOTEBOOK_LIMIT", "TEXT_LIMIT", "Untrusted", "clean_text", "csv_cell", "read_regular"]

NOTEBOOK_LIMIT = 64 << 20  # bytes: a notebook (outputs included) larger than this is not graded
TEXT_LIMIT = 2000  # characters: a message from learner code, as kept in a report

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")  # CSI sequences, then two-byte escapes
# C0 controls except tab and newline, DEL, C1 controls, and the XML-invalid surrogates / non-characters
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


class Untrusted(Exception):
    """A learner's file the grader refuses to read (the message says why, in our words)."""


def read_regular(path: Path, limit: int = NOTEBOOK_LIMIT) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes, read without
    following a final symlink and without blocking (a FIFO is refused, not waited on).

    Raises:
        Untrusted: a symlink, not a regular file, or larger than ``limit``.
        OSError: the file cannot be opened or read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if Path(path).is_symlink():
            raise Untrusted("a symbolic link, not a notebook of this folder (not followed)") from None
        raise e
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted("not a regular file (a FIFO, device or folder is never read)")
        if info.st_size > limit:
            raise Untrusted(f"{info.st_size} bytes, over the {limit} byte limit")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > limit:  # it grew while we read
                raise Untrusted(f"over the {limit} byte limit")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def clean_text(text: object, limit: int = TEXT_LIMIT) -> str:
    """``text`` as a string safe for a terminal, XML, CSV or HTML body: terminal escapes and
    control characters removed (tabs and newlines kept), at most ``limit`` characters."""
    s = _CONTROL.sub("", _ANSI.sub("", str(text)))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def csv_cell(value: object) -> str:
    """A cell a spreadsheet shows as text: a leading ``= + - @`` (a formula) is quoted with
    ``'``, except for a plain number."""
    s = clean_text(value, limit=TEXT_LIMIT).replace("\n", " ")
    if s[:1] in ("=", "+", "-", "@", "\t", "\r") and not re.fullmatch(r"[+-]?\d+(\.\d+)?", s):
        return "'" + s
    return s
