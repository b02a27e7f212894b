"""Private knowledge of the tail: per-example Lipschitz constants, a DP histogram, and ``G_k``.

The heavy-tailed guarantee needs a moment bound ``E A(z)^k ≤ G_k^k`` on the
per-example Lipschitz constants ``A(z) = sup_{w∈W} ||∂f(w, z)||``, and the
localization radii need the extension's bias ``E (A − C)₊``.  Users rarely
know either; reading them off the training data would break privacy.
:func:`private_tail_profile` spends a stated share of ε on a pure-DP histogram
of ``log A(z_i)`` over a public geometric grid and turns it into

* an estimate of ``G_k`` (each value rounded *up* to its bin's edge, so the
  estimate is biased upward by at most ``√2``), and
* an estimate of the bias curve ``C ↦ E(A − C)₊``, used by the tight profile to
  choose ``C`` and the radii.

Privacy: replacing one example moves one count down and one up, so the
histogram has ℓ1 sensitivity 2 and Laplace noise of scale ``2/ε_h`` makes it
``ε_h``-DP; thresholding, renormalizing and everything derived from it are
post-processing.  The charge goes to every example in the ledger.

Small samples: with ``J`` bins of width ``2^{1/b}`` the threshold
``(2/ε_h) log(2(J+2)/β)`` can exceed every count (a few hundred examples at
``ε_h = 0.1``).  The histogram is then *coarsened* — adjacent noisy counts summed
in blocks of 2, 4, 8, … with a threshold valid for a sum of Laplace noises
(:func:`sum_laplace_threshold`) — until the bins that survive hold at least half
of the ``n`` examples (failing that, the level that saw the most is kept, with a
:class:`~cvxdp.error.UtilityWarning` when its bins are wide).  Summing released
noisy counts is post-processing: no extra privacy is spent; a coarser bin only
rounds its values up further.

What the estimate is *not*: a certified upper bound.  Bins whose noisy count
falls below the noise threshold are dropped, so a sparse far tail can be
missed — for ``k`` close to the tail index no finite sample pins ``G_k`` down.
Privacy never depends on it; only the utility of the fit does.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from cvxdp._validation import positive_finite, privacy_epsilon, probability
from cvxdp.error import UncertifiableLossError, UtilityWarning
from cvxdp.extension.certificates import support_upper
from cvxdp.ledger import PrivacyLedger
from cvxdp.localization.profiles import empirical_bias_bound
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.random import NoiseSource
from cvxdp.structure import GenericStructure


def lipschitz_constants(model: Model, examples: Examples) -> np.ndarray:
    """``A(z_i) = sup_{w ∈ W} ||∂f(w, z_i)||`` (an upper bound) for every example.

    Generalized linear losses: ``||a_i|| · Lip(φ_i on the range of <a_i, w> + b_i over W)``;
    piecewise-linear losses: ``max_j ||a_ij||``.  Generic losses have no such
    closed form: pass ``G_k`` yourself.
    """
    if isinstance(model.loss.structure, GenericStructure):
        raise UncertifiableLossError("per-example Lipschitz constants are only available for "
                                     "piecewise-linear and generalized-linear losses; pass G_k.")
    glm = examples.glm()
    if glm is not None:
        a, b, link = glm
        hi = b + support_upper(model.domain, a)
        lo = b - support_upper(model.domain, -a)
        return np.linalg.norm(a, axis=1) * link.lipschitz_on(lo, hi)
    A, _ = examples.pieces()
    return np.linalg.norm(A, axis=2).max(axis=1)


@dataclass
class TailProfile:
    """A private estimate of the law of ``A(z)`` on a geometric grid.

    Attributes
    ----------
    edges:
        Bin edges ``e_0 < e_1 < … < e_J``; bin 0 is ``A ≤ e_0``, bin ``j`` is
        ``(e_{j−1}, e_j]``, and bin ``J + 1`` is ``A > e_J``.
    mass:
        Estimated probability of each bin (non-negative, sums to one).
    epsilon:
        Privacy spent to make it.
    threshold:
        Noisy counts below this many examples were treated as empty.
    block:
        How many fine bins each bin of ``mass`` merges (1 unless the sample was
        too small to see anything at the fine resolution).
    """

    edges: np.ndarray
    mass: np.ndarray
    epsilon: float
    threshold: float
    n: int
    block: int = 1

    def upper_values(self) -> np.ndarray:
        """Each bin's value rounded up: its upper edge (``2 e_J`` for the overflow bin).

        After coarsening into blocks of ``block`` fine bins, a block's value is the
        upper edge of its last fine bin.
        """
        fine = np.concatenate([self.edges, [2.0 * self.edges[-1]]])
        ends = np.minimum(np.arange(self.block - 1, fine.size + self.block - 1, self.block), fine.size - 1)
        return fine[ends]

    def moment(self, k: float) -> float:
        """``(Σ_b mass_b · upper_b^k)^{1/k}``: an upward-rounded estimate of ``G_k``."""
        v = self.upper_values()
        return float((self.mass * v**k).sum() ** (1.0 / k))

    def bias_mean(self, C: np.ndarray) -> np.ndarray:
        """Estimated ``E(A − C)₊`` (each value at its bin's upper edge)."""
        v = self.upper_values()
        C = np.atleast_1d(np.asarray(C, float))
        return (self.mass[None, :] * np.maximum(v[None, :] - C[:, None], 0.0)).sum(axis=1)

    def bias_bound(self, C: np.ndarray, m: int, beta: float) -> np.ndarray:
        """A level-``β`` bound on a batch mean ``(1/m) Σ (A_i − C)₊`` under the estimated law.

        Cantelli with the estimated mean and second moment of ``(A − C)₊``
        (values rounded up to their bins' edges).  Mass in bins that fell below
        the noise threshold is treated as absent — a sparse far tail can be
        missed; this steers ``C`` and the radii (utility), never the noise.
        """
        v = self.upper_values()
        C = np.atleast_1d(np.asarray(C, float))
        excess = np.maximum(v[None, :] - C[:, None], 0.0)
        mu = (self.mass[None, :] * excess).sum(axis=1)
        second = (self.mass[None, :] * excess**2).sum(axis=1)
        return mu + np.sqrt(second * (1.0 - beta) / (beta * m))

    def scale(self) -> float:
        """A typical scale of ``A`` (the estimated second moment's root), for grids of ``C``."""
        return max(self.moment(2.0), float(self.edges[0]))


class CombinedTail:
    """The smaller of two bias bounds: the private estimate and the public worst case."""

    def __init__(self, estimate: TailProfile, k: float, G_k: float) -> None:
        self.estimate, self.k, self.G_k = estimate, float(k), float(G_k)

    def bias_bound(self, C: np.ndarray, m: int, beta: float) -> np.ndarray:
        worst = np.asarray(empirical_bias_bound(C, self.k, self.G_k, m, beta))
        return np.minimum(worst, self.estimate.bias_bound(C, m, beta))

    def scale(self) -> float:
        return min(self.G_k, self.estimate.scale()) if self.G_k > 0 else self.estimate.scale()


def sum_laplace_threshold(scale: float, terms: int, beta: float) -> float:
    """``t`` with ``P(S ≥ t) ≤ β`` for ``S`` a sum of ``terms`` i.i.d. Laplace(``scale``) variables.

    One term: the exact tail ``½ e^{−t/s}``; ``t = s log(1/β)`` (a factor 2 to
    spare).  ``b`` terms: Chernoff with the Laplace moment generating function
    ``E e^{θS} = (1 − s²θ²)^{−b}``, ``P(S ≥ t) ≤ min_θ (1 − s²θ²)^{−b} e^{−θt}``;
    the minimizing ``θ = (√(b²s² + t²) − bs)/(ts)`` solves
    ``2bs²θ/(1 − s²θ²) = t``, and ``t`` is found by bisection (the bound
    decreases in ``t``).
    """
    L = math.log(1.0 / beta)
    if terms <= 1:
        return scale * L
    b = float(terms)

    def log_tail(t: float) -> float:
        theta = (math.sqrt(b * b * scale * scale + t * t) - b * scale) / (t * scale)
        return -b * math.log1p(-(scale * theta) ** 2) - theta * t

    lo, hi = 0.0, scale * (math.sqrt(2.0) * (L + b) + 1.0)  # the closed-form θ = 1/(√2 s) bound
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if log_tail(mid) > -L:
            lo = mid
        else:
            hi = mid
    return hi


def _laplace(source: NoiseSource, scale: float, size: int) -> np.ndarray:
    u = source.uniform(size) - 0.5
    return -scale * np.sign(u) * np.log1p(-2.0 * np.abs(u))


def private_tail_profile(model: Model, examples: Examples, *, epsilon: float, ledger: PrivacyLedger,
                         source: NoiseSource, low: float = 1e-4, high: float = 1e8,
                         bins_per_octave: int = 2, beta: float = 0.1,
                         indices: np.ndarray | None = None) -> TailProfile:
    """ε-DP histogram of ``A(z_i)`` on the public grid ``[low, high]`` (ratio ``2^{1/bins_per_octave}``).

    Charges ``epsilon`` to the examples it reads (all by default) before drawing noise.
    """
    eps = privacy_epsilon(epsilon, warn=False)
    low = positive_finite("low", low)
    high = positive_finite("high", high)
    beta = probability("beta", beta)
    if high <= low:
        raise ValueError("the histogram's range needs high > low")
    A = lipschitz_constants(model, examples)
    n = examples.m
    J = math.ceil(math.log2(high / low) * bins_per_octave)
    edges = low * 2.0 ** (np.arange(J + 1) / bins_per_octave)
    counts = np.bincount(np.searchsorted(edges, A, side="left"), minlength=J + 2).astype(float)
    idx = np.arange(n) if indices is None else np.asarray(indices)
    ledger.charge(eps, idx, mechanism="private tail histogram", batch="all", sensitivity=2.0,
                  noise_scale=2.0 / eps, note=f"{J + 2} bins on [{low:.3g}, {high:.3g}]")
    noisy = counts + _laplace(source, 2.0 / eps, counts.size)
    # everything below is post-processing of the released noisy counts.  Level j (blocks of 2^j fine
    # bins) gets failure probability β/2^{j+1} split over its bins, so all levels together stay under β.
    levels = []
    block, level_beta = 1, beta / 2.0
    while True:
        merged = np.add.reduceat(noisy, np.arange(0, noisy.size, block))
        threshold = sum_laplace_threshold(2.0 / eps, block, level_beta / merged.size)
        kept = np.where(merged >= threshold, merged, 0.0)
        levels.append((kept, block, threshold))
        if kept.sum() >= 0.5 * n or block >= noisy.size:
            break
        block *= 2
        level_beta /= 2.0
    if kept.sum() < 0.5 * n:
        # no level saw half the sample: keep the one that saw the most (the finer one on ties)
        kept, block, threshold = max(levels, key=lambda lv: (lv[0].sum(), -lv[1]))
    rounding = 2.0 ** (block / bins_per_octave)
    if kept.sum() > 0 and rounding > 4.0:
        warnings.warn(UtilityWarning(
            f"the private tail histogram had to merge {block} bins to see anything above its noise "
            f"(n = {n}, ε = {eps:g}): its values are rounded up by as much as {rounding:.3g}×. Pass a "
            "public G_k, raise the share of ε spent on the histogram, or narrow its grid (tail_range)."),
            stacklevel=2)
    if kept.sum() <= 0:
        kept = np.zeros_like(merged)
        kept[-1] = 1.0  # nothing survived even one block: assume the worst, everything above the grid
        warnings.warn(UtilityWarning(
            f"the private tail histogram saw nothing above its noise (n = {n}, ε = {eps:g}): every "
            f"example is assumed to sit at the top of the grid ({high:.3g}), which makes the fit noisy. "
            "Pass a public G_k, raise the share of ε spent on the histogram, or narrow its grid "
            "(tail_range)."),
            stacklevel=2)
    return TailProfile(edges=edges, mass=kept / kept.sum(), epsilon=eps, threshold=threshold, n=n,
                       block=block)


def estimate_moment_bound(model: Model, data: dict, *, k: float, epsilon: float, ledger: PrivacyLedger,
                          source: NoiseSource, **grid) -> tuple[float, TailProfile]:
    """A pure-ε-DP estimate of ``G_k`` (upward-rounded; see the module's caveats) and its histogram."""
    examples = model.bind(data)
    profile = private_tail_profile(model, examples, epsilon=epsilon, ledger=ledger, source=source, **grid)
    return profile.moment(k), profile


__all__ = ["CombinedTail", "TailProfile", "estimate_moment_bound", "lipschitz_constants",
           "private_tail_profile", "sum_laplace_threshold"]
