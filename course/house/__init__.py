"""The house rules a lesson author keeps, and the finders that enforce them.

- :mod:`course.house.rules`: each rule's name, the test that enforces it and its fix, and
  :func:`~course.house.rules.offence`, how every failure reads;
- :mod:`course.house.notebooks`: the finders that read lesson notebooks;
- :mod:`course.house.sources`: the finders that read registrations, docstrings and generated docs;
- :mod:`course.house.assign`: ``course assign``, the learner copies in ``notebooks/`` made from ``solutions/``;
- :mod:`course.house.solutions`: the reference solutions the checks import, copied from the same notebooks.

``docs/authoring.md`` ("Adding a lesson, end to end") walks through the rules in order;
``tests/test_house_rules.py`` breaks each one on purpose and reads its message.
"""

__all__: list[str] = []
