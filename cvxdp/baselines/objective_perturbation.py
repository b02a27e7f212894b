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
Newton method from the public start ``w = 0``, ``J`` falling at every step (no solver status to gate
on: a status is a decision one record could take — a label of 3·10⁶ made Clarabel report the Huber
problem infeasible while its neighbour solved, found by review) and accept the best iterate only if
``||∇J(w)|| / (Λ + Δ)``, with the gradient's rounding charged on its terms — a bound on its distance
to the exact minimizer, by strong convexity — is at most ``tolerance`` (default ``1e-8``); otherwise
:class:`~cvxdp.error.CertificationError`.  Whether the data could decide that is kept out of reach
from both sides: a tolerance within 4× of a *public* bound on the certificate's rounding
(:func:`certificate_floor`, from ``n, d, B``, the loss, ``Λ + Δ`` and the noise) is refused before
the data's residual is read, and scales that overflow float arithmetic are refused as parameters.
Beyond that floor a refusal needs the Newton method itself to stall — not seen in review or tests,
not proven impossible.  That residual distance is *not* covered by the privacy accounting (the usual
state of practice, e.g. diffprivlib); cvxdp's own releases add it to the sensitivity instead.

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
from cvxdp.baselines.output_perturbation import BaselineResult
from cvxdp.error import CertificationError, ParameterError, UncertifiableLossError
from cvxdp.links import HuberLink, LogisticLink
from cvxdp.model import Model
from cvxdp.numerics import row_scales, weighted_row_sum
from cvxdp.privacy.clipped_mean import clip_level, clip_rows
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.mechanisms import L2LaplaceMechanism
from cvxdp.privacy.random import noise_source


@np.errstate(all="ignore")  # no warning or exception a record's magnitudes could decide (cvxdp.problem)
def objective_perturbation(model: Model, data: Mapping, *, epsilon: float, feature_bound: float,
                           regularization: float, random_state: object = None,
                           tolerance: float = 1e-8) -> BaselineResult:
    """ε-DP objective perturbation for a logistic or Huber loss (smooth generalized linear losses).

    ``feature_bound`` ``B`` clips each example's ``a_i`` to norm ``B`` (public);
    ``regularization`` is ``Λ``; ``tolerance`` bounds the distance of the released
    point (before projection onto ``W``) to the exact minimizer.
    """
    eps = privacy_epsilon(epsilon)
    B = clip_level("feature_bound", feature_bound)
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
        lip, curv, reach = link.scale, link.scale / 4.0, 2.0
    else:
        lip, curv, reach = 2.0 * link.M * link.scale, 2.0 * link.scale, link.M + 2.0
    norm = n * B * lip
    c = curv * B / lip * (1.0 + 2.0**-48)
    if not (0.0 < norm < math.inf and 0.0 < c < math.inf and link.scale * reach * reach < math.inf):
        raise ParameterError("objective perturbation: the loss's scale, its Huber threshold or the "
                             "feature bound overflows (or vanishes in) float arithmetic; rescale them.")
    # ℓ = φ(a w + b)/(B lip): gradient norm ≤ 1, Hessian eigenvalue ≤ curv B² / (B lip) = c
    eps_prime, delta = calibration(eps, c, n, lam)
    mu = lam + delta
    ledger = PrivacyLedger(n, eps)
    mech = L2LaplaceMechanism(sensitivity=2.0, epsilon=eps_prime, dim=d)  # density ∝ exp(−ε'||b||/2)
    ledger.charge(eps, np.arange(n), mechanism="objective perturbation", batch="all",
                  sensitivity=2.0, noise_scale=mech.scale,
                  note=f"B={B:.3g}, Λ={lam:.3g}, Δ={delta:.3g}")
    noise = mech.sample(source, 1)[0]
    floor = certificate_floor(n, d, B, lip, curv, reach, mu, float(np.linalg.norm(noise)) / n)
    if not 4.0 * floor <= tolerance:  # NaN fails
        raise CertificationError(
            f"objective perturbation: the tolerance {tolerance:.3g} is within 4x of the rounding floor of "
            f"the certificate ({floor:.3g}, from n, d, B, the loss, the regularization and the noise); "
            "nothing was released. Raise the tolerance or the regularization (both public).")
    w_hat, residual = _polish(np.zeros(d), a, b, link, norm, mu, noise / n)
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
    if not 0.0 < n * lam < math.inf:
        raise ParameterError("objective perturbation: n times the regularization underflows or overflows "
                             "float arithmetic; rescale it.")
    r = c / (n * lam) * up  # 1 + 2r + r² = (1 + r)²: no square of n Λ to overflow (found by review)
    growth = r * (2.0 + r) * up
    eps_prime = math.nextafter((epsilon - math.log1p(growth) * up) * down, 0.0)
    delta = 0.0
    if not eps_prime > 0:  # written so that NaN takes the conservative branch
        delta = max(0.0, (c / (n * math.expm1(epsilon / 4.0) * down) - lam) * up)
        eps_prime = epsilon / 2.0
    return eps_prime, delta


def certificate_floor(n: int, d: int, B: float, lip: float, curv: float, reach: float, mu: float,
                      shift_norm: float) -> float:
    """A bound, from public inputs and the noise only, on the rounding part of :func:`_polish`'s
    certificate ``(||∇J|| + err)/μ`` near the minimizer (``||w|| ≤ R = 2(1 + ||shift||)/μ``).

    ``err`` (per coordinate, its ℓ2 norm taken) has three parts, each bounded without the data:

    * the certified sum ``Σ φ'_i a_i`` — ``γ₁₆ Σ|φ'_i| max_j|a_ij| ≤ 16ε n·lip·B`` in every coordinate
      (``16√d ε`` in ℓ2 — found by review; the exactly rounded total adds ``ε``: taken as
      ``16(√d + 1)ε``) plus absolute floors below ``10⁻²⁹⁰`` per row and column, all divided by
      ``norm = n B lip``;
    * the arguments' rounding — ``|Δφ'_i| ≤ 2 curv δu + 8ε lip`` where ``δu ≤ (d+2)ε(2BR + reach)`` on
      the rows whose derivative can move at all (``|u| ≤ M + δu`` for Huber, since ``|b_i| ≤ |u_i| +
      BR``; for the logistic link its exponential tail bounds ``|b_i|·φ''`` by the same with reach 2),
      weighted by ``||a_i|| ≤ B`` and divided by ``norm``: at most ``(2 curv δu + 8ε lip)/lip``;
    * the last additions — ``8ε(||∇ data term|| + μ||w|| + ||shift||) ≤ 8ε(3 + 3||shift||)``.

    The fit refuses a tolerance below four times this before it reads the data's residual, so whether
    a release happens is not decided by the data's rounding (found by review: the data's own rounding
    charge had been 17–170× the earlier floor).
    """
    e = 2.0**-52
    R = 2.0 * (1.0 + shift_norm) / mu
    du = (d + 2.0) * e * (2.0 * B * R + reach) * (1.0 + 1e-6)
    sums = 16.0 * (math.sqrt(d) + 1.0) * e + 1e-290 * (n + 1.0) * (d + 1.0) / (n * B * lip)
    arguments = (2.0 * curv * du + 8.0 * e * lip) / lip
    last = 8.0 * e * (3.0 + 3.0 * shift_norm)
    return (sums + arguments + last) * (1.0 + 1e-6) / mu


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def _link_change(link, u: np.ndarray, du: np.ndarray) -> np.ndarray:
    """``φ(u + δu) − φ(u)`` per row, from the move ``δu`` itself (never from ``fl(u + δu)`` minus ``u``) and
    without subtracting two large values of ``φ``; ``NaN`` where it is not a number (the Armijo test then
    rejects the step).

    Huber (scale ``c``, threshold ``M``): ``c δu (2u + δu)`` inside; ``±2cM δu`` beyond on one side;
    across a kink the move is split at the kinks — to the edge ``p = clip(u, ±M)`` (``2cM sgn(u)(p − u)``),
    across ``[−M, M]`` by ``s = clip(δ', −M − p, M − p)`` (``c s (2p + s)``), and the rest beyond
    (``2cM sgn(q) δ''``), each part from ``δu`` (found by review: from ``fl(u + δu)`` the error was
    ``c M ulp(M)``, tens of percent of a small move at ``M = 10¹⁰``).  Logistic (``softplus``):
    ``log1p(σ(u) expm1(δu))`` when ``δu ≥ 0`` or ``u ≤ 0``, else ``δu + log1p(σ(−u) expm1(−δu))`` — the
    product stays above ``−1/2``, so no ``log1p(−1) = −∞`` (found by review: ``σ(40) = 1`` and
    ``expm1(−38) = −1`` made the change ``−∞``, Armijo accepted steps that raised ``J``, and one record
    decided whether the fit certified); where ``expm1`` overflows (``|δu| > 709``), ``δu + softplus(−u −
    δu) − softplus(−u)`` for ``u > 0`` (``u`` never cancels) and the plain difference otherwise."""
    u, du = np.asarray(u, float), np.asarray(du, float)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # each branch is computed for
        if isinstance(link, LogisticLink):                                 # every row, then chosen
            rise = (du >= 0) | (u <= 0)
            forward = np.log1p(expit(u) * np.expm1(du))
            backward = du + np.log1p(expit(-u) * np.expm1(-du))
            out = np.where(rise, forward, backward)
            far = np.where(u > 0, du + (_softplus(-(u + du)) - _softplus(-u)),
                           _softplus(u + du) - _softplus(u))
            out = link.scale * np.where(np.isfinite(out), out, far)
        else:
            M, c = link.M, link.scale
            v = u + du
            p = np.clip(u, -M, M)
            to_edge = p - u  # 0 inside; exact near the kink (Sterbenz)
            rest = du - to_edge
            across = np.clip(rest, -M - p, M - p)
            beyond = rest - across
            q_sign = np.sign(p + across)
            split = (2.0 * c * M * np.sign(u) * to_edge + c * across * (2.0 * p + across)
                     + 2.0 * c * M * q_sign * beyond)
            inside = (np.abs(u) <= M) & (np.abs(v) <= M)
            same_side = ((u > M) & (v > M)) | ((u < -M) & (v < -M))
            out = np.where(inside, c * du * (2.0 * u + du),
                           np.where(same_side, 2.0 * c * M * np.sign(u) * du, split))
    return np.where(np.isfinite(out), out, np.nan)


def _polish(w: np.ndarray, a: np.ndarray, b: np.ndarray, link, norm: float, mu: float, shift: np.ndarray,
            steps: int = 200) -> tuple[np.ndarray, float]:
    """Damped Newton steps on ``J(w) = Σ φ(a_i w + b_i)/norm + (μ/2)||w||² + <shift, w>`` from ``w``;
    returns the iterate with the smallest ``||∇J(w)||/μ`` — a bound on its distance to the exact
    minimizer (``J`` is μ-strongly convex), with the gradient's rounding charged on its terms — and
    that bound.

    A step is halved until ``J`` falls by a quarter of the predicted decrease (Armijo, with ``J``'s
    change summed over examples, so ``J`` only falls); the method stops at rounding level or when no
    step passes.  ``J`` is smooth (Huber: piecewise quadratic) and strongly convex, so damped
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
            high, low = link.derivative(u + du), link.derivative(u - du)
            spread = high - low + 4 * eps * (np.abs(high) + np.abs(low))
        spread = np.where(np.isfinite(spread), spread, np.inf)
        total, sum_err = weighted_row_sum(a, dphi, scales)  # certified; error ~16ε, not nε, of the terms
        data_term = total / norm
        g = data_term + mu * x + shift
        err = ((sum_err + np.abs(a).T @ spread * grow) / norm
               + 8 * eps * (np.abs(data_term) + mu * np.abs(x) + np.abs(shift)))
        return g, u, float(np.linalg.norm(err)) * (1.0 + (d + 4.0) * eps)

    def change(x, u, x_new, u_new):
        # J(x_new) − J(x) summed per example, each from its argument's own move δu = <a_i, dx> in a form
        # without cancellation, so the Armijo test sees decreases far below J's own rounding (a label of
        # 1e100 adds exactly 0; a large J does not hide the last steps)
        dx = x_new - x
        total = float(np.sum(_link_change(link, u, a @ dx)) / norm + 0.5 * mu * (dx @ (x_new + x))
                      + shift @ dx)
        return total if math.isfinite(total) else math.nan

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
        if not np.all(np.isfinite(H)):
            break
        step = np.linalg.solve(H, g)
        decrease = float(g @ step)
        if not decrease > 0:  # NaN, or no descent direction left at rounding level
            break
        t = 1.0
        for _ in range(60):
            w_new = w - t * step
            g_new, u_new, err_new = grad(w_new)
            # J must fall (Armijo): accepting a smaller gradient instead let the iterates cycle between
            # two points across Huber's kinks, so whether a fit certified was the data's (found by review)
            if change(w, u, w_new, u_new) <= -0.25 * t * decrease:  # NaN (and so ∓∞) fails
                break
            t *= 0.5
        else:
            break
        w, g, u, err = w_new, g_new, u_new, err_new
    return best_w, best
