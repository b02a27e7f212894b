"""Objective perturbation for smooth losses — Chaudhuri, Monteleoni & Sarwate (2011), Algorithm 2.

For a loss whose per-example gradient has norm ≤ 1 and whose Hessian is rank
one with eigenvalue ≤ ``c`` (generalized linear losses with a smooth link
after clipping features to ``||x|| ≤ B`` and dividing by ``B·Lip(φ)``), minimize

    (1/n) Σ ℓ(w, z_i) + (Λ/2)||w||² + <b, w>/n + (Δ/2)||w||²

with ``b`` of density ``∝ exp(−ε'||b||/2)``, where ``ε' = ε − log(1 + 2c/(nΛ) + c²/(n²Λ²))``
and ``Δ = 0`` if ``ε' > 0``; otherwise ``Δ = c/(n(e^{ε/4} − 1)) − Λ`` and ``ε' = ε/2``.
The released model is the minimizer projected onto ``W`` (post-processing).
This is the mechanism behind diffprivlib's ``LogisticRegression``.

The privacy proof assumes the *exact* unconstrained minimizer.  We minimize with our own damped
Newton method from the public start ``w = 0`` (no solver status to gate on: a status is a decision
one record could take — a label of 3·10⁶ made Clarabel report the Huber problem infeasible while its
neighbour solved, found by review) and accept the best iterate only if ``||∇J(w)|| / (Λ + Δ)``, with
the gradient's rounding charged on its terms — a bound on its distance to the exact minimizer, by
strong convexity — is at most ``tolerance`` (default ``1e-8``); otherwise
:class:`~cvxdp.error.CertificationError`.  Every per-example term of ``∇J`` is bounded (the clipped
``a_i`` times a bounded derivative), so the iteration converges to rounding level whatever the
labels; the refusal is a fail-safe, not an expected outcome.  That residual distance is *not* covered
by the privacy accounting (the usual state of practice, e.g. diffprivlib); cvxdp's own releases add
it to the sensitivity instead.

The constants are rounded the safe way: each ``a_i`` is clipped to norm ``B`` by a factor shrunk
below its rounding (as :func:`~cvxdp.baselines.noisy_gd.clip_rows` does), the curvature bound ``c``
and the added regularization ``Δ`` are moved up, and ``ε'`` down, so that the proof's inequalities
hold in exact arithmetic and the mechanism never spends more than the ``ε`` it charges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.special import expit

from cvxdp._validation import positive_finite, privacy_epsilon
from cvxdp.baselines.noisy_gd import clip_rows
from cvxdp.baselines.output_perturbation import BaselineResult
from cvxdp.error import CertificationError, UncertifiableLossError
from cvxdp.links import HuberLink, LogisticLink
from cvxdp.model import Model
from cvxdp.numerics import row_scales, weighted_row_sum
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.mechanisms import L2LaplaceMechanism
from cvxdp.privacy.random import noise_source


def objective_perturbation(model: Model, data: Mapping, *, epsilon: float, feature_bound: float,
                           regularization: float, random_state: object = None,
                           tolerance: float = 1e-8) -> BaselineResult:
    """ε-DP objective perturbation for a logistic or Huber loss (smooth generalized linear losses).

    ``feature_bound`` ``B`` clips each example's ``a_i`` to norm ``B`` (public);
    ``regularization`` is ``Λ``; ``tolerance`` bounds the distance of the released
    point (before projection onto ``W``) to the exact minimizer.
    """
    eps = privacy_epsilon(epsilon)
    B = positive_finite("feature_bound", feature_bound)
    lam = positive_finite("regularization", regularization)
    tolerance = positive_finite("tolerance", tolerance)
    examples = model.bind(data)
    glm = examples.glm()
    if glm is None or not isinstance(glm[2], LogisticLink | HuberLink):
        raise UncertifiableLossError("objective perturbation needs a smooth Lipschitz generalized linear "
                                     "loss (logistic or Huber).")
    a, b, link = glm
    n, d = a.shape
    source = noise_source(random_state)
    a = clip_rows(a, B)
    if isinstance(link, LogisticLink):
        lip, curv = link.scale, link.scale / 4.0
    else:
        lip, curv = 2.0 * link.M * link.scale, 2.0 * link.scale
    # ℓ = φ(a w + b)/(B lip): gradient norm ≤ 1, Hessian eigenvalue ≤ curv B² / (B lip)
    eps_prime, delta = calibration(eps, curv * B / lip * (1.0 + 2.0**-48), n, lam)
    ledger = PrivacyLedger(n, eps)
    mech = L2LaplaceMechanism(sensitivity=2.0, epsilon=eps_prime, dim=d)  # density ∝ exp(−ε'||b||/2)
    ledger.charge(eps, np.arange(n), mechanism="objective perturbation", batch="all",
                  sensitivity=2.0, noise_scale=mech.scale,
                  note=f"B={B:.3g}, Λ={lam:.3g}, Δ={delta:.3g}")
    noise = mech.sample(source, 1)[0]
    mu = lam + delta
    # the rounding floor of the certificate's sums, from public inputs and the noise only: per coordinate
    # at most ~(16 + 8)·ε_mach·(Σ|φ'_i| max_j|a_ij|/norm + μ|w| + |shift|), where the first term is ≤ 1
    # (each ||a_i|| ≤ B, |φ'| ≤ lip) and μ||w|| ≤ 1 + ||shift|| near the minimizer (taken twice).  A
    # tolerance within 4× of it is refused here, so the data's residual is not held at that floor
    shift_norm = float(np.linalg.norm(noise)) / n
    floor = 32 * 2.0**-52 * math.sqrt(d) * (3.0 + 3.0 * shift_norm) / mu
    if not 4.0 * floor <= tolerance:
        raise CertificationError(
            f"objective perturbation: the tolerance {tolerance:.3g} is within 4x of the rounding floor of "
            f"the certificate ({floor:.3g}, from n, d, the regularization and the noise); nothing was "
            "released. Raise the tolerance or the regularization (both public).")
    w_hat, residual = _polish(np.zeros(d), a, b, link, n * B * lip, mu, noise / n)
    if not residual <= tolerance:  # NaN fails
        raise CertificationError(
            f"objective perturbation: the point could not be certified within the tolerance "
            f"{tolerance:.3g} of the exact minimizer; nothing was released. Raise the tolerance (public) "
            "or use clipped_output_perturbation, which folds its optimization error into the sensitivity.")
    if not np.all(np.isfinite(w_hat)):
        raise CertificationError("objective perturbation: the minimizer is not finite; nothing was released.")
    W = model.domain
    w_out = W.make_feasible(W.project(w_hat))
    # public inputs and their functions only: the residual itself depends on the data
    return BaselineResult(name="objective perturbation", w=w_out, ledger=ledger,
                          params={"feature_bound": B, "regularization": lam, "delta": delta,
                                  "epsilon_prime": eps_prime, "tolerance": tolerance})


def calibration(epsilon: float, c: float, n: int, lam: float) -> tuple[float, float]:
    """``(ε', Δ)`` of Chaudhuri et al.'s Algorithm 2 for the curvature bound ``c``, ``n`` examples and
    the regularization ``Λ``, rounded the safe way: ``ε'`` is at most its exact value and ``Δ`` at least
    its exact value (each formula is a few operations, each within ``2⁻⁵³``; ``2⁻⁴⁸`` covers them), so
    the mechanism spends no more than the ``ε`` charged.  Public: a function of public inputs only.

    ``ε' = ε − log(1 + 2c/(nΛ) + c²/(n²Λ²))``; when that is not positive, ``ε' = ε/2`` and
    ``Δ = c/(n(e^{ε/4} − 1)) − Λ`` (else ``Δ = 0``).
    """
    up, down = 1.0 + 2.0**-48, 1.0 - 2.0**-48
    growth = (2.0 * c / (n * lam) + c * c / (n * n * lam * lam)) * up
    eps_prime = math.nextafter((epsilon - math.log1p(growth) * up) * down, 0.0)
    delta = 0.0
    if not eps_prime > 0:  # written so that NaN takes the conservative branch
        delta = max(0.0, (c / (n * math.expm1(epsilon / 4.0) * down) - lam) * up)
        eps_prime = epsilon / 2.0
    return eps_prime, delta


def _polish(w: np.ndarray, a: np.ndarray, b: np.ndarray, link, norm: float, mu: float, shift: np.ndarray,
            steps: int = 60) -> tuple[np.ndarray, float]:
    """Damped Newton steps on ``J(w) = Σ φ(a_i w + b_i)/norm + (μ/2)||w||² + <shift, w>`` from ``w``;
    returns the iterate with the smallest ``||∇J(w)||/μ`` — a bound on its distance to the exact
    minimizer (``J`` is μ-strongly convex), with the gradient's rounding charged on its terms — and
    that bound.

    A step is halved until ``J`` falls by a quarter of the predicted decrease (Armijo, with ``J``'s
    change summed over examples) or the gradient shrinks; the method stops at rounding level or when
    neither happens.  ``J`` is smooth (Huber: piecewise quadratic) and strongly convex, so damped
    Newton converges from any start."""
    eps = float(np.finfo(float).eps)

    d = a.shape[1]
    scales = row_scales(a)
    grow = 1.0 + (a.shape[0] + 4.0) * eps

    def grad(x):
        u = a @ x + b
        dphi = link.derivative(u)
        # φ' is nondecreasing: at the exact argument (within δu of the computed one) it lies between its
        # values at u ± δu, each within 4ε of itself — so a row whose argument stays where φ' is flat (a
        # label far out) costs nothing
        du = (d + 2) * eps * (np.abs(a) @ np.abs(x) + np.abs(b)) * grow
        with np.errstate(over="ignore", invalid="ignore"):
            spread = (link.derivative(u + du) - link.derivative(u - du)
                      + 4 * eps * (np.abs(link.derivative(u + du)) + np.abs(link.derivative(u - du))))
        spread = np.where(np.isfinite(spread), spread, np.inf)
        total, sum_err = weighted_row_sum(a, dphi, scales)  # certified; error ~16ε, not nε, of the terms
        data_term = total / norm
        g = data_term + mu * x + shift
        err = ((sum_err + np.abs(a).T @ spread * grow) / norm
               + 8 * eps * (np.abs(data_term) + mu * np.abs(x) + np.abs(shift)))
        return g, u, float(np.linalg.norm(err)) * (1.0 + (d + 4.0) * eps)

    def change(x, u, x_new, u_new):
        # J(x_new) − J(x) as a sum of per-example differences: a row whose argument does not move (a
        # label of 1e100 absorbs any <a, x>) adds exactly 0 instead of hiding the others' decrease in
        # the rounding of a huge total
        dx = x_new - x
        return float(np.sum(link.value(u_new) - link.value(u)) / norm + 0.5 * mu * (dx @ (x_new + x))
                     + shift @ dx)

    best_w, best = w, math.inf
    g, u, err = grad(w)
    for _ in range(steps):
        gnorm = float(np.linalg.norm(g))
        bound = (gnorm + err) / mu
        if bound < best:
            best_w, best = w, bound
        if not np.isfinite(bound) or gnorm <= err:
            break
        if isinstance(link, LogisticLink):
            p = expit(u)
            curv = link.scale * p * (1.0 - p)
        else:
            curv = np.where(np.abs(u) <= link.M, 2.0 * link.scale, 0.0)
        H = (a.T * curv) @ a / norm + mu * np.eye(a.shape[1])
        step = np.linalg.solve(H, g)
        decrease = float(g @ step)
        t = 1.0
        for _ in range(40):
            w_new = w - t * step
            g_new, u_new, err_new = grad(w_new)
            if change(w, u, w_new, u_new) <= -0.25 * t * decrease or float(np.linalg.norm(g_new)) < gnorm:
                break
            t *= 0.5
        else:
            break
        w, g, u, err = w_new, g_new, u_new, err_new
    return best_w, best
