"""Algorithm 2 — Localized-OutputPert.

Given a public set ``U = W ∩ B(c, r)`` with diameter at most ``R``:

1. ``w̃`` ← a *certified* ``α``-minimizer of ``F_{C,U,λ}`` over ``U``
   (:func:`~cvxdp.erm.solver.solve_certified`; an uncertified point is never
   released — the solver refines or raises, and the certificate is checked once
   more here with ``not (gap <= α)``, so a NaN gap cannot pass);
2. the ledger is charged ``ε_j`` for the batch *before* any noise is drawn;
3. ``w_loc = Π_W(snap(w̃ + b))``, ``b`` ℓ2-Laplace with the profile's public scale,
   snapped to a grid coarser than the noise's float resolution
   (:meth:`~cvxdp.mechanisms.L2LaplaceMechanism.release`);
4. ``U⁺ = W ∩ B(w_loc, R⁺)`` with the profile's public radius.

Privacy: ε_j-DP for the batch by the profile's sensitivity argument (see
:meth:`TightProfile.plan <cvxdp.localization.profiles.TightProfile.plan>`); the
projection onto ``W`` is post-processing.  Only ``w_loc`` and public
constants leave this function; ``w̃`` and ``b`` do not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cvxdp.erm.problem import ERMCertificate, RegularizedERM
from cvxdp.erm.solver import ERMSettings, solve_certified
from cvxdp.error import CertificationError
from cvxdp.geometry import Domain
from cvxdp.ledger import PrivacyLedger
from cvxdp.localization.profiles import Profile, RoundPlan
from cvxdp.mechanisms import L2LaplaceMechanism
from cvxdp.random import NoiseSource


@dataclass
class LocalizationStep:
    """The public record of one Algorithm 2 call (plus the data-dependent certificate).

    ``certificate`` holds the certified gap and timings: diagnostics that depend
    on the data and are *not* covered by the privacy guarantee — keep them out
    of anything you publish.
    """

    phase: int
    group: int
    round: int
    m: int
    radius: float
    lam: float
    epsilon: float
    beta: float
    plan: RoundPlan
    center: np.ndarray
    certificate: ERMCertificate

    @property
    def radius_plus(self) -> float:
        return self.plan.radius_plus


def localized_output_perturbation(problem: RegularizedERM, *, epsilon: float, beta: float, radius: float,
                                  plan: RoundPlan, ledger: PrivacyLedger, batch: str,
                                  batch_indices: np.ndarray, source: NoiseSource,
                                  erm: ERMSettings | None = None, phase: int = 0, group: int = 0,
                                  round_index: int = 0, snap: bool = True) -> LocalizationStep:
    """Run Algorithm 2 on ``problem`` (whose ``region`` is ``U`` and ``C`` is ``plan.C``)."""
    w_tilde, cert = solve_certified(problem, plan.alpha, erm)
    if not (cert.gap <= plan.alpha and np.all(np.isfinite(w_tilde))):  # fail closed, before any noise
        raise CertificationError(f"the ERM solver returned a point not certified to α = {plan.alpha:.3e}; "
                                 "nothing was released.")
    mech = L2LaplaceMechanism(plan.sensitivity, plan.sensitivity / plan.noise_scale, problem.dim)
    ledger.charge(epsilon, batch_indices, mechanism="localized output perturbation", batch=batch,
                  sensitivity=plan.sensitivity, noise_scale=plan.noise_scale,
                  note=f"phase {phase} group {group} round {round_index}, C={plan.C:.3g}")
    w_loc = release_point(w_tilde, mech, problem.model.domain, source, snap)
    del w_tilde
    return LocalizationStep(phase=phase, group=group, round=round_index, m=problem.m, radius=radius,
                            lam=problem.lam, epsilon=epsilon, beta=beta, plan=plan, center=w_loc,
                            certificate=cert)


def release_point(w_tilde: np.ndarray, mechanism: L2LaplaceMechanism, domain: Domain,
                  source: NoiseSource, snap: bool = True) -> np.ndarray:
    """Step 3 of Algorithm 2: noise, snapping to ``Λ Z^d`` in a box around ``W``, projection onto ``W``.

    Fails closed: a non-finite ``w̃`` is refused before any noise is drawn and a non-finite noise
    sample after (:meth:`L2LaplaceMechanism.release <cvxdp.mechanisms.L2LaplaceMechanism.release>`);
    the projected point is checked once more — a function of the noisy release alone, so that
    check is post-processing.
    """
    c, r = domain.bounding_ball()
    noisy = mechanism.release(w_tilde, source, (c - r, c + r), snap=snap)
    out = domain.make_feasible(domain.project(noisy))
    if not np.all(np.isfinite(out)):
        raise CertificationError("the projection of the noisy point onto W is not finite; nothing was "
                                 "released.")
    return out


__all__ = ["LocalizationStep", "Profile", "localized_output_perturbation", "release_point"]
