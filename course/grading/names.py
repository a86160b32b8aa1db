"""Which file is which: lesson notebooks and the copies ``course update`` offers. Torch-free,
so ``course progress``, ``course gradebook`` and ``course grade --help`` stay fast.

::

    lesson_number("03_saved_tensors.ipynb")          # 3
    lesson_number("updated-03_saved_tensors.ipynb")  # None: an offered copy is not graded
    lesson_number("03_x.updated_notes.ipynb")        # 3: a learner's own name, graded
    is_offered_copy("updated-2-03_saved_tensors.ipynb")  # True (and the old 03_saved_tensors.updated.ipynb)
    is_course_lesson("03_saved_tensors.ipynb")       # True: a name the course gives a lesson
    graded_first(["03_saved_tensors-Copy1.ipynb", "03_saved_tensors.ipynb"], "03_saved_tensors.ipynb")
    # ['03_saved_tensors.ipynb', '03_saved_tensors-Copy1.ipynb']: the lesson's own name is graded

Every command asks these (``course grade``, ``course gradebook``, ``course start`` /
``update`` / ``progress``), so they cannot disagree about a file:

    # OK:  updated-03_saved_tensors.ipynb      offered copy, skipped by grade and gradebook
    # OK:  03_saved_tensors.updated.ipynb      the same, as older versions named it
    # OK:  03_x.updated_notes.ipynb            lesson 3 for grade and gradebook alike
    # BAD: ".updated" in name                  (the old gradebook test: skipped the file above)
    # OK:  03_saved_tensors-Copy1.ipynb        JupyterLab's "Duplicate": lesson 3, graded only
    #                                          when the folder holds no 03_saved_tensors.ipynb
"""

from __future__ import annotations

import re

__all__ = [
    "COURSE_LESSON",
    "OFFERED_COPY",
    "graded_first",
    "is_course_lesson",
    "is_offered_copy",
    "lesson_number",
    "offered_name",
]

COURSE_LESSON = re.compile(r"^(?P<number>\d\d)_(?P<slug>[^.]+)\.ipynb$")  # the names the course gives
# What `course update` writes beside an edited lesson: the difference at the front, so that
# JupyterLab's file browser, which cuts long names at the end, tells the two apart
# (updated-03_saved_tensors.ipynb, updated-2-03_...); the old spelling is still recognised.
OFFERED_COPY = re.compile(r"^(?:updated(?:-\d+)?-(?P<stem>.+)|(?P<old_stem>.+)\.updated(?:-\d+)?)\.ipynb$")
_LEARNER_LESSON = re.compile(r"^(?P<number>\d\d)_.*\.ipynb$")
_LAB_COPY = re.compile(r"-Copy\d+\.ipynb$")  # JupyterLab's File > Duplicate: 00_warmup-Copy1.ipynb


def is_course_lesson(name: str) -> bool:
    """A lesson notebook as the course names it (``NN_slug.ipynb``, no other dot).

    Example:
        >>> is_course_lesson("03_saved_tensors.ipynb"), is_course_lesson("03_saved_tensors.updated.ipynb")
        (True, False)
    """
    return bool(COURSE_LESSON.match(name))


def is_offered_copy(name: str) -> bool:
    """A copy ``course update`` offered beside an edited lesson (``updated[-N]-STEM.ipynb``, or
    ``STEM.updated[-N].ipynb`` as older versions wrote it).

    Example:
        >>> is_offered_copy("updated-2-03_saved_tensors.ipynb"), is_offered_copy("03_saved_tensors.updated.ipynb")
        (True, True)
        >>> is_offered_copy("03_x.updated_notes.ipynb")
        False
    """
    return bool(OFFERED_COPY.match(name))


def lesson_number(name: str) -> int | None:
    """The lesson a learner's notebook is, by its name (``NN_anything.ipynb``); None for a
    hidden file, an offered copy or any other name.

    Example:
        >>> lesson_number("03_x.updated_notes.ipynb"), lesson_number(".03_x.ipynb"), lesson_number("notes.ipynb")
        (3, None, None)
    """
    m = _LEARNER_LESSON.match(name)
    return int(m.group("number")) if m and not is_offered_copy(name) else None


def offered_name(stem: str, n: int = 1) -> str:
    """The name of the ``n``-th copy offered beside the lesson ``stem`` (the first has no number).

    Example:
        >>> offered_name("03_saved_tensors"), offered_name("03_saved_tensors", 2)
        ('updated-03_saved_tensors.ipynb', 'updated-2-03_saved_tensors.ipynb')
    """
    return f"updated{'' if n == 1 else f'-{n}'}-{stem}.ipynb"


def graded_first(names: list[str], lesson_notebook: str) -> list[str]:
    """Several notebooks of one lesson, the one to grade first: the lesson's own name
    (``lesson_notebook``), then names that are not JupyterLab's duplicates (``-Copy1``), then
    by name. The rest are listed as ignored, never a reason to refuse the folder.

    Example:
        >>> graded_first(["00_warmup-Copy1.ipynb", "00_warmup.ipynb"], "00_warmup.ipynb")
        ['00_warmup.ipynb', '00_warmup-Copy1.ipynb']
        >>> graded_first(["00_mine-Copy1.ipynb", "00_mine.ipynb", "00_a.ipynb"], "00_warmup.ipynb")
        ['00_a.ipynb', '00_mine.ipynb', '00_mine-Copy1.ipynb']
    """
    return sorted(names, key=lambda n: (n != lesson_notebook, bool(_LAB_COPY.search(n)), n))
