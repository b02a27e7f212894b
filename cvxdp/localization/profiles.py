"""Constant profiles of the localization algorithms: the published ``paper`` constants and a ``tight`` one.

Both profiles give the same guarantee — every call of Algorithm 2 is
``ε_j``-DP for its batch and the ``ε_j`` of one batch sum to at most the budget
— and differ only in how much noise and which radii they use.  Each method's
docstring carries its privacy argument or says that it affects utility only.
Every input is public: ``ε, C, λ, m, d, k, G_k, D, β`` and radii computed from
earlier private outputs.  No profile reads the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincinv


@dataclass(frozen=True)
class RoundPlan:
    """The public constants of one Algorithm 2 call.

    ``radius_plus`` = accuracy + bias + noise-quantile radii + the snapping
    error ``√d Λ/2`` of the floating-point defence
    (:meth:`~cvxdp.mechanisms.L2LaplaceMechanism.release`).
    """

    C: float
    alpha: float
    sensitivity: float
    noise_scale: float
    radius_plus: float
    bias_radius: float
    noise_radius: float
    accuracy_radius: float
    snap_radius: float = 0.0


def snap_radius(d: int, scale: float) -> float:
    """``√d Λ/2``: how far snapping to the grid ``Λ Z^d`` can move the released point."""
    from cvxdp.mechanisms import snap_granularity

    return math.sqrt(d) * snap_granularity(scale) / 2.0


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


def empirical_bias_bound(C: float | np.ndarray, k: float, G_k: float, m: int,
                         beta: float) -> float | np.ndarray:
    """A bound ``T`` with ``P((1/m) Σ (A_i − C)₊ > T) ≤ β`` for i.i.d. ``A_i`` with ``E A^k ≤ G_k^k``.

    The smaller of Markov (``μ/β``) and Cantelli
    (``μ + σ sqrt((1−β)/(β m))``), ``μ`` and ``σ²`` the sharp moment bounds
    above.  Both are deterministic functions of public inputs, so the smaller
    one is a valid level-``β`` bound.  Affects utility (the radius) only.
    """
    mu = np.asarray(extension_bias_mean(C, k, G_k))
    var = np.asarray(extension_bias_second_moment(C, k, G_k))
    markov = mu / beta
    with np.errstate(invalid="ignore"):
        cantelli = np.where(np.isfinite(var), mu + np.sqrt(var * (1.0 - beta) / (beta * m)), np.inf)
    out = np.minimum(markov, cantelli)
    return float(out) if np.ndim(C) == 0 else out


class MomentTail:
    """The worst-case tail model: only ``E A^k ≤ G_k^k`` is known (public)."""

    def __init__(self, k: float, G_k: float) -> None:
        self.k, self.G_k = float(k), float(G_k)

    def bias_bound(self, C: np.ndarray, m: int, beta: float) -> np.ndarray:
        return np.asarray(empirical_bias_bound(C, self.k, self.G_k, m, beta))

    def scale(self) -> float:
        return self.G_k


def gamma_quantile(d: int, scale: float, beta: float) -> float:
    """``r`` with ``P(Gamma(d, scale) > r) = β`` (exact ℓ2-Laplace radius quantile)."""
    return float(scale * gammaincinv(d, 1.0 - beta))


def _c_grid(G_k: float) -> np.ndarray:
    return G_k * np.logspace(-3, 3, 241)


def certifiable_accuracy(C: float, lam: float, R: float) -> float:
    """The smallest ``α`` worth asking a float64 certificate for.

    Certified gaps are sums of per-example brackets evaluated in double
    precision, reliable to about ``1e-12`` of the objective's scale;
    ``C R + λ R²`` bounds how much ``F`` varies over ``U``.  A profile never asks
    for less than ``1e-10 (1 + C R + λ R²)``; the larger ``α`` enters the
    sensitivity, so privacy is unaffected (only a little noise is added).
    """
    return 1e-10 * (1.0 + C * R + lam * R * R)


class Profile:
    """Base class: how Algorithms 1–3 turn public inputs into ``ε_j``, ``C``, ``α``, noise and radii."""

    name = "base"

    def round_epsilons(self, epsilon: float, thetas: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def plan(self, *, R: float, lam: float, m: int, d: int, eps: float, beta: float, k: float,
             G_k: float, C: float | None = None) -> RoundPlan:  # pragma: no cover
        raise NotImplementedError

    def boosting_groups(self, phases: int, delta: float) -> int:
        return 1

    def rounds(self, *, d: int, m: int, epsilon: float, lam: float, k: float, G_k: float, D: float,
               beta: float, max_rounds: int) -> int:
        """The paper's ``S = ⌈log_{k+1} log(e D / R_⋆)⌉`` (public)."""
        from cvxdp.localization.recursive import round_count

        return round_count(d, m, epsilon, lam, k, G_k, D, max_rounds)


class TightProfile(Profile):
    """The default: exact sensitivity, exact Gamma quantiles, sharp bias bounds.

    Parameters
    ----------
    accuracy_share:
        ``κ``: the optimization error may inflate the sensitivity by a factor
        ``1 + κ`` (``α = κ² C² / (2 λ m²)``, so ``2 sqrt(2α/λ) = κ · 2C/(λm)``).
    tail:
        The model of the per-example Lipschitz constants ``A(z)`` used for the
        extension's bias: ``None`` for the worst case under the public moment
        bound (:class:`MomentTail`), or a private estimate
        (:class:`~cvxdp.moments.TailProfile`).  Utility only: the noise never
        depends on it.
    clip:
        A fixed extension constant ``C`` for every round, chosen from public
        knowledge (units, a pilot study on other data) — never from the
        training data.  ``None`` (default) picks ``C`` per round by minimizing
        the radius.  The radii stay the certified ones for that ``C``, so a
        small ``C`` costs localization, not correctness; privacy holds for any
        public ``C``.
    """

    name = "tight"

    def __init__(self, accuracy_share: float = 0.05, tail: object | None = None,
                 clip: float | None = None) -> None:
        if not 0 < accuracy_share < 1:
            raise ValueError("accuracy_share must lie in (0, 1)")
        if clip is not None and not (math.isfinite(clip) and clip > 0):
            raise ValueError(f"clip must be a finite positive extension constant, got {clip!r}")
        self.kappa = float(accuracy_share)
        self.tail = tail
        self.clip = None if clip is None else float(clip)

    def round_epsilons(self, epsilon: float, thetas: np.ndarray) -> np.ndarray:
        """``ε_j = ε θ_j``: the whole budget, split geometrically (``Σ θ_j = 1``)."""
        return epsilon * np.asarray(thetas, float)

    def plan(self, *, R: float, lam: float, m: int, d: int, eps: float, beta: float, k: float,
             G_k: float, C: float | None = None) -> RoundPlan:
        """Noise ``s = Δ/ε_j`` with the exact sensitivity ``Δ = 2C/(λm) + 2 sqrt(2α/λ)``.

        Privacy: ``F_{C,U,λ}`` is λ-strongly convex on ``U`` and each example
        enters through a C-Lipschitz term weighted ``1/m``, so exact minimizers
        of neighbouring data sets are within ``2C/(λm)``; an ``α``-minimizer is
        within ``sqrt(2α/λ)`` of its exact minimizer (strong convexity), hence
        ``||w̃ − w̃'|| ≤ Δ`` and the ℓ2-Laplace mechanism with ``s = Δ/ε_j`` is
        ``ε_j``-DP.  ``U``, ``w₀``, ``C``, ``λ`` are public (earlier outputs and
        the schedule).  ``C`` minimizes the radius below — a public computation.

        Radius (utility only): ``R⁺ = sqrt(2α/λ) + sqrt(R T_β(C)/λ) +
        Q_{Gamma(d,s)}(1 − β)``, where ``R T_β(C)`` bounds
        ``max_U (F̂ − F̂_{C,U})`` with probability ``1 − β``
        (:func:`empirical_bias_bound`) and strong convexity of both objectives
        at their minimizers gives ``||ŵ_{C,U} − ŵ|| ≤ sqrt(B/λ)``.
        """
        kappa = self.kappa
        quant = float(gammaincinv(d, 1.0 - beta))
        tail = self.tail if self.tail is not None else MomentTail(k, G_k)
        if C is None:
            C = self.clip
        if C is None:
            grid = _c_grid(tail.scale())
            acc = kappa * grid / (lam * m)
            s = (1.0 + kappa) * 2.0 * grid / (lam * m * eps)
            bias = np.sqrt(R * tail.bias_bound(grid, m, beta) / lam)
            vals = acc + bias + s * (quant + math.sqrt(d))
            C = float(grid[int(np.argmin(vals))])
        alpha = max(kappa * kappa * C * C / (2.0 * lam * m * m), certifiable_accuracy(C, lam, R))
        sens = 2.0 * C / (lam * m) + 2.0 * math.sqrt(2.0 * alpha / lam)
        acc = math.sqrt(2.0 * alpha / lam)
        bias = math.sqrt(R * float(tail.bias_bound(np.array([C]), m, beta)[0]) / lam)
        noise = sens / eps * quant
        snap = snap_radius(d, sens / eps)
        return RoundPlan(C=C, alpha=alpha, sensitivity=sens, noise_scale=sens / eps,
                         radius_plus=acc + bias + noise + snap, bias_radius=bias, noise_radius=noise,
                         accuracy_radius=acc, snap_radius=snap)

    def rounds(self, *, d: int, m: int, epsilon: float, lam: float, k: float, G_k: float, D: float,
               beta: float, max_rounds: int) -> int:
        """The ``S`` whose simulated radius recursion ends smallest.

        Every radius ``R⁺_j`` is a function of public inputs only (``R_j``, ``λ``,
        ``m``, ``ε_j``, ``β_j``, ``k``, ``G_k``), so the whole sequence — and the
        best number of rounds — can be computed before touching the data.
        Privacy does not depend on ``S``: the ``ε_j`` always sum to ``ε``.
        """
        from cvxdp.localization.recursive import allocation

        best, best_S = math.inf, 1
        for S in range(1, max_rounds + 1):
            thetas = allocation(S, k)
            eps_j = self.round_epsilons(epsilon, thetas)
            R = D
            final = math.inf
            for j in range(S):
                plan = self.plan(R=R, lam=lam, m=m, d=d, eps=float(eps_j[j]), beta=float(beta * thetas[j]),
                                 k=k, G_k=G_k)
                final = plan.radius_plus
                R = min(2.0 * final, D)
            if final < best * (1.0 - 1e-3):
                best, best_S = final, S
        return best_S


class PaperProfile(Profile):
    """The published constants (Appendix D.2): ``ε_j = (ε/2) θ_j``, ``s = 10C/(ε_j λ m)``.

    ``α = C² min{1, dℓ/ε_j}² / (100 λ m²)`` with ``ℓ = log(1/β)`` gives
    ``sqrt(2α/λ) ≤ C/(√50 λ m)``, so the exact sensitivity is at most
    ``2.29 C/(λm) ≤ 10C/(λm)`` and the noise is (conservatively) ``ε_j``-DP.
    Radius ``R⁺ = sqrt(2R G_k^k/(λβ(k−1)C^{k−1})) + 20 C d ℓ/(λ m ε_j)`` and
    ``C* = ((k−1)A/(2B))^{2/(k+1)}`` balancing its two terms.
    """

    name = "paper"

    def round_epsilons(self, epsilon: float, thetas: np.ndarray) -> np.ndarray:
        """``ε_j = (ε/2) θ_j`` (Σ ε_j = ε/2 ≤ ε, as published)."""
        return 0.5 * epsilon * np.asarray(thetas, float)

    def plan(self, *, R: float, lam: float, m: int, d: int, eps: float, beta: float, k: float,
             G_k: float, C: float | None = None) -> RoundPlan:
        ell = math.log(1.0 / beta)
        A = math.exp(0.5 * (math.log(2.0 * R / (lam * beta * (k - 1.0))) + k * math.log(G_k)))
        B = 20.0 * d * ell / (lam * m * eps)
        if C is None:
            C = ((k - 1.0) * A / (2.0 * B)) ** (2.0 / (k + 1.0))
        alpha = max(C * C * min(1.0, d * ell / eps) ** 2 / (100.0 * lam * m * m),
                    certifiable_accuracy(C, lam, R))
        sens = 2.0 * C / (lam * m) + 2.0 * math.sqrt(2.0 * alpha / lam)
        # the published scale; never below Δ/ε_j should the accuracy floor have raised Δ
        s = max(10.0 * C / (eps * lam * m), sens / eps)
        bias = A * C ** (-(k - 1.0) / 2.0)
        noise = B * C
        snap = snap_radius(d, s)
        return RoundPlan(C=C, alpha=alpha, sensitivity=sens, noise_scale=s, radius_plus=bias + noise + snap,
                         bias_radius=bias, noise_radius=noise, accuracy_radius=math.sqrt(2 * alpha / lam),
                         snap_radius=snap)

    def boosting_groups(self, phases: int, delta: float) -> int:
        """``J = ⌈log(T/δ)⌉`` rounded up to an odd number (majority vote)."""
        J = max(1, math.ceil(math.log(max(phases, 1) / delta)))
        return J if J % 2 == 1 else J + 1


PROFILES = {"tight": TightProfile, "paper": PaperProfile}


def get_profile(profile: str | Profile) -> Profile:
    if isinstance(profile, Profile):
        return profile
    if profile not in PROFILES:
        from cvxdp.error import ParameterError

        raise ParameterError(f"profile must be one of {sorted(PROFILES)}, got {profile!r}.")
    return PROFILES[profile]()
