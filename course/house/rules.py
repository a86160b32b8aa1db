"""The house rules a lesson author keeps: each rule's name and fix, and how an offence reads.

A lesson meets about ten rules that distant tests enforce (the grader, nbval, ``course
assign --check``, ``python -m course.guide --check``). Each rule is written down once, here,
with the sentence that fixes it; every check that enforces a rule reports an offence with
:func:`offence`, so a failure names the rule, the file (and cell or line) and the fix::

    >>> print(offence("minutes", "solutions/03_saved_tensors.ipynb, cell 1",
    ...               "the opening says 'About 40 minutes', course/lessons.py '45-60 minutes'",
    ...               time_text="45-60 minutes", notebook="solutions/03_saved_tensors.ipynb"))
    solutions/03_saved_tensors.ipynb, cell 1: the opening says 'About 40 minutes',
    course/lessons.py '45-60 minutes' (house rule "minutes consistency"). Fix: write
    "About 45-60 minutes" in the opening cell of solutions/03_saved_tensors.ipynb, or change
    the lesson's minutes in course/lessons.py.

The finders live in :mod:`course.house.notebooks` (what reads the notebooks: which answer is
defined where, which literal gives a prediction away) and :mod:`course.house.sources` (what
reads the registrations, docstrings and generated docs);
``tests/test_house_rules.py`` breaks each rule on purpose and reads the message. The rules,
in the order an author meets them (``docs/authoring.md``, "Adding a lesson, end to end",
walks through them in this order):

    >>> [rule.name for rule in RULES.values()][:3]
    ['a lesson in all its forms', 'top-level definitions only', 'no literal of a prediction in the notebook']

What is ours and what is torch's: all of it is ours (torch has no lessons).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROVENANCE_HEADING", "RULES", "Rule", "offence"]


@dataclass(frozen=True)
class Rule:
    """A house rule: its name, the test that enforces it, and the fix (a sentence, ``{fields}``
    filled in by the offence)."""

    name: str
    enforced_by: str
    fix: str


#: The one heading of the paragraph that says which parts of a module are ours and which are
#: torch's (rule ``provenance``).
PROVENANCE_HEADING = "What is ours and what is torch's:"

RULES: dict[str, Rule] = {
    "lesson-forms": Rule(
        "a lesson in all its forms",
        "tests/test_lessons.py",
        "{fix_what}",
    ),
    "top-level": Rule(
        "top-level definitions only",
        "tests/test_lessons.py",
        "move {name} to the top level of its cell (out of the `{block}` block, or put that block "
        "in a function the cell calls): the grader runs a notebook's top-level imports, defs, "
        "classes and plain assignments only",
    ),
    "prediction-literal": Rule(
        "no literal of a prediction in the notebook",
        "tests/test_lessons.py",
        "compute the answer again in that cell (run the program with torch or the course's public "
        "API), or compare with the learner's own {name} in a cell tagged raises-exception; never "
        "write the answer down",
    ),
    "deterministic": Rule(
        "deterministic outputs",
        "tests/test_lessons.py",
        "print what is the same on every run (`type(t.grad_fn).__name__`, not `t.grad_fn`; a path "
        "relative to the lesson folder), or tag the cell nbval-ignore-output if it must vary, then "
        "run `course assign --execute {lesson}`",
    ),
    "minutes": Rule(
        "minutes consistency",
        "tests/test_lessons.py",
        'write "About {time_text}" in the opening cell of {notebook}, or change the lesson\'s '
        "minutes in course/lessons.py",
    ),
    "written-out": Rule(
        "wrong answers written out",
        "tests/test_checks.py",
        "write {answer} out as a named top-level function (or class) in exercise {id}'s module, "
        "as a learner would write it and named for its mistake; helpers may share the parts it "
        "gets right, but no lambdas and no variant factories",
    ),
    "one-exercise-module": Rule(
        "one exercise per check module",
        "tests/test_lessons.py",
        "give each exercise its own module, {folder}/{module}.py (ex, the id with _ "
        "for the dot, the answer's name in snake case), holding its registration and everything "
        "only it uses; what several exercises use goes in the package's _shared.py",
    ),
    "distinct-wrong": Rule(
        "distinct outcomes per wrong answer",
        "tests/test_catalogue_grade.py",
        "add a case on which {this} and {other} give different results (a hidden case with a "
        "label will do), or drop one of them",
    ),
    "hint": Rule(
        "no solution line in a fallback hint",
        "tests/test_checks.py",
        "rewrite exercise {id}'s hint= as the idea, without the solution's code (a known wrong "
        "answer's hint may name the API the learner missed)",
    ),
    "own-words": Rule(
        "own words",
        "tests/test_own_words.py",
        "say it in our own words; a message that tests compare with torch's word for word goes in "
        "CONFORMANCE in tests/test_own_words.py, with the reason",
    ),
    "doctest-minimum": Rule(
        "doctest minimum",
        "tests/test_doctests.py",
        "restore the examples in {module}'s docstrings, or, if they moved to another module, move "
        "its MIN_EXAMPLES entry in tests/test_doctests.py with them",
    ),
    "provenance": Rule(
        "one provenance heading",
        "tests/test_house_rules.py",
        'head the paragraph "' + PROVENANCE_HEADING + '" and say it once per module; a facade '
        "points to the module it re-exports instead",
    ),
    "no-cycles": Rule(
        "no import cycles",
        "tests/test_structure.py",
        "move what the modules of the cycle share into a module that imports none of them, or "
        "import inside the function that needs it (a function-level import runs later)",
    ),
    "private-names": Rule(
        "no private names across modules",
        "tests/test_structure.py",
        "make {name} public (in __all__, with a docstring) or reach it through a public name (an "
        "exercise's oracle is course.checks.get(id).oracle)",
    ),
    "layering": Rule(
        "layering",
        "tests/test_structure.py",
        "move what {layer} needs from {above} down into {layer} (or below it), and let {above} "
        "import it from there",
    ),
    "package-index": Rule(
        "a package index names every module",
        "tests/test_structure.py",
        "add a line for {module} to the module list in {package}'s docstring "
        "(course/{folder}/__init__.py): what it does, in a phrase",
    ),
    "small-pieces": Rule(
        "modules and functions a reader holds in mind",
        "tests/test_structure.py",
        "split {piece} by concept (a module of its own for each job, or helpers named for each step), "
        "or, where it mirrors a torch module or function as long, name that in MIRRORS "
        "(course/house/sources.py)",
    ),
    "learner-copy": Rule(
        "byte-equal learner copies",
        "tests/test_assign.py",
        "run `course assign {lesson}` (`course assign --execute {lesson}` if the solution's "
        "outputs changed) and commit {notebook}",
    ),
    "solutions-once": Rule(
        "solutions written once",
        "tests/test_assign.py",
        "edit the solution region in solutions/{lesson}_*.ipynb, never the copy, and run "
        "`course assign {lesson}` to copy it into course/checks/solutions/lesson{lesson}.py",
    ),
    "generated-docs": Rule(
        "generated docs current",
        "tests/test_lessons.py",
        "run `python -m course.guide` and commit {path}",
    ),
    "instructor-notes": Rule(
        "instructor notes per lesson",
        "tests/test_instructor_notes.py",
        "run `python -m course.guide`: it writes {path} with the headings {sections} and fills its "
        "<!-- wrong-answers --> block from the checks; then write each section in place of its "
        "placeholder line (docs/instructor-notes/00_warmup.md is a finished page)",
    ),
    "key-cells": Rule(
        "key cells for the slides",
        "tests/test_slides.py",
        "give lesson {lesson}'s Lesson entry in course/lessons.py key_cells=(...): the headings "
        "worth showing a room, in order, each the start of exactly one markdown heading of its "
        "notebook (`course slides {lesson}` shows each with the demonstration after it)",
    ),
}


def offence(key: str, where: str, what: str, **fields: object) -> str:
    """One broken rule, in one line: where, what is wrong, the rule's name and its fix.

    Args:
        key: the rule's key in :data:`RULES`.
        where: the file, and the cell or line where known (``"solutions/03_x.ipynb, cell 4"``).
        what: what is wrong there, in a clause.
        fields: what the rule's fix names (``lesson="03"``, ``notebook=...``).

    Raises:
        KeyError: an unknown rule, or a field its fix needs is missing.

    >>> print(offence("generated-docs", "docs/exercises.md", "it is stale", path="docs/exercises.md"))
    docs/exercises.md: it is stale (house rule "generated docs current"). Fix: run
    `python -m course.guide` and commit docs/exercises.md.
    """
    rule = RULES[key]
    return f'{where}: {what} (house rule "{rule.name}"). Fix: {rule.fix.format(**fields)}.'
