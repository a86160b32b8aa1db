"""Every lesson's reference solutions, copied from its solution notebook by ``course assign``.

- :mod:`course.checks.solutions.lessonNN`: lesson NN's solutions and the imports they read,
  generated from ``solutions/NN_slug.ipynb`` (:mod:`course.house.solutions` says how).

Nothing here is written by hand: the notebook is each solution's one source, and
``course assign --check`` fails when a module here is not what its notebook makes.
"""

__all__: list[str] = []
