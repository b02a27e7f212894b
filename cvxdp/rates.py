"""The paper's rates, as functions a user can plot or plan a study with.

Theorem 3.1 (upper bound, with probability ≥ 1 − δ)::

    F(ŵ) − F* ≤ c₃ G_k D (d log(1/δ) / (nε))^{1−1/k} + c₄ G₂ D sqrt(log(1/δ)/n)

Theorem 4.1 (lower bound: with probability ≥ δ, for every ε-DP algorithm, on
some distribution)::

    F(A(Z)) − F* ≥ c D min{ G₂,  G₂ sqrt(log(1/δ)/n) + G_k ((d + log(1/δ)) / (nε))^{1−1/k} }

The constants ``c, c₃, c₄`` are absolute but unspecified; these functions take
them as arguments (default 1), so the *shapes* — the exponent ``1 − 1/k`` in
``n ε`` and the ``1/sqrt(n)`` statistical term — are exact while the levels are
orders of magnitude.  :func:`samples_needed` inverts the upper bound.
"""

from __future__ import annotations

import math

from cvxdp._validation import at_least, positive_finite, probability


def _check(n: float, d: float, epsilon: float, k: float, G_k: float, G_2: float, D: float) -> None:
    positive_finite("n", n)
    positive_finite("d", d)
    positive_finite("epsilon", epsilon)
    at_least("k", k, 2.0)
    positive_finite("G_k", G_k)
    positive_finite("G_2", G_2)
    positive_finite("D", D)


def optimal_rate(n: float, d: float, epsilon: float, k: float, G_k: float, G_2: float, D: float) -> float:
    """``G_k D (d/(nε))^{1−1/k} + G₂ D/sqrt(n)`` — the rate without logarithms."""
    _check(n, d, epsilon, k, G_k, G_2, D)
    return G_k * D * (d / (n * epsilon)) ** (1.0 - 1.0 / k) + G_2 * D / math.sqrt(n)


def upper_bound(n: float, d: float, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                delta: float = 0.1, c3: float = 1.0, c4: float = 1.0) -> float:
    """Theorem 3.1's high-probability excess-risk bound (constants ``c₃, c₄``)."""
    _check(n, d, epsilon, k, G_k, G_2, D)
    L = math.log(1.0 / probability("delta", delta))
    return (c3 * G_k * D * (d * L / (n * epsilon)) ** (1.0 - 1.0 / k)
            + c4 * G_2 * D * math.sqrt(L / n))


def lower_bound(n: float, d: float, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                delta: float = 0.1, c: float = 1.0) -> float:
    """Theorem 4.1's high-probability lower bound (constant ``c``)."""
    _check(n, d, epsilon, k, G_k, G_2, D)
    L = math.log(1.0 / probability("delta", delta))
    inner = G_2 * math.sqrt(L / n) + G_k * ((d + L) / (n * epsilon)) ** (1.0 - 1.0 / k)
    return c * D * min(G_2, inner)


def clipped_output_perturbation_rate(n: float, d: float, epsilon: float, G_k: float, D: float) -> float:
    """``G D sqrt(d/(nε))``: the private term of one-shot clipped output perturbation at ``C ≈ G``.

    With regularization λ, noise ``C d/(λnε)`` against bias ``λD²`` balances at
    ``D sqrt(C d/(nε)) · sqrt(C)`` — the *square root* of the private term, for
    comparison with the ``(d/(nε))^{1−1/k}`` of the optimal rate.
    """
    return G_k * D * math.sqrt(d / (n * epsilon))


def samples_needed(target: float, d: float, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                   delta: float = 0.1, c3: float = 1.0, c4: float = 1.0) -> int:
    """The smallest ``n`` whose Theorem 3.1 bound is at most ``target``.

    Example: how many examples for excess risk 0.01 at ε = 1, d = 10, k = 4,
    ``G_k = 5``, ``G_2 = 3``, ``D = 2``?  ``samples_needed(0.01, 10, 1, 4, 5, 3, 2)``.
    """
    target = positive_finite("target", target)
    lo, hi = 1.0, 2.0
    while upper_bound(hi, d, epsilon, k, G_k, G_2, D, delta, c3, c4) > target:
        hi *= 2.0
        if hi > 1e30:
            raise OverflowError("the target is unreachable with fewer than 1e30 examples")
    while hi - lo > 0.5:
        mid = math.sqrt(lo * hi) if hi / lo > 2 else (lo + hi) / 2.0
        if upper_bound(mid, d, epsilon, k, G_k, G_2, D, delta, c3, c4) > target:
            lo = mid
        else:
            hi = mid
    return math.ceil(hi)


__all__ = ["clipped_output_perturbation_rate", "lower_bound", "optimal_rate", "samples_needed",
           "upper_bound"]
