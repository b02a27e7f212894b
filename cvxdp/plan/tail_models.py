"""Models of the per-example Lipschitz constants ``A(z)``: what the planner may assume about the tail.

The extension's bias ``(1/m) Σ (A(z_i) − C)₊`` sets the localization radii and the choice of ``C``;
it never sets the noise.  A *tail model* bounds that bias at level ``β`` from public knowledge
(:class:`MomentTail`: only ``E A^k ≤ G_k^k``), or estimates it from a private release
(:class:`~cvxdp.privacy.tail.TailProfile`, the ε-DP histogram, which values each example at its bin's
lower edge and drops bins below the noise: an estimate, not a bound) combined with the public worst case
(:class:`CombinedTail`).  Every model is a function of public inputs and charged releases only.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Protocol

import numpy as np

from cvxdp.privacy.tail import MomentCache, TailProfile


class TailModel(Protocol):
    """What a profile reads from a tail model: a level-``β`` bias bound and a scale for its ``C`` grid."""

    def bias_bound(self, C: np.ndarray, m, beta) -> np.ndarray: ...

    def scale(self) -> float: ...


def extension_bias_mean(C: float | np.ndarray, k: float, G_k: float) -> float | np.ndarray:
    """``sup E(A − C)₊`` over all distributions with ``E A^k ≤ G_k^k`` (``A ≥ 0``).

    The extremal law has two atoms, 0 and ``a`` with probability ``min(1, G^k/a^k)``;
    maximizing ``min(1, G^k/a^k)(a − C)`` over ``a`` gives ``a* = kC/(k−1)`` and
    the value ``G^k (k−1)^{k−1} / (k^k C^{k−1})`` when ``a* ≥ G`` (else
    ``G − C``).  This is ``(1 − 1/k)^k`` times the paper's Markov-integral bound
    ``G^k / ((k−1) C^{k−1})`` — sharper by ``≈ e`` for large ``k``, and exact.
    Vectorized over ``C``.
    """
    Ca = np.asarray(C, dtype=float)
    a = k * Ca / (k - 1.0)
    with np.errstate(divide="ignore"):
        tail = np.exp(k * math.log(G_k) + (k - 1.0) * math.log(k - 1.0) - k * math.log(k)
                      - (k - 1.0) * np.log(Ca))
    out = np.where(a <= G_k, np.maximum(G_k - Ca, 0.0), tail)
    return float(out) if np.ndim(C) == 0 else out


def extension_bias_second_moment(C: float | np.ndarray, k: float, G_k: float) -> float | np.ndarray:
    """``sup E(A − C)₊²`` under ``E A^k ≤ G_k^k`` (infinite for ``k ≤ 2``).

    Same two-atom argument with ``a** = kC/(k−2)``:
    ``4 G^k (k−2)^{k−2} / (k^k C^{k−2})`` when ``a** ≥ G`` (else ``(G − C)²``).
    """
    Ca = np.asarray(C, dtype=float)
    if k <= 2.0:
        out = np.full(Ca.shape, math.inf)
    else:
        a = k * Ca / (k - 2.0)
        with np.errstate(divide="ignore"):
            tail = 4.0 * np.exp(k * math.log(G_k) + (k - 2.0) * math.log(k - 2.0) - k * math.log(k)
                                - (k - 2.0) * np.log(Ca))
        out = np.where(a <= G_k, np.maximum(G_k - Ca, 0.0) ** 2, tail)
    return float(out) if np.ndim(C) == 0 else out


def empirical_bias_bound(C: float | np.ndarray, k: float, G_k: float, m: int | np.ndarray,
                         beta: float | np.ndarray) -> float | np.ndarray:
    """A bound ``T`` with ``P((1/m) Σ (A_i − C)₊ > T) ≤ β`` for i.i.d. ``A_i`` with ``E A^k ≤ G_k^k``.

    The smaller of Markov (``μ/β``) and Cantelli
    (``μ + σ sqrt((1−β)/(β m))``), ``μ`` and ``σ²`` the sharp moment bounds
    above.  Both are deterministic functions of public inputs, so the smaller
    one is a valid level-``β`` bound.  Affects utility (the radius) only.
    Broadcasts over ``C``, ``m`` and ``β``.
    """
    mu = np.asarray(extension_bias_mean(C, k, G_k))
    var = np.asarray(extension_bias_second_moment(C, k, G_k))
    out = _markov_cantelli(mu, var, m, beta)
    return float(out) if np.ndim(out) == 0 else out


def _markov_cantelli(mu: np.ndarray, var: np.ndarray, m, beta) -> np.ndarray:
    markov = mu / beta
    with np.errstate(invalid="ignore"):
        cantelli = np.where(np.isfinite(var), mu + np.sqrt(var * (1.0 - beta) / (beta * m)), np.inf)
    return np.minimum(markov, cantelli)



class MomentTail:
    """The worst-case tail model: only ``E A^k ≤ G_k^k`` is known (public)."""

    def __init__(self, k: float, G_k: float) -> None:
        self.k, self.G_k = float(k), float(G_k)
        self._moments = MomentCache(lambda C: (np.asarray(extension_bias_mean(C, self.k, self.G_k)),
                                               np.asarray(extension_bias_second_moment(C, self.k, self.G_k))))

    def bias_bound(self, C: np.ndarray, m, beta) -> np.ndarray:
        """:func:`empirical_bias_bound` (broadcasting over ``C``, ``m``, ``β``; curves cached)."""
        mu, var = self._moments(np.asarray(C, dtype=float))
        return _markov_cantelli(mu, var, m, beta)

    def scale(self) -> float:
        return self.G_k


@lru_cache(maxsize=64)
def moment_tail(k: float, G_k: float) -> MomentTail:
    """The :class:`MomentTail` of ``(k, G_k)``, one per pair, so its moment curves are computed once."""
    return MomentTail(k, G_k)


class CombinedTail:
    """The smaller of two bias bounds: the private estimate and the public worst case."""

    def __init__(self, estimate: TailProfile, k: float, G_k: float) -> None:
        self.estimate, self.k, self.G_k = estimate, float(k), float(G_k)
        self._worst = moment_tail(float(k), float(G_k))

    def bias_bound(self, C: np.ndarray, m, beta) -> np.ndarray:
        return np.minimum(self._worst.bias_bound(C, m, beta), self.estimate.bias_bound(C, m, beta))

    def scale(self) -> float:
        return min(self.G_k, self.estimate.scale()) if self.G_k > 0 else self.estimate.scale()


__all__ = ["CombinedTail", "MomentTail", "TailModel", "empirical_bias_bound", "extension_bias_mean",
           "extension_bias_second_moment"]
