"""The plan of an affine loss: one noisy clipped mean of the gradients, then the linear minimizer over ``W``.

When the loss is affine in ``w`` — ``f(w, z) = <g(z), w> + c(z)``, which the loss's CVXPY expression
says (public: :func:`~cvxdp.structure.is_affine`) — the population risk is ``F(w) = <μ, w> + const``
with ``μ = E g(z)``, and everything a fit must learn is ``μ``'s direction.  The paper's localization
algorithms learn it through a regularized minimizer, whose ``λ`` shrinks the answer toward the centre
of ``W`` (``benchmarks/results/utility.md``, the lower-bound family: with them the default missed the
rate's slope by 0.16–0.23).  This plan estimates ``μ`` directly, with the mean-estimation form of the paper's
heavy-tailed rate:

1. ``m = (1/n) Σ clip_C(g_i)``, each gradient clipped to norm ``C`` (a per-example map);
2. release ``m̃ = m + b`` through the ℓ2-Laplace mechanism with sensitivity ``Δ ≥ 2C/n`` (replacing
   one example moves ``m`` by at most ``2C/n``; :func:`~cvxdp.privacy.clipped_mean.mean_sensitivity`
   adds the rounding of the mean, an exact sum divided once);
3. return ``ŵ ∈ argmin_{w ∈ W} <m̃, w>`` — post-processing of the release.

Utility.  For any ``ŵ`` minimizing ``<m̃, ·>`` and any ``w* ∈ W``,
``F(ŵ) − F(w*) = <μ − m̃, ŵ − w*> + <m̃, ŵ − w*> ≤ D ||μ − m̃||``, and
``||μ − m̃|| ≤ ||μ − E clip_C(g)|| + ||m − E m|| + ||b|| + snap``: the clipping bias is at most
``E[||g|| 1{||g|| > C}] ≤ G_k^k / C^{k−1}`` (Markov on the ``k``-th moment), the sampling error
``G₂/√n`` in mean square, ``E||b|| = d s = 2Cd/(nε)`` (the norm of ℓ2-Laplace noise in ``d``
dimensions is Gamma(d, s)), and the release's snap to its grid moves ``m̃`` by at most ``√d s`` (the
clamp to the box ``[−C, C]^d``, which holds ``E clip_C(g)``, only brings it closer).
:func:`mean_gradient_clip` minimizes bias plus expected noise, ``C = G_k ((k − 1) n ε / (2d))^{1/k}``,
which gives ``E[F(ŵ) − F(w*)] ≤ D (2k/(k − 1)) ((k − 1)/2)^{1/k} G_k (d/(nε))^{1 − 1/k} + D √d s +
D G₂/√n`` (:meth:`MeanGradientPlan.bound`) — the rate of the paper's Theorem 3.1 (up to its constant;
the snap adds ``√d/d`` of the noise term), in one release, with no ``λ``.  The bias bound is the worst
case — every clipped example pulling the mean the same way; when the heavy examples are collinear with
``μ`` clipping shrinks ``m`` without turning it and a smaller ``C`` would do better, which the public
inputs cannot tell (see :mod:`cvxdp.plan.auto`).

Privacy.  ``C``, ``Δ`` and ``s`` are functions of ``n, d, ε, k, G_k`` — ``G_k`` public, or with
``G_k="auto"`` the estimate read off the private tail histogram released (and charged its share of ε)
before this plan is made, so post-processing of a charged release (a ``C`` below
:data:`~cvxdp.privacy.clipped_mean.MIN_CLIP`, where float rounding stops being relative, is refused by
the planner); the clipped gradients are per-example maps of each example's own recovered coefficients
(:func:`~cvxdp.structure.affine_coefficients`); the sum is exactly rounded whatever the partitioning
(:func:`~cvxdp.privacy.clipped_mean.exact_column_sums`), so neighbouring means differ by at most ``Δ`` in
floating point; the release is the shared mechanism's (snapped to a public grid inside the public box
``[−C, C]^d``); the linear minimizer reads only ``m̃`` and ``W``.  So the release is ``ε_fit``-DP, one
charge to every example, and with the histogram's share (``G_k="auto"``) the fit is ε-DP by sequential
composition (the two shares add up to at most ε exactly: :func:`~cvxdp.privacy.ledger.budget_remainder`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cvxdp.privacy.clipped_mean import mean_sensitivity
from cvxdp.privacy.mechanisms import L2LaplaceMechanism, laplace_scale

#: The ledger's name for the release.
MECHANISM_LABEL = "noisy clipped mean gradient"


def mean_gradient_clip(n: int, d: int, epsilon: float, k: float, G_k: float) -> float:
    """``C = G_k ((k − 1) n ε / (2d))^{1/k}``: the minimizer over ``C`` of ``G_k^k C^{1−k} + 2Cd/(nε)``.

    The first term bounds the clipping bias of the mean of gradients whose norms have ``k``-th moment
    at most ``G_k^k``; the second is the expected norm of the ℓ2-Laplace noise of the mean's release.
    A function of public values only.
    """
    return float(G_k) * ((k - 1.0) * n * epsilon / (2.0 * d)) ** (1.0 / k)


@dataclass(frozen=True)
class MeanGradientPlan:
    """The one release of the affine plan: ``ε``, the clip ``C``, sensitivity ``Δ`` and noise scale ``s``.

    ``Δ = mean_sensitivity(C, n) ≥ 2C/n + 2uC`` (the float means of neighbouring data sets, each the
    exact mean rounded once, differ by at most that) and ``s = Δ/ε`` rounded up, so ``s·ε ≥ Δ`` exactly.
    """

    n: int
    dim: int
    epsilon: float
    C: float
    sensitivity: float
    noise_scale: float

    def mechanism(self) -> L2LaplaceMechanism:
        return L2LaplaceMechanism(self.sensitivity, self.epsilon, self.dim, scale=self.noise_scale)

    @property
    def box(self) -> float:
        """Every coordinate of the clipped mean lies in ``[−C, C]``: the public box of the release."""
        return self.C

    def bound(self, k: float, G_k: float, G_2: float, D: float) -> float:
        """The expected excess-risk bound of the module docstring at this plan's ``C``:
        ``D (G_k^k/C^{k−1} + (d + √d) s + G₂/√n)`` (bias, noise and snap, sampling)."""
        bias = G_k * (G_k / self.C) ** (k - 1.0)
        noise = (self.dim + math.sqrt(self.dim)) * self.noise_scale
        return D * (bias + noise + G_2 / math.sqrt(self.n))


def plan_mean_gradient(n: int, d: int, epsilon: float, k: float, G_k: float) -> MeanGradientPlan:
    """The affine plan for ``n`` examples in ``d`` dimensions, budget ``ε`` and moment bound ``(k, G_k)``."""
    C = mean_gradient_clip(n, d, epsilon, k, G_k)
    sensitivity = mean_sensitivity(C, n)
    return MeanGradientPlan(n=n, dim=d, epsilon=epsilon, C=C, sensitivity=sensitivity,
                            noise_scale=float(laplace_scale(sensitivity, epsilon)))


__all__ = ["MECHANISM_LABEL", "MeanGradientPlan", "mean_gradient_clip", "plan_mean_gradient"]
