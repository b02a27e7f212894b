"""Constant profiles of the localization algorithms: the published ``paper`` constants and a ``tight`` one.

Both profiles give the same guarantee — every call of Algorithm 2 is
``ε_j``-DP for its batch and the ``ε_j`` of one batch sum to at most the budget
— and differ only in how much noise and which radii they use.  Each method's
docstring carries its privacy argument or says that it affects utility only.
Every input is public: ``ε, C, λ, m, d, k, G_k, D, β`` and radii computed from
earlier private outputs.  No profile reads the data.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincinv

from cvxdp.error import ParameterError
from cvxdp.plan.schedule import allocation, batch_rounds, plan_rounds, round_count
from cvxdp.plan.tail_models import TailModel, moment_tail
from cvxdp.privacy.mechanisms import L2LaplaceMechanism, laplace_scale, snap_granularity


@dataclass(frozen=True)
class RoundPlan:
    """The public constants of one Algorithm 2 call (one release of the ℓ2-Laplace mechanism).

    ``radius`` is the public bound ``R_j`` on the diameter of the round's set ``U_j``;
    ``radius_plus`` = accuracy + bias + noise-quantile radii + the snapping error ``√d Λ/2``
    of the floating-point defence (:meth:`~cvxdp.privacy.mechanisms.L2LaplaceMechanism.release`),
    the radius of the next round's ball.  ``epsilon`` is what the ledger charges; the mechanism
    adds noise of scale ``noise_scale ≥ sensitivity/epsilon``.
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
    epsilon: float = float("nan")
    beta: float = float("nan")
    radius: float = float("nan")
    lam: float = float("nan")
    m: int = 0
    dim: int = 0
    round: int = 0

    def mechanism(self) -> L2LaplaceMechanism:
        """The release's mechanism: ℓ2-Laplace with this plan's sensitivity, ``ε`` and noise scale."""
        return L2LaplaceMechanism(self.sensitivity, self.epsilon, self.dim, scale=self.noise_scale)


def snap_radius(d: int, scale):
    """``√d Λ/2``: how far snapping to the grid ``Λ Z^d`` can move the released point (arrays too)."""
    return math.sqrt(d) * snap_granularity(scale) / 2.0


#: ``1 + 8u``: covers the at most ``4u`` relative rounding of the sensitivity formula's five operations.
SENSITIVITY_ROUNDING = 1.0 + 2.0**-50


def output_sensitivity(C, lam, m, alpha):
    """``Δ ≥ 2C/(λm) + 2 sqrt(2α/λ)`` in exact arithmetic (arrays or floats).

    Privacy (the paper's Lemma 2.5 with an inexact solver): ``F_{C,U,λ}`` is λ-strongly convex on
    ``U`` and each example enters through a C-Lipschitz term weighted ``1/m``, so exact minimizers
    of neighbouring data sets are within ``2C/(λm)``; an ``α``-minimizer is within ``sqrt(2α/λ)``
    of its exact minimizer.  The float formula rounds five times (``λm``, the quotient, ``2α/λ``,
    the root, the sum; ``2C`` and ``2·`` are exact), each within a relative ``u = 2⁻⁵³``, so it is
    within ``(1 + u)⁴ − 1 < 4.1u`` of the real value; multiplying by ``1 + 8u`` (one more
    rounding) lands above it.
    """
    return (2.0 * C / (lam * m) + 2.0 * np.sqrt(2.0 * alpha / lam)) * SENSITIVITY_ROUNDING


def certifiable_accuracy(C: float, lam: float, R: float) -> float:
    """The smallest ``α`` worth asking a float64 certificate for.

    Certified gaps are sums of per-example brackets evaluated in double
    precision, reliable to about ``1e-12`` of the objective's scale;
    ``C R + λ R²`` bounds how much ``F`` varies over ``U``.  A profile never asks
    for less than ``1e-10 (1 + C R + λ R²)``; the larger ``α`` enters the
    sensitivity, so privacy is unaffected (only a little noise is added).
    """
    return 1e-10 * (1.0 + C * R + lam * R * R)


def _c_grid(G_k: float) -> np.ndarray:
    return G_k * np.logspace(-3, 3, 241)


class Profile:
    """Base class: how Algorithms 1–3 turn public inputs into ``ε_j``, ``C``, ``α``, noise and radii.

    A profile is a value: two profiles of the same class with the same parameters are equal and
    hash alike (so a :class:`~cvxdp.plan.inputs.PublicInputs` holding one is hashable).
    """

    name = "base"

    def _key(self) -> tuple:
        return ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def round_epsilons(self, epsilon: float, thetas: np.ndarray) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    def plan(self, *, R: float, lam: float, m: int, d: int, eps: float, beta: float, k: float,
             G_k: float, C: float | None = None) -> RoundPlan:  # pragma: no cover
        raise NotImplementedError

    def boosting_groups(self, phases: int, delta: float) -> int:
        return 1

    def with_tail(self, tail: TailModel | None) -> Profile:
        """The same profile reading ``tail`` (a released tail model); profiles without one ignore it."""
        return self

    def rounds(self, *, d: int, m: int, epsilon: float, lam: float, k: float, G_k: float, D: float,
               beta: float, max_rounds: int) -> int:
        """The paper's ``S = ⌈log_{k+1} log(e D / R_⋆)⌉`` (public)."""
        return round_count(d, m, epsilon, lam, k, G_k, D, max_rounds)

    def final_radii(self, ms: np.ndarray, lams: np.ndarray, *, d: int, epsilon: float, k: float, G_k: float,
                    D: float, beta: float, localize: bool = True) -> np.ndarray:
        """``min(R⁺_S, D)`` of Algorithm 3 for every ``(m, λ)``: :meth:`rounds` and the recursion, one
        pair at a time (:class:`TightProfile` vectorizes it)."""
        return np.array([min(batch_rounds(self, m=int(m), d=d, epsilon=epsilon, lam=float(lam), k=k, G_k=G_k,
                                          D=D, beta=beta, localize=localize)[-1].radius_plus, D)
                         for m, lam in zip(ms, lams, strict=True)])


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
        (:class:`~cvxdp.privacy.tail.TailProfile`).  Utility only: the noise never
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

    def __init__(self, accuracy_share: float = 0.05, tail: TailModel | None = None,
                 clip: float | None = None) -> None:
        if not 0 < accuracy_share < 1:
            raise ValueError("accuracy_share must lie in (0, 1)")
        if clip is not None and not (math.isfinite(clip) and clip > 0):
            raise ValueError(f"clip must be a finite positive extension constant, got {clip!r}")
        self.kappa = float(accuracy_share)
        self.tail = tail
        self.clip = None if clip is None else float(clip)

    def _key(self) -> tuple:
        return (self.kappa, self.clip, id(self.tail) if self.tail is not None else None)

    def with_tail(self, tail: TailModel | None) -> TightProfile:
        """A copy reading ``tail``: of this profile's own class, so a subclass keeps its overrides.

        A shallow copy (``copy.copy``): a subclass that caches anything derived from its tail, or
        holds mutable state it must not share with the copy, overrides this method.
        """
        out = copy.copy(self)
        out.tail = tail
        return out

    def round_epsilons(self, epsilon: float, thetas: np.ndarray) -> np.ndarray:
        """``ε_j = ε θ_j``: the whole budget, split geometrically (``Σ θ_j = 1``)."""
        return epsilon * np.asarray(thetas, float)

    def plan(self, *, R: float, lam: float, m: int, d: int, eps: float, beta: float, k: float,
             G_k: float, C: float | None = None) -> RoundPlan:
        """Noise ``s = Δ/ε_j`` (rounded up) with the sensitivity ``Δ = 2C/(λm) + 2 sqrt(2α/λ)`` (rounded up).

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
        at their minimizers gives ``||ŵ_{C,U} − ŵ|| ≤ sqrt(B/λ)``.  With a private tail histogram
        (:meth:`with_tail`) ``T_β`` is an estimate, not a bound: it values each example at its bin's
        lower edge (:meth:`~cvxdp.privacy.tail.TailProfile.values`) and drops bins below the noise.
        """
        out = self.plan_arrays(R=np.array([R], float), lam=np.array([lam], float), m=np.array([m], float),
                               d=d, eps=np.array([eps], float), beta=np.array([beta], float), k=k, G_k=G_k,
                               C=None if C is None else np.array([C], float))
        return RoundPlan(**{key: float(value[0]) for key, value in out.items()}, epsilon=eps, beta=beta,
                         radius=R, lam=lam, m=m, dim=d)

    def plan_arrays(self, *, R: np.ndarray, lam: np.ndarray, m: np.ndarray, d: int, eps: np.ndarray,
                    beta: np.ndarray, k: float, G_k: float, C: np.ndarray | None = None) -> dict:
        """:meth:`plan` for many rounds at once (1-d arrays of equal length; the same floats, elementwise).

        The planner's schedule search evaluates thousands of rounds; this is its vectorized form,
        and :meth:`plan` calls it with arrays of length one, so both give identical numbers.
        """
        kappa = self.kappa
        quant = gammaincinv(d, 1.0 - beta)
        tail = self.tail if self.tail is not None else moment_tail(float(k), float(G_k))
        T_C = None  # the bias bound at the chosen C, where the grid search has it already
        if C is None and self.clip is not None:
            C = np.full(R.shape, self.clip)
        if C is None:
            grid = _c_grid(tail.scale())
            # the radius on the grid, R⁺(C) = C·slope + sqrt(R/λ)·sqrt(T(C)) with the accuracy and noise
            # terms (both linear in C) folded into one slope per round: a few passes over the
            # (rounds × grid) table instead of a dozen (the chosen C's radius is recomputed below from
            # the formulas of the docstring, so only a near-tie of the argmin can see the rounding)
            lm = lam * m
            slope = kappa / lm + (1.0 + kappa) * 2.0 / (lm * eps) * (quant + math.sqrt(d))
            # the bias bound reads (C, m, β) only, and a schedule search's rounds repeat few (m, β) pairs:
            # computed once per distinct pair and gathered
            keys = np.ascontiguousarray(np.stack([m, beta], axis=1), dtype=float)
            _, first, inverse = np.unique(keys.view(np.dtype((np.void, 16))).ravel(), return_index=True,
                                          return_inverse=True)
            inverse = np.ravel(inverse)
            pairs = keys[first]  # distinct by their bits: -0.0 and NaN keep their own rows
            T = tail.bias_bound(grid, pairs[:, :1], pairs[:, 1:])
            vals = np.sqrt(T)[inverse]
            vals *= np.sqrt(R / lam)[:, None]
            vals += slope[:, None] * grid
            best = np.argmin(vals, axis=1)
            C = grid[best]
            T_C = T[inverse, best]
        alpha = np.maximum(kappa * kappa * C * C / (2.0 * lam * m * m), certifiable_accuracy(C, lam, R))
        sens = output_sensitivity(C, lam, m, alpha)
        acc = np.sqrt(2.0 * alpha / lam)
        if T_C is None:
            T_C = tail.bias_bound(C, m, beta)
        bias = np.sqrt(R * T_C / lam)
        scale = laplace_scale(sens, eps)
        noise = scale * quant
        snap = snap_radius(d, scale)
        return {"C": C, "alpha": alpha, "sensitivity": sens, "noise_scale": scale,
                "radius_plus": acc + bias + noise + snap, "bias_radius": bias, "noise_radius": noise,
                "accuracy_radius": acc, "snap_radius": snap}

    def rounds(self, *, d: int, m: int, epsilon: float, lam: float, k: float, G_k: float, D: float,
               beta: float, max_rounds: int) -> int:
        """The ``S`` whose simulated radius recursion ends smallest.

        Every radius ``R⁺_j`` is a function of public inputs only (``R_j``, ``λ``,
        ``m``, ``ε_j``, ``β_j``, ``k``, ``G_k``), so the whole sequence — and the
        best number of rounds — can be computed before touching the data.
        Privacy does not depend on ``S``: the ``ε_j`` always sum to ``ε``.
        """
        if self._vectorized():
            best_S, _ = self._best_rounds(np.array([m], float), np.array([lam], float), d=d, epsilon=epsilon,
                                          k=k, G_k=G_k, D=D, beta=beta, max_rounds=max_rounds)
            return int(best_S[0])
        best, best_S = math.inf, 1
        for S in range(1, max_rounds + 1):
            final = plan_rounds(self, S=S, m=m, d=d, epsilon=epsilon, lam=lam, k=k, G_k=G_k, D=D,
                                beta=beta)[-1].radius_plus
            if final < best * (1.0 - 1e-3):
                best, best_S = final, S
        return best_S

    def final_radii(self, ms: np.ndarray, lams: np.ndarray, *, d: int, epsilon: float, k: float, G_k: float,
                    D: float, beta: float, localize: bool = True, max_rounds: int = 8) -> np.ndarray:
        """``min(R⁺_S, D)`` of Algorithm 3 for every ``(m, λ)``: :meth:`rounds` and the recursion, vectorized.

        Every candidate ``S`` of every pair runs its recursion ``R_{j+1} = min(2R⁺_j, D)`` in one
        array per round index (:meth:`plan_arrays`, the same floats as :meth:`plan`), and each pair
        keeps the ``S`` that :meth:`rounds` would choose.  A subclass that changes :meth:`plan` or
        :meth:`rounds` gets the scalar loop instead.
        """
        if not (self._vectorized() and type(self).rounds is TightProfile.rounds):
            return super().final_radii(ms, lams, d=d, epsilon=epsilon, k=k, G_k=G_k, D=D, beta=beta,
                                       localize=localize)
        _, final = self._best_rounds(ms, lams, d=d, epsilon=epsilon, k=k, G_k=G_k, D=D, beta=beta,
                                     max_rounds=max_rounds if localize else 1)
        return np.minimum(final, D)

    def _vectorized(self) -> bool:
        """Whether this profile's rounds are :meth:`plan_arrays`' (a subclass that changes how a round is
        planned gets the scalar loops)."""
        return type(self).plan is TightProfile.plan and type(self).plan_arrays is TightProfile.plan_arrays

    def _best_rounds(self, ms: np.ndarray, lams: np.ndarray, *, d: int, epsilon: float, k: float,
                     G_k: float, D: float, beta: float, max_rounds: int) -> tuple[np.ndarray, np.ndarray]:
        """Per pair, the ``S ≤ max_rounds`` that :meth:`rounds` chooses and the last ``R⁺`` of its recursion.

        Every candidate ``S`` runs ``R_0 = D``, ``R_{j+1} = min(2R⁺_j, D)`` with the ``ε_j, β_j`` of
        :func:`~cvxdp.plan.schedule.plan_rounds`, all pairs and all ``S`` in one array per round.
        """
        Ss = list(range(1, max_rounds + 1))
        N = len(ms)
        row_S = np.repeat(Ss, N)
        row_i = np.tile(np.arange(N), len(Ss))
        # row S − 1 of each table: round j's ε_j and β_j for S rounds (as plan_rounds computes them)
        eps_tab, beta_tab = np.ones((max_rounds, max_rounds)), np.ones((max_rounds, max_rounds))
        for S in Ss:
            shares = allocation(S, k)
            eps_tab[S - 1, :S] = self.round_epsilons(epsilon, shares)
            beta_tab[S - 1, :S] = beta * shares
        R = np.full(row_S.size, float(D))
        final = np.empty(row_S.size)
        for j in range(max_rounds):
            act = np.flatnonzero(row_S > j)
            eps_j, beta_j = eps_tab[row_S[act] - 1, j], beta_tab[row_S[act] - 1, j]
            plus = self.plan_arrays(R=R[act], lam=lams[row_i[act]], m=ms[row_i[act]], d=d, eps=eps_j,
                                    beta=beta_j, k=k, G_k=G_k)["radius_plus"]
            R[act] = np.minimum(2.0 * plus, D)
            last = row_S[act] == j + 1
            final[act[last]] = plus[last]
        best, best_S = np.full(N, math.inf), np.ones(N, dtype=int)
        for S in Ss:  # the rule of rounds(): a longer recursion must end smaller by 0.1 %
            f = final[row_S == S]
            better = f < best * (1.0 - 1e-3)
            best, best_S = np.where(better, f, best), np.where(better, S, best_S)
        return best_S, best



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
        log_A = 0.5 * (math.log(2.0 * R / (lam * beta * (k - 1.0))) + k * math.log(G_k))
        B = 20.0 * d * ell / (lam * m * eps)
        if log_A < 700.0:
            A = math.exp(log_A)
            if C is None:
                C = ((k - 1.0) * A / (2.0 * B)) ** (2.0 / (k + 1.0))
            bias = A * C ** (-(k - 1.0) / 2.0)
        else:  # a large k (or G_k) overflows A itself; C and the bias are moderate: take them in logs
            if C is None:
                C = math.exp(2.0 / (k + 1.0) * (math.log((k - 1.0) / (2.0 * B)) + log_A))
            bias = math.exp(log_A - (k - 1.0) / 2.0 * math.log(C))
        alpha = max(C * C * min(1.0, d * ell / eps) ** 2 / (100.0 * lam * m * m),
                    certifiable_accuracy(C, lam, R))
        sens = float(output_sensitivity(C, lam, m, alpha))
        # the published scale; never below Δ/ε_j should the accuracy floor have raised Δ
        s = max(10.0 * C / (eps * lam * m), float(laplace_scale(sens, eps)))
        noise = B * C
        snap = snap_radius(d, s)
        return RoundPlan(C=C, alpha=alpha, sensitivity=sens, noise_scale=s, radius_plus=bias + noise + snap,
                         bias_radius=bias, noise_radius=noise, accuracy_radius=math.sqrt(2 * alpha / lam),
                         snap_radius=snap, epsilon=eps, beta=beta, radius=R, lam=lam, m=m, dim=d)

    def boosting_groups(self, phases: int, delta: float) -> int:
        """``J = ⌈log(T/δ)⌉`` rounded up to an odd number (majority vote)."""
        J = max(1, math.ceil(math.log(max(phases, 1) / delta)))
        return J if J % 2 == 1 else J + 1


PROFILES = {"tight": TightProfile, "paper": PaperProfile}


def get_profile(profile: str | Profile) -> Profile:
    """A profile by name (``"tight"``, ``"paper"``) or the profile object itself."""
    if isinstance(profile, Profile):
        return profile
    if profile not in PROFILES:
        raise ParameterError(f"profile must be one of {sorted(PROFILES)}, got {profile!r}.")
    return PROFILES[profile]()


__all__ = ["PROFILES", "PaperProfile", "Profile", "RoundPlan", "TightProfile", "certifiable_accuracy",
           "get_profile", "snap_radius"]
