"""Clipped (extended) output perturbation — Chaudhuri, Monteleoni & Sarwate (2011), one-shot, one C.

Minimize the regularized ERM of the C-Lipschitz extension of the loss over (a
ball far larger than) ``R^d`` — for generalized linear losses exactly the
classical clipping, each example's loss reweighted by ``min(1, C/||∇f||)`` —
with ``w`` in ``W``, then release it with ℓ2-Laplace noise of scale
``Δ/ε``, ``Δ = 2C/(λn) + 2 sqrt(2α/λ)``.  The minimizer is certified by the
same machinery as cvxdp's own steps and released through the same snapped
release, so the comparison isolates the *algorithm*: one shot, one ``C``, no
localization.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cvxdp._validation import positive_finite, privacy_epsilon
from cvxdp.erm import ERMSettings, RegularizedERM, solve_certified
from cvxdp.erm.translation import TranslatedERM, regularized_erm
from cvxdp.geometry import Ball
from cvxdp.model import Model
from cvxdp.plan.profiles import RoundPlan, certifiable_accuracy, output_sensitivity
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.mechanisms import laplace_scale
from cvxdp.privacy.random import noise_source
from cvxdp.run.release import charge_round, release_box, release_round


@dataclass
class BaselineResult:
    """A baseline's private output and what it spent."""

    name: str
    w: np.ndarray
    ledger: PrivacyLedger
    params: dict = field(default_factory=dict)


def clipped_output_perturbation(model: Model, data: Mapping, *, epsilon: float, C: float, lam: float,
                                random_state: object = None, accuracy_share: float = 0.05,
                                erm: ERMSettings | None = None) -> BaselineResult:
    """One-shot output perturbation of the C-extended (clipped) regularized ERM.

    Parameters
    ----------
    C:
        Clipping level (the extension's Lipschitz constant) — a public tuning knob.
    lam:
        Regularization ``λ`` (public).
    accuracy_share:
        ``κ`` in ``α = κ² C²/(2λn²)``: the certified optimization error inflates the
        sensitivity by ``1 + κ``.

    Privacy: each example enters through a C-Lipschitz term weighted ``1/n`` of a
    λ-strongly convex objective over ``W``, so the (α-accurate) minimizers of
    neighbouring data sets are within ``Δ``; the ℓ2-Laplace release with scale
    ``Δ/ε`` is ε-DP.  ``C``, ``λ``, ``n``, ``α`` are public.  The release goes through
    :func:`~cvxdp.run.release.release_round`, cvxdp's own release path.
    """
    eps = privacy_epsilon(epsilon)
    examples = model.bind(data)
    source = noise_source(random_state)
    # the plan first: it refuses what the release would (public), before the charge and the solve
    plan = clipped_plan(model, examples.m, epsilon=eps, C=C, lam=lam, accuracy_share=accuracy_share)
    problem = clipped_problem(model, examples, C=C, lam=lam)
    ledger = PrivacyLedger(examples.m, eps)
    entry = charge_round(ledger, plan, np.arange(examples.m), batch="all",
                         mechanism="clipped output perturbation", note=f"C={plan.C:.3g}, λ={lam:.3g}")
    w, _ = release_round(problem, plan, charge=entry, source=source, erm=erm)
    return BaselineResult(name="clipped output perturbation", w=w, ledger=ledger,
                          params={"C": plan.C, "lam": lam, "alpha": plan.alpha,
                                  "noise_scale": plan.noise_scale})


def clipped_plan(model: Model, n: int, *, epsilon: float, C: float, lam: float,
                 accuracy_share: float = 0.05) -> RoundPlan:
    """The public constants of the one release: ``α``, ``Δ = 2C/(λn) + 2 sqrt(2α/λ)``, ``s = Δ/ε``.

    Refuses (public: the scale and ``W``'s box) a release whose grid the mechanism would refuse
    (:meth:`~cvxdp.privacy.mechanisms.L2LaplaceMechanism.check_box`), so a caller learns it before
    its charge and its solve."""
    C = positive_finite("C", C)
    lam = positive_finite("lam", lam)
    W = model.domain
    alpha = max(accuracy_share**2 * C * C / (2.0 * lam * n * n), certifiable_accuracy(C, lam, W.diameter))
    sensitivity = float(output_sensitivity(C, lam, n, alpha))
    nan = float("nan")
    plan = RoundPlan(C=C, alpha=alpha, sensitivity=sensitivity,
                     noise_scale=float(laplace_scale(sensitivity, epsilon)),
                     radius_plus=nan, bias_radius=nan, noise_radius=nan, accuracy_radius=nan,
                     epsilon=epsilon, lam=lam, m=n, dim=model.dim, radius=W.diameter)
    plan.mechanism().check_box(release_box(W))
    return plan


def clipped_problem(model: Model, examples, *, C: float, lam: float) -> RegularizedERM | TranslatedERM:
    """The C-extended regularized ERM over ``W``, the extension taken on ``U = B(c, 100 r + 1)`` around
    ``W``'s bounding ball ``B(c, r)``.

    On that ball the extension is that of ``R^d`` where it matters; ``w₀`` is ``W``'s interior point.
    Any ``U ⊇ W`` keeps every term C-Lipschitz on ``W`` (the privacy argument); ``U`` is centred on ``W``
    so that a domain far from 0 is solved in a public frame at ``c``
    (:func:`~cvxdp.erm.translation.regularized_erm`).  Its radius once grew with ``||c||`` too, which kept
    ``U`` around 0, never translated: on a ball of radius 10⁻³ at 10¹² the certified solve failed after
    the charge (review helper-44).  For ``c = 0`` the two agree.
    """
    W = model.domain
    c, r = W.bounding_ball()
    U = Ball(c, 100.0 * r + 1.0)
    w0 = W.make_feasible(W.interior_point())
    return regularized_erm(model, examples, U, positive_finite("C", C), positive_finite("lam", lam), w0,
                           w_domain=W)


def clipped_minimizer(model: Model, examples, *, C: float, lam: float, accuracy_share: float = 0.05,
                      erm: ERMSettings | None = None) -> tuple[np.ndarray, float, float]:
    """The certified minimizer of the clipped regularized ERM, its sensitivity ``Δ`` and ``α``.

    Deterministic in the data (a utility reference for the data sets' bias curves).
    """
    plan = clipped_plan(model, examples.m, epsilon=1.0, C=C, lam=lam, accuracy_share=accuracy_share)
    w_tilde, _ = solve_certified(clipped_problem(model, examples, C=C, lam=lam), plan.alpha, erm)
    return w_tilde, plan.sensitivity, plan.alpha
