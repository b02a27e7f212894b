"""Algorithm 3 — recursive localization with a geometric allocation of ε and β.

With ``a = 1/(k+1)``, ``R_⋆ = (G_k/λ)(d/(mε))^{1−1/k}`` and
``S = ⌈log_{k+1} log(e D / R_⋆)⌉`` rounds (the paper profile; the tight profile
picks the ``S`` whose public radius recursion ends smallest), round ``j`` gets

    θ_j = (1 − a) a^{S−1−j} / (1 − a^S)      (Σ θ_j = 1, the largest share last),

``ε_j`` from the profile (``ε θ_j`` tight, ``(ε/2) θ_j`` paper) and
``β_j = β₀ θ_j``.  ``U₀ = W``; round ``j`` runs Algorithm 2 on ``U_j`` and sets
``U_{j+1} = W ∩ B(w_loc,j, R⁺_j)``, shrinking the set, and with it the
extension's bias, roughly as ``R_{j+1} ≈ R_⋆ (R_j/R_⋆)^{1/(k+1)}``.  The output
is the last center.

Privacy: every round reads the same batch, so the ``ε_j`` add up (sequential
composition) to at most the call's budget; every ``U_j`` is built from earlier
private outputs and public radii.  ``localize=False`` is the plain-extension
ablation: one round on ``U = W``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from cvxdp.erm.problem import RegularizedERM
from cvxdp.erm.solver import ERMSettings
from cvxdp.geometry import localize as localize_set
from cvxdp.ledger import PrivacyLedger, float_down
from cvxdp.localization.output_perturbation import LocalizationStep, localized_output_perturbation
from cvxdp.localization.profiles import Profile
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.random import NoiseSource


def round_count(d: int, m: int, epsilon: float, lam: float, k: float, G_k: float, D: float,
                max_rounds: int = 8) -> int:
    """``S = ⌈log_{k+1} log(e D / R_⋆)⌉`` (at least 1, at most ``max_rounds``)."""
    r_star = (G_k / lam) * (d / (m * epsilon)) ** (1.0 - 1.0 / k)
    if D <= r_star:
        return 1
    inner = math.log(math.e * D / r_star)
    S = math.ceil(math.log(inner) / math.log(k + 1.0)) if inner > 1 else 1
    return int(min(max(S, 1), max_rounds))


def allocation(S: int, k: float) -> np.ndarray:
    """``θ_j = (1 − a) a^{S−1−j} / (1 − a^S)`` with ``a = 1/(k+1)``; sums to one, less one ulp.

    The shares ``θ_0 … θ_{S−2}`` are the formula's floats; the largest, ``θ_{S−1}``, is
    the exact remainder ``(1 − 2⁻⁵³) − Σ_{j<S−1} θ_j`` rounded down.  So, exactly in
    rational arithmetic, ``Σ θ_j ≤ 1 − u`` with ``u = 2⁻⁵³``, and for *every* float
    ``ε`` the float products satisfy ``Σ_j fl(ε θ_j) ≤ (1 + u) ε Σ θ_j ≤ (1 − u²) ε < ε``
    (each product is correctly rounded, within a factor ``1 + u`` of ``ε θ_j``, as long
    as it is a normal float: ``ε ≥ 10⁻¹⁰`` and ``θ_j ≥ (k + 1)^{−S}`` keep it far above
    ``10⁻³⁰⁰`` for ``k ≤ 1000``, ``S ≤ 8``).  The rounds' charges therefore add up to at most
    the batch's budget in exact arithmetic, which is what the ledger checks; the
    budget left unspent is below ``2⁻⁵²·ε``.
    """
    a = 1.0 / (k + 1.0)
    j = np.arange(S)
    theta = (1.0 - a) * a ** (S - 1 - j) / (1.0 - a**S)
    below_one = Fraction(1) - Fraction(1, 2**53)
    theta[-1] = float_down(below_one - sum((Fraction(float(t)) for t in theta[:-1]), Fraction(0)))
    return theta


@dataclass
class RecursiveResult:
    center: np.ndarray
    steps: list[LocalizationStep]
    final_radius: float


def recursive_localization(model: Model, examples: Examples, *, epsilon: float, lam: float,
                           w0: np.ndarray, k: float, G_k: float, beta: float, profile: Profile,
                           ledger: PrivacyLedger, batch: str, batch_indices: np.ndarray,
                           source: NoiseSource, erm: ERMSettings | None = None,
                           localize: bool = True, phase: int = 0, group: int = 0,
                           max_rounds: int = 8) -> RecursiveResult:
    """Algorithm 3 on one batch of ``m`` examples with budget ``epsilon``."""
    W = model.domain
    d, m, D = model.dim, examples.m, model.diameter
    S = profile.rounds(d=d, m=m, epsilon=epsilon, lam=lam, k=k, G_k=G_k, D=D, beta=beta,
                       max_rounds=max_rounds) if localize else 1
    thetas = allocation(S, k)
    eps_rounds = profile.round_epsilons(epsilon, thetas)
    betas = beta * thetas
    region = W
    R = D
    steps: list[LocalizationStep] = []
    center = W.make_feasible(np.asarray(w0, float))
    for j in range(S):
        plan = profile.plan(R=R, lam=lam, m=m, d=d, eps=float(eps_rounds[j]), beta=float(betas[j]),
                            k=k, G_k=G_k)
        problem = RegularizedERM(model, examples, region, plan.C, lam, w0)
        step = localized_output_perturbation(
            problem, epsilon=float(eps_rounds[j]), beta=float(betas[j]), radius=R, plan=plan,
            ledger=ledger, batch=batch, batch_indices=batch_indices, source=source, erm=erm,
            phase=phase, group=group, round_index=j)
        steps.append(step)
        center = step.center
        if j < S - 1:
            region = localize_set(W, center, plan.radius_plus)
            R = min(2.0 * plan.radius_plus, D, region.diameter)
    return RecursiveResult(center=center, steps=steps, final_radius=steps[-1].plan.radius_plus)
