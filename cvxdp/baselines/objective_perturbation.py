"""Objective perturbation for smooth losses — Chaudhuri, Monteleoni & Sarwate (2011), Algorithm 2.

For a loss whose per-example gradient has norm ≤ 1 and whose Hessian is rank
one with eigenvalue ≤ ``c`` (generalized linear losses with a smooth link
after clipping features to ``||x|| ≤ B`` and dividing by ``B·Lip(φ)``), minimize

    (1/n) Σ ℓ(w, z_i) + (Λ/2)||w||² + <b, w>/n + (Δ/2)||w||²

with ``b`` of density ``∝ exp(−ε'||b||/2)``, where ``ε' = ε − log(1 + 2c/(nΛ) + c²/(n²Λ²))``
and ``Δ = 0`` if ``ε' > 0``; otherwise ``Δ = c/(n(e^{ε/4} − 1)) − Λ`` and ``ε' = ε/2``.
The released model is the minimizer projected onto ``W`` (post-processing).
This is the mechanism behind diffprivlib's ``LogisticRegression``.

The privacy proof assumes the *exact* unconstrained minimizer.  We solve with
CVXPY + Clarabel at tight tolerances, refuse any status but ``optimal``, polish
with Newton steps on the smooth objective, and accept the point only if
``||∇J(w)|| / (Λ + Δ)`` — a bound on its distance to the exact minimizer, by
strong convexity — is at most ``tolerance`` (default ``1e-8``); otherwise
:class:`~cvxdp.error.CertificationError`.  That residual distance is *not*
covered by the privacy accounting (the usual state of practice, e.g.
diffprivlib); cvxdp's own releases add it to the sensitivity instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import cvxpy as cp
import numpy as np
from scipy.special import expit

from cvxdp._validation import positive_finite, privacy_epsilon
from cvxdp.baselines.output_perturbation import BaselineResult
from cvxdp.error import CertificationError, UncertifiableLossError
from cvxdp.links import HuberLink, LogisticLink
from cvxdp.model import Model
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
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    a = a * np.minimum(1.0, B / np.maximum(norms, 1e-300))
    if isinstance(link, LogisticLink):
        lip, curv = link.scale, link.scale / 4.0
    else:
        lip, curv = 2.0 * link.M * link.scale, 2.0 * link.scale
    # ℓ = φ(a w + b)/(B lip): gradient norm ≤ 1, Hessian eigenvalue ≤ curv B² / (B lip)
    c = curv * B / lip
    eps_prime = eps - math.log(1.0 + 2.0 * c / (n * lam) + c * c / (n * n * lam * lam))
    delta = 0.0
    if not eps_prime > 0:  # public; written so that NaN takes the conservative branch
        delta = c / (n * (math.exp(eps / 4.0) - 1.0)) - lam
        eps_prime = eps / 2.0
    mech = L2LaplaceMechanism(sensitivity=2.0, epsilon=eps_prime, dim=d)  # density ∝ exp(−ε'||b||/2)
    noise = mech.sample(source, 1)[0]
    ledger = PrivacyLedger(n, eps)
    ledger.charge(eps, np.arange(n), mechanism="objective perturbation", batch="all",
                  sensitivity=2.0, noise_scale=mech.scale,
                  note=f"B={B:.3g}, Λ={lam:.3g}, Δ={delta:.3g}")
    w = cp.Variable(d)
    u = a @ w + b
    per = link.scale * (cp.logistic(u) if isinstance(link, LogisticLink) else cp.huber(u, link.M))
    obj = cp.sum(per) / (n * B * lip) + (lam + delta) / 2.0 * cp.sum_squares(w) + noise @ w / n
    prob = cp.Problem(cp.Minimize(obj))
    try:
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    except cp.SolverError as exc:
        raise CertificationError(f"objective perturbation: the solver failed ({exc}); nothing was "
                                 "released.") from exc
    if prob.status != cp.OPTIMAL or w.value is None:
        raise CertificationError(f"objective perturbation: solver status {prob.status!r}, not an exact "
                                 "minimizer; nothing was released.")
    w_hat, residual = _polish(np.asarray(w.value, float), a, b, link, n * B * lip, lam + delta, noise / n)
    if not residual <= tolerance:  # NaN fails
        raise CertificationError(
            f"objective perturbation: the point could not be certified within the tolerance "
            f"{tolerance:.3g} of the exact minimizer; nothing was released. Raise the tolerance (public) "
            "or use clipped_output_perturbation, which folds its optimization error into the sensitivity.")
    if not np.all(np.isfinite(w_hat)):
        raise CertificationError("objective perturbation: the minimizer is not finite; nothing was released.")
    W = model.domain
    w_out = W.make_feasible(W.project(w_hat))
    return BaselineResult(name="objective perturbation", w=w_out, ledger=ledger,
                          params={"feature_bound": B, "regularization": lam, "delta": delta,
                                  "epsilon_prime": eps_prime, "distance_to_exact_minimizer": residual})


def _polish(w: np.ndarray, a: np.ndarray, b: np.ndarray, link, norm: float, mu: float, shift: np.ndarray,
            steps: int = 20) -> tuple[np.ndarray, float]:
    """Newton steps on ``J(w) = Σ φ(a_i w + b_i)/norm + (μ/2)||w||² + <shift, w>``; returns ``w`` and
    ``||∇J(w)||/μ``, a bound on the distance to the exact minimizer (``J`` is μ-strongly convex), with
    the gradient's rounding charged on its terms."""
    eps = float(np.finfo(float).eps)

    def grad(x):
        u = a @ x + b
        dphi = link.derivative(u)
        g = a.T @ dphi / norm + mu * x + shift
        err = (a.shape[0] + a.shape[1] + 8) * eps * (np.abs(a).T @ np.abs(dphi) / norm + mu * np.abs(x)
                                                    + np.abs(shift))
        return g, u, float(np.linalg.norm(err))

    best_w, best = w, math.inf
    for _ in range(steps):
        g, u, err = grad(w)
        bound = (float(np.linalg.norm(g)) + err) / mu
        if bound < best:
            best_w, best = w, bound
        if bound <= 1e-15 * (1.0 + float(np.linalg.norm(w))):
            break
        if isinstance(link, LogisticLink):
            p = expit(u)
            curv = link.scale * p * (1.0 - p)
        else:
            curv = np.where(np.abs(u) <= link.M, 2.0 * link.scale, 0.0)
        H = (a.T * curv) @ a / norm + mu * np.eye(a.shape[1])
        w = w - np.linalg.solve(H, g)
    return best_w, best
