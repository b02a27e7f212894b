"""Noisy clipped gradient descent with ℓ2-Laplace noise and basic composition.

``T`` full-batch steps ``w ← Π_W(w − η (ḡ + b_t))`` where ``ḡ`` averages the
per-example gradients clipped to norm ``C`` and ``b_t`` is ℓ2-Laplace noise.
Replacing one example moves ``ḡ`` by at most ``2C/n``, so each step with
scale ``s = 2C T/(nε)`` is ``ε/T``-DP and the ``T`` steps compose (basic,
sequential composition — the only one pure DP has) to ε.  In floating point each
step spends ``equal_share(ε, T)`` (``ε/T`` or the float just below it, so ``T``
steps never exceed ε exactly) with the scale computed from that share.  The output is the
average iterate (post-processing).

Fail closed without a data-dependent refusal: each example's gradient is clipped by
a per-example map (:func:`clip_rows`) that sends a non-finite gradient to ``0``, so a
NaN can neither poison the mean nor, through it, the released point; the noise and
the released point are checked by the mechanism.  The clipping, the mean (each coordinate's sum
exact, divided once) and its sensitivity are :mod:`cvxdp.privacy.clipped_mean`'s, shared with the
affine plan (:mod:`cvxdp.plan.mean_gradient`).

This is the standard clipped-gradient route; under pure DP its private error
decays only like the *square root* of the optimal heavy-tailed term, which is
the gap cvxdp closes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from cvxdp._validation import positive_finite, positive_int, privacy_epsilon
from cvxdp.baselines.output_perturbation import BaselineResult
from cvxdp.erm.adaptive_subgradient import loss_subgradients
from cvxdp.model import Model
from cvxdp.privacy.clipped_mean import clip_level, clip_rows, clipped_mean
from cvxdp.privacy.clipped_mean import mean_sensitivity as gd_sensitivity
from cvxdp.privacy.ledger import PrivacyLedger, equal_share
from cvxdp.privacy.mechanisms import L2LaplaceMechanism
from cvxdp.privacy.random import noise_source


@np.errstate(all="ignore")  # no warning or exception a record's magnitudes could decide (cvxdp.problem)
def noisy_clipped_gd(model: Model, data: Mapping, *, epsilon: float, C: float, steps: int,
                     step_size: float | None = None, random_state: object = None) -> BaselineResult:
    """ε-DP noisy clipped gradient descent on ``(1/n) Σ f(w, z_i)`` over ``W``.

    ``step_size`` defaults to ``D / sqrt(T (C² + E||b||²))`` (``E||b||² = d(d+1)s²``),
    the minimizer of the standard projected-subgradient bound.
    """
    eps = privacy_epsilon(epsilon)
    C = clip_level("C", C)
    T = positive_int("steps", steps)
    examples = model.bind(data)
    source = noise_source(random_state)
    n, d, W = examples.m, model.dim, model.domain
    sensitivity = gd_sensitivity(C, n)
    eps_step = equal_share(eps, T)  # the largest float with T · eps_step ≤ ε exactly (public)
    mech = L2LaplaceMechanism(sensitivity, eps_step, d)
    s = mech.scale
    if step_size is None:  # D/sqrt(T(C² + d(d+1)s²)), written so that a small C does not underflow C²
        step_size = W.diameter / (C * math.sqrt(T * (1.0 + d * (d + 1) * (s / C) ** 2)))
    eta = positive_finite("step_size", step_size)
    ledger = PrivacyLedger(n, eps)
    all_idx = np.arange(n)
    w = W.make_feasible(W.interior_point())
    total = np.zeros(d)
    box = (np.full(d, -C), np.full(d, C))  # the clipped mean gradient lies in this public box
    mech.check_box(box)  # public: a release the grid would refuse is refused before any charge
    for t in range(T):
        grads = loss_subgradients(examples, np.broadcast_to(w, (n, d)))
        clipped = clip_rows(grads, C)
        ledger.charge(eps_step, all_idx, mechanism="noisy clipped gradient", batch="all",
                      sensitivity=sensitivity, noise_scale=s, note=f"step {t + 1}/{T}")
        noisy = mech.release(clipped_mean(clipped), source, box)
        w = W.make_feasible(W.project(w - eta * noisy))
        total += w
    return BaselineResult(name="noisy clipped GD", w=W.make_feasible(total / T), ledger=ledger,
                          params={"C": C, "steps": T, "step_size": eta, "noise_scale": s})


__all__ = ["clip_rows", "clipped_mean", "gd_sensitivity", "noisy_clipped_gd"]
