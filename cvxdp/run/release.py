"""Algorithm 2 — Localized-OutputPert: the one path by which a fit's data reach noise.

Given a public set ``U`` (``W`` or ``W ∩ B(c, r)`` with diameter at most the plan's ``R``) and a
:class:`~cvxdp.plan.profiles.RoundPlan`, :func:`release_round`

1. computes ``w̃``, a *certified* ``α``-minimizer of ``F_{C,U,λ}`` over ``U``
   (:func:`~cvxdp.erm.solver.solve_certified`; an uncertified point is never released — the
   solver refines or raises, and the certificate is checked once more here with
   ``not (gap <= α)``, so a NaN gap cannot pass);
2. checks that the ledger was charged this round's ``ε`` (:func:`charge_plan` charges every round
   of a plan before any noise is drawn) — a release without its charge is refused;
3. releases ``w_loc = Π_W(snap(w̃ + b))`` through the plan's mechanism (ℓ2-Laplace with the
   public scale ``s``, snapped to a grid coarser than the noise's float resolution:
   :meth:`~cvxdp.privacy.mechanisms.L2LaplaceMechanism.release`).

Privacy: ``ε_j``-DP for the batch by the profile's sensitivity argument (see
:meth:`TightProfile.plan <cvxdp.plan.profiles.TightProfile.plan>`); the projection onto ``W`` is
post-processing.  Only ``w_loc`` leaves this function; ``w̃`` and ``b`` do not.  The localization
algorithms, the baselines and the audit all release through here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from cvxdp.erm.problem import ERMCertificate, RegularizedERM
from cvxdp.erm.solver import ERMSettings, solve_certified
from cvxdp.error import CertificationError, PrivacyBudgetError
from cvxdp.geometry import Domain
from cvxdp.plan.planner import BatchPlan, ReleasePlan
from cvxdp.plan.profiles import RoundPlan
from cvxdp.privacy.ledger import LedgerEntry, PrivacyLedger
from cvxdp.privacy.mechanisms import L2LaplaceMechanism, ball_box
from cvxdp.privacy.random import NoiseSource

MECHANISM_LABEL = "localized output perturbation"


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
    certificate: ERMCertificate | None

    @property
    def radius_plus(self) -> float:
        return self.plan.radius_plus


@dataclass
class Charge:
    """A ledger entry for one release, good for one :func:`release_round` only.

    :func:`charge_round` makes it when the ledger accepts the charge; ``release_round`` checks that
    it covers the release's mechanism and the batch it reads, and uses it up, so one charge cannot
    pay for two releases in this process.
    """

    entry: LedgerEntry
    used: bool = False


def charge_round(ledger: PrivacyLedger, plan: RoundPlan, indices: np.ndarray, *, batch: str,
                 mechanism: str = MECHANISM_LABEL, note: str = "") -> Charge:
    """Charge one round's ``ε`` to the examples it reads (refused, exactly, if it would overspend)."""
    return Charge(ledger.charge(plan.epsilon, indices, mechanism=mechanism, batch=batch,
                                sensitivity=plan.sensitivity, noise_scale=plan.noise_scale, note=note))


def charge_plan(ledger: PrivacyLedger, plan: ReleasePlan,
                indices_of: Callable[[BatchPlan], np.ndarray]) -> dict[tuple[int, int], list[Charge]]:
    """Pre-flight: charge every round of ``plan`` before the fit draws any noise.

    The charges are a function of the plan (public) and of which examples each batch reads (a
    public partition); the ledger refuses, exactly, any that would take an example past its total,
    and then nothing of the fit has been released.  Returns the entries per ``(phase, group)``.
    """
    entries: dict[tuple[int, int], list[Charge]] = {}
    for b in plan.batches:
        idx = indices_of(b)
        entries[(b.phase, b.group)] = [
            charge_round(ledger, r, idx, batch=b.label,
                         note=f"phase {b.phase} group {b.group} round {r.round}, C={r.C:.3g}")
            for r in b.rounds]
    return entries


def release_round(problem: RegularizedERM, plan: RoundPlan, *, charge: Charge, source: NoiseSource,
                  erm: ERMSettings | None = None, mechanism: L2LaplaceMechanism | None = None,
                  minimizer: Callable | None = None, snap: bool = True) -> tuple[np.ndarray, ERMCertificate]:
    """Run Algorithm 2 on ``problem`` (its ``region`` is ``U``, its ``C`` and ``λ`` the plan's).

    ``charge`` is this round's :class:`Charge` (:func:`charge_round`), unused: its entry must read
    the problem's ``m`` examples and cover the mechanism — the same sensitivity and noise scale, and
    ``s·ε ≥ Δ`` in exact arithmetic for the ``ε`` it charged — and the problem must be the one the
    plan's sensitivity was computed for (its ``C``, ``λ``, ``m`` and dimension).  A charge used in a
    worker process is marked there, on the worker's copy; the runners hand each charge to one job.
    Any mismatch is refused before the solve and before any noise, and so is a release the grid check
    would refuse (:meth:`~cvxdp.privacy.mechanisms.L2LaplaceMechanism.check_box`: the scale and ``W``'s
    box only, public).  ``mechanism`` defaults to the
    plan's (:meth:`RoundPlan.mechanism`);
    ``minimizer`` (default :func:`~cvxdp.erm.solver.solve_certified`) may be a memo of it on the same
    problem — the audit's cache.  Returns the released point and the certificate (a diagnostic).
    """
    mech = plan.mechanism() if mechanism is None else mechanism
    entry = charge.entry
    # the plan's Δ holds for the problem it was computed for: the same C, λ, m and dimension
    planned = (problem.C == plan.C and problem.lam == plan.lam and problem.m == plan.m
               and problem.dim == plan.dim == mech.dim)
    covered = (not charge.used and entry.n_examples == problem.m and entry.sensitivity == mech.sensitivity
               and entry.noise_scale == mech.scale
               and Fraction(mech.scale) * Fraction(entry.epsilon) >= Fraction(mech.sensitivity))
    if not (planned and covered):
        raise PrivacyBudgetError("the ledger entry of this release does not cover it (used already, another "
                                 "batch, another mechanism, or a problem its plan was not made for); nothing "
                                 "was released.")
    if snap:  # public (the scale, W's box): a release that would be refused is refused before the solve
        mech.check_box(release_box(problem.model.domain))
    charge.used = True
    solve = solve_certified if minimizer is None else minimizer
    w_tilde, cert = solve(problem, plan.alpha, erm)
    if not (cert.gap <= plan.alpha and np.all(np.isfinite(w_tilde))):  # fail closed, before any noise
        raise CertificationError(f"the ERM solver returned a point not certified to α = {plan.alpha:.3e}; "
                                 "nothing was released.")
    w_loc = release_point(w_tilde, mech, problem.model.domain, source, snap)
    del w_tilde
    return w_loc, cert


def release_memoized(problem: RegularizedERM, plan: RoundPlan, solved: tuple[np.ndarray, ERMCertificate],
                     source: NoiseSource, *, mechanism: str = MECHANISM_LABEL, erm: ERMSettings | None = None,
                     snap: bool = True) -> np.ndarray:
    """One release of ``problem`` whose certified minimizer ``solved`` was computed before (audits).

    The minimizer is a deterministic function of the problem, so reusing it leaves the output's law
    unchanged; each call is charged to a fresh one-release ledger and goes through
    :func:`release_round`, the path a fit takes.
    """
    ledger = PrivacyLedger(problem.m, plan.epsilon)
    charge = charge_round(ledger, plan, np.arange(problem.m), batch="all", mechanism=mechanism)
    w, _ = release_round(problem, plan, charge=charge, source=source, erm=erm, snap=snap,
                         minimizer=lambda *_: (np.array(solved[0], copy=True), solved[1]))
    return w


def release_box(domain: Domain) -> tuple[np.ndarray, np.ndarray]:
    """The public box every release onto ``domain`` is clamped and snapped in: its bounding ball's
    :func:`~cvxdp.privacy.mechanisms.ball_box` (:func:`~cvxdp.privacy.mechanisms.release_box_edge` is
    its reach)."""
    return ball_box(*domain.bounding_ball())


def release_point(w_tilde: np.ndarray, mechanism: L2LaplaceMechanism, domain: Domain,
                  source: NoiseSource, snap: bool = True) -> np.ndarray:
    """Step 3 of Algorithm 2: noise, snapping to ``Λ Z^d`` in a box around ``W``, projection onto ``W``.

    Fails closed: a non-finite ``w̃`` is refused before any noise is drawn and a non-finite noise
    sample after (:meth:`L2LaplaceMechanism.release <cvxdp.privacy.mechanisms.L2LaplaceMechanism.release>`);
    the projected point is checked once more — a function of the noisy release alone, so that
    check is post-processing.
    """
    noisy = mechanism.release(w_tilde, source, release_box(domain), snap=snap)
    out = domain.make_feasible(domain.project(noisy))
    if not np.all(np.isfinite(out)):
        raise CertificationError("the projection of the noisy point onto W is not finite; nothing was "
                                 "released.")
    return out


__all__ = ["Charge", "LocalizationStep", "charge_plan", "charge_round", "release_box", "release_memoized",
           "release_point", "release_round"]
