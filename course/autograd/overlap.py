"""Do two strided views of one storage share an element? Decided from sizes and strides.

:func:`overlaps` is what :mod:`course.autograd.mutation` asks before it clones a saved tensor
that an in-place op is about to overwrite: the write reaches the saved tensor only if the two
views share memory. torch 2.13 answers by comparing the address of each view's first element,
which misses an offset view (``b[1]`` written after ``b`` was saved); listing every element's
offset is exact but costs one integer per element. This module is the course's own code: an
exact test on the views' layouts (the problem numpy's ``np.shares_memory`` solves), with the
element-wise listing kept as the reference the tests compare against.

Example:
    >>> import torch
    >>> b = torch.zeros(4, 6)
    >>> overlaps(b[:, ::2], b[:, 1::2]), overlaps(b, b.t()), overlaps(b[1], b[:, 2])
    (False, True, True)
"""

from __future__ import annotations

import math

import torch

__all__ = ["lattice_overlap", "offsets", "overlaps", "overlaps_elementwise"]


# NOTE [Do two strided views share an element?]
#
# A strided view t covers the storage offsets  o + i_1*s_1 + ... + i_k*s_k  (0 <= i_d < n_d).
# Views a and b of one storage share an element iff, for some indices,
#
#     o_a + sum(a_d * x_d)  ==  o_b + sum(b_e * y_e)          0 <= x_d < n_d,  0 <= y_e < m_e
#
# Count b's indices from the far end (y_e = m_e - 1 - z_e) and every coefficient is >= 0:
#
#     sum(a_d * x_d) + sum(b_e * z_e)  ==  o_b - o_a + sum(b_e * (m_e - 1))
#
# one equation  sum(c * z) == T  in bounded integers 0 <= z <= u (numpy's np.shares_memory
# decides the same one). _solve answers it with four rules, cheapest first:
#
#   1. merge terms with equal c, drop c == 0 (expand's stride 0) and u == 0 (size-1 dims);
#   2. no when T is outside [0, sum(c * u)] or gcd(c) does not divide T:
#          b[:, ::2] and b[:, 1::2]: every c is even, T is odd               # no
#   3. yes when the terms, smallest c first, tile every multiple of the first c up to
#      sum(c * u) (each c a multiple of the first, none beyond what the smaller ones reach):
#          b and b.t(); b[:, ::2] and b[:, 2]                                 # yes
#   4. otherwise take the term with the fewest feasible z, try each, and solve the rest
#      (two terms: exactly, by Euclid). When the largest c exceeds all the others can add
#      (rows of a row-major tensor against its columns), one z fits: one try per level.
#
# Different element sizes (a float32 view and an int16 view of one buffer) count bytes: an
# element of k bytes is one more term (1, k - 1). Rule 4 has a budget; when it runs out, a
# small pair falls back to listing offsets (overlaps_elementwise), a large one is cloned.

_BUDGET = 4096  # tries for rule 4: layouts that slicing and striding make need a handful
_SMALL = 1 << 16  # elements (both views together) that the element-wise test may list


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do two tensors on the same storage share a byte? Exact, except a huge undecided pair."""
    if a.numel() == 0 or b.numel() == 0:
        return a.data_ptr() == b.data_ptr()  # torch's rule, kept for empty tensors
    decided = lattice_overlap(a, b)
    if decided is not None:
        return decided
    if a.numel() + b.numel() <= _SMALL:
        return overlaps_elementwise(a, b)
    return True  # cannot tell cheaply: a spare clone costs memory, never a wrong gradient


def lattice_overlap(a: torch.Tensor, b: torch.Tensor, budget: int = _BUDGET) -> bool | None:
    """The NOTE's test from sizes, strides and offsets; None when its budget runs out."""
    by_bytes = a.element_size() != b.element_size()
    (oa, ta), (ob, tb) = _terms(a, by_bytes), _terms(b, by_bytes)
    target = ob - oa + sum(c * u for c, u in tb)  # b's indices counted from the far end
    return _solve(ta + tb, target, [budget])


def _terms(t: torch.Tensor, by_bytes: bool) -> tuple[int, list[tuple[int, int]]]:
    """``t``'s first offset and its (coefficient, bound) terms, in elements or in bytes."""
    k = t.element_size() if by_bytes else 1
    terms = [(s * k, n - 1) for n, s in zip(t.shape, t.stride())]
    if k > 1:
        terms.append((1, k - 1))  # the bytes inside one element
    return t.storage_offset() * k, terms


def _solve(terms: list[tuple[int, int]], target: int, budget: list[int]) -> bool | None:
    """Is ``target == sum(c * z)`` for some ``0 <= z <= u``, ``(c, u)`` in ``terms``?

    None when ``budget[0]`` tries of rule 4 ran out before an answer.

    Example:
        >>> _solve([(6, 3), (2, 2)], 13, [10]), _solve([(6, 3), (2, 2)], 16, [10])
        (False, True)
    """
    merged: dict[int, int] = {}  # rule 1
    for c, u in terms:
        if c > 0 and u > 0:
            merged[c] = merged.get(c, 0) + u
    terms = sorted(merged.items())
    top = sum(c * u for c, u in terms)
    if not terms or not 0 <= target <= top:
        return target == 0  # rule 2 (range)
    if target % math.gcd(*(c for c, _ in terms)):
        return False  # rule 2 (gcd)
    first, reach = terms[0][0], 0  # rule 3: terms so far give every multiple of first <= reach
    for c, u in terms:
        if c % first or c > reach + first:
            break
        reach += c * u
    else:
        return True
    if len(terms) == 2:
        return _solve_two(*terms, target)
    # rule 4: branch on the term with the fewest feasible values
    choices = []
    for i, (c, u) in enumerate(terms):
        others = top - c * u
        choices.append((min(u, target // c) - max(0, -(-(target - others) // c)), i))
    _, i = min(choices)
    (c, u), rest = terms[i], terms[:i] + terms[i + 1 :]
    undecided = False
    for z in range(max(0, -(-(target - top + c * u) // c)), min(u, target // c) + 1):
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        found = _solve(rest, target - c * z, budget)
        if found:
            return True
        undecided |= found is None
    return None if undecided else False


def _solve_two(first: tuple[int, int], second: tuple[int, int], target: int) -> bool:
    """``a*x + b*y == target`` with ``0 <= x <= u``, ``0 <= y <= v``, exactly (Euclid)."""
    (a, u), (b, v) = first, second
    g, p, q = _euclid(a, b)  # a*p + b*q == g, and g divides target (rule 2)
    x0, y0 = p * (target // g), q * (target // g)
    da, db = b // g, a // g  # every solution: x = x0 + k*da, y = y0 - k*db
    k_lo = max(-(x0 // da), -((v - y0) // db))  # x >= 0 and y <= v
    k_hi = min((u - x0) // da, y0 // db)  # x <= u and y >= 0
    return k_lo <= k_hi


def _euclid(a: int, b: int) -> tuple[int, int, int]:
    """``(g, p, q)`` with ``g = gcd(a, b) = a*p + b*q`` (the extended Euclidean algorithm)."""
    p0, q0, p1, q1 = 1, 0, 0, 1
    while b:
        quotient, (a, b) = a // b, (b, a % b)
        p0, q0, p1, q1 = p1, q1, p0 - quotient * p1, q0 - quotient * q1
    return a, p0, q0


def overlaps_elementwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The reference answer: list every offset of both (bytes if element sizes differ), compare."""
    if a.element_size() == b.element_size():
        return bool(torch.isin(offsets(a), offsets(b)).any())
    return bool(torch.isin(byte_offsets(a), byte_offsets(b)).any())


def offsets(t: torch.Tensor) -> torch.Tensor:
    """The storage offset of every element of ``t``, flat: O(numel) work, no storage-size."""
    off = torch.tensor([t.storage_offset()])
    for n, s in zip(t.shape, t.stride()):
        off = (off[:, None] + torch.arange(n) * s).reshape(-1)
    return off


def byte_offsets(t: torch.Tensor) -> torch.Tensor:
    k = t.element_size()
    return (offsets(t)[:, None] * k + torch.arange(k)).reshape(-1)
