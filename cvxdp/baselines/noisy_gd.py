"""Noisy clipped gradient descent with ℓ2-Laplace noise and basic composition.

``T`` full-batch steps ``w ← Π_W(w − η (ḡ + b_t))`` where ``ḡ`` averages the
per-example gradients clipped to norm ``C`` and ``b_t`` is ℓ2-Laplace noise.
Replacing one example moves ``ḡ`` by at most ``2C/n``, so each step with
scale ``s = 2C T/(nε)`` is ``ε/T``-DP and the ``T`` steps compose (basic,
sequential composition — the only one pure DP has) to ε.  The output is the
average iterate (post-processing).

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
from cvxdp.ledger import PrivacyLedger
from cvxdp.mechanisms import L2LaplaceMechanism
from cvxdp.model import Model
from cvxdp.random import noise_source


def noisy_clipped_gd(model: Model, data: Mapping, *, epsilon: float, C: float, steps: int,
                     step_size: float | None = None, random_state: object = None) -> BaselineResult:
    """ε-DP noisy clipped gradient descent on ``(1/n) Σ f(w, z_i)`` over ``W``.

    ``step_size`` defaults to ``D / sqrt(T (C² + E||b||²))`` (``E||b||² = d(d+1)s²``),
    the minimizer of the standard projected-subgradient bound.
    """
    eps = privacy_epsilon(epsilon)
    C = positive_finite("C", C)
    T = positive_int("steps", steps)
    examples = model.bind(data)
    source = noise_source(random_state)
    n, d, W = examples.m, model.dim, model.domain
    sensitivity = 2.0 * C / n
    mech = L2LaplaceMechanism(sensitivity, eps / T, d)
    s = mech.scale
    eta = step_size if step_size is not None else W.diameter / math.sqrt(T * (C * C + d * (d + 1) * s * s))
    eta = positive_finite("step_size", eta)
    ledger = PrivacyLedger(n, eps)
    all_idx = np.arange(n)
    w = W.make_feasible(W.interior_point())
    total = np.zeros(d)
    box = (np.full(d, -C), np.full(d, C))  # the clipped mean gradient lies in this public box
    for t in range(T):
        grads = loss_subgradients(examples, np.broadcast_to(w, (n, d)))
        norms = np.linalg.norm(grads, axis=1, keepdims=True)
        clipped = grads * np.minimum(1.0, C / np.maximum(norms, 1e-300))
        ledger.charge(eps / T, all_idx, mechanism="noisy clipped gradient", batch="all",
                      sensitivity=sensitivity, noise_scale=s, note=f"step {t + 1}/{T}")
        noisy = mech.release(clipped.mean(axis=0), source, box)
        w = W.make_feasible(W.project(w - eta * noisy))
        total += w
    return BaselineResult(name="noisy clipped GD", w=W.make_feasible(total / T), ledger=ledger,
                          params={"C": C, "steps": T, "step_size": eta, "noise_scale": s})
