"""Do the runnable examples in every course module's docstrings still run?

The docstrings teach with examples (Args / Returns / Raises and an example each); this test
keeps them honest. Modules that need a GPU or a browser skip their own examples.
"""

import doctest
import importlib
import pkgutil
import re

import pytest

import course
from course.house.sources import too_few_examples

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(course.__path__, prefix="course.")
    if not m.name.endswith("__main__")
)


#: Modules whose docstrings must keep at least this many examples (the reference
#: implementation teaches through them; an example deleted by accident fails here).
MIN_EXAMPLES = {
    "course.autograd.graph": 11,
    "course.autograd.hooks": 11,
    "course.autograd.saved_tensors": 3,
    "course.autograd.mutation": 3,
    "course.autograd_graph": 1,
    "course.aot.descriptors": 1,
    "course.aot.fx_utils": 1,
    "course.aot.printing": 1,
    "course.autograd.checkpoint": 20,
    "course.autograd.selective": 11,
    "course.autograd.checkpoint_state": 8,
    "course.autograd.checkpoint_debug": 8,
    "course.checkpoint": 6,
    "course.autograd.version_check": 20,
    "course.autograd.callbacks": 14,
}


@pytest.mark.parametrize("name", MODULES)
def test_module_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
    offences = too_few_examples(name, result.attempted, MIN_EXAMPLES.get(name, 0))
    assert offences == [], "\n".join(offences)


def _unit(name: str) -> str:
    """A lesson's answer keys count once, its package of exercise modules as the one module it was."""
    return re.sub(r"^(course\.checks\.lesson\d\d)\..*", r"\1", name)


def test_most_modules_carry_examples():
    finder = doctest.DocTestFinder()
    units = {_unit(n) for n in MODULES}
    with_examples = {
        _unit(n) for n in MODULES if any(t.examples for t in finder.find(importlib.import_module(n)))
    }
    assert len(with_examples) >= len(units) // 2, f"only {sorted(with_examples)} have examples"
