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
from cvxdp.geometry import Ball
from cvxdp.ledger import PrivacyLedger
from cvxdp.localization.output_perturbation import release_point
from cvxdp.localization.profiles import certifiable_accuracy
from cvxdp.mechanisms import L2LaplaceMechanism
from cvxdp.model import Model
from cvxdp.random import noise_source


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
    ``Δ/ε`` is ε-DP.  ``C``, ``λ``, ``n``, ``α`` are public.
    """
    eps = privacy_epsilon(epsilon)
    examples = model.bind(data)
    source = noise_source(random_state)
    w_tilde, sensitivity, alpha = clipped_minimizer(model, examples, C=C, lam=lam,
                                                    accuracy_share=accuracy_share, erm=erm)
    n, d, W = examples.m, model.dim, model.domain
    mech = L2LaplaceMechanism(sensitivity, eps, d)
    ledger = PrivacyLedger(n, eps)
    ledger.charge(eps, np.arange(n), mechanism="clipped output perturbation", batch="all",
                  sensitivity=sensitivity, noise_scale=mech.scale, note=f"C={C:.3g}, λ={lam:.3g}")
    w = release_point(w_tilde, mech, W, source)
    return BaselineResult(name="clipped output perturbation", w=w, ledger=ledger,
                          params={"C": C, "lam": lam, "alpha": alpha, "noise_scale": mech.scale})


def clipped_minimizer(model: Model, examples, *, C: float, lam: float, accuracy_share: float = 0.05,
                      erm: ERMSettings | None = None) -> tuple[np.ndarray, float, float]:
    """The certified minimizer of the clipped regularized ERM, its sensitivity ``Δ`` and ``α``.

    Deterministic in the data: callers that release it many times (audits) may reuse it.
    """
    C = positive_finite("C", C)
    lam = positive_finite("lam", lam)
    n, W = examples.m, model.domain
    c, r = W.bounding_ball()
    # the extension's set: a ball 100 times W's, so the extension is that of R^d where it matters
    U = Ball(c, 100.0 * (r + float(np.linalg.norm(c))) + 1.0)
    w0 = W.make_feasible(W.interior_point())
    alpha = max(accuracy_share**2 * C * C / (2.0 * lam * n * n), certifiable_accuracy(C, lam, W.diameter))
    problem = RegularizedERM(model, examples, U, C, lam, w0, w_domain=W)
    w_tilde, _ = solve_certified(problem, alpha, erm)
    sensitivity = 2.0 * C / (lam * n) + 2.0 * float(np.sqrt(2.0 * alpha / lam))
    return w_tilde, sensitivity, alpha
