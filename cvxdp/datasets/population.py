"""Exact (quadrature) population risks of the synthetic tasks.

Every task's population risk depends on ``w`` only through one or two scalars
(rotation invariance of the feature laws), so it is a low-dimensional integral
evaluated with Gaussian quadrature rules matched to each density:

* ``E|μ + σZ| = σ sqrt(2/π) e^{−μ²/(2σ²)} + μ (2Φ(μ/σ) − 1)`` for ``Z ~ N(0, 1)``;
* a multivariate Student-t's projection ``<x, v>`` is ``||v|| · t_ν``, and
  ``t_ν = Z / sqrt(V/ν)`` with ``V ~ χ²_ν``: generalized Gauss–Laguerre in ``V``;
* the first coordinate of a uniform unit vector in ``R^d`` has density
  ``∝ (1 − t²)^{(d−3)/2}``: Gauss–Jacobi;
* a Pareto(``a``, scale ``s``) radius is ``s u^{−1/a}`` with ``u`` uniform:
  Gauss–Jacobi with weight ``u^{−1/a}`` absorbs the singularity at ``u → 0``;
* a χ_d radius: generalized Gauss–Laguerre in ``R²/2``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats


def abs_gaussian_mean(mu: np.ndarray, sigma: float) -> np.ndarray:
    """``E|μ + σZ|`` for ``Z ~ N(0, 1)``."""
    mu = np.asarray(mu, float)
    if sigma == 0:
        return np.abs(mu)
    z = mu / sigma
    return sigma * math.sqrt(2.0 / math.pi) * np.exp(-0.5 * z * z) + mu * special.erf(z / math.sqrt(2.0))


@lru_cache(maxsize=32)
def _laguerre(n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    x, w = special.roots_genlaguerre(n, alpha)
    return x, w / special.gamma(alpha + 1.0)


@lru_cache(maxsize=32)
def _sphere_coordinate(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and probability weights of the first coordinate of a uniform unit vector in ``R^d``."""
    if d == 1:
        return np.array([-1.0, 1.0]), np.array([0.5, 0.5])
    if d == 2:
        # density 1/(π sqrt(1 − t²)): Gauss–Chebyshev
        k = np.arange(1, n + 1)
        return np.cos((2 * k - 1) * np.pi / (2 * n)), np.full(n, 1.0 / n)
    a = (d - 3) / 2.0
    t, w = special.roots_jacobi(n, a, a)
    return t, w / w.sum()


@lru_cache(maxsize=32)
def _pareto(n: int, index: float, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``ρ_j`` and weights ``w_j`` with ``E h(ρ) ≈ Σ w_j h(ρ_j)`` for ``ρ ~ Pareto(index, scale)``."""
    # u in (0, 1], ρ = s u^{-1/a}; weight u^{-1/a} on u = (1 + x)/2 via Jacobi(0, −1/a)
    beta = -1.0 / index
    x, w = special.roots_jacobi(n, 0.0, beta)
    u = (1.0 + x) / 2.0
    rho = scale * u ** (-1.0 / index)
    # ∫_0^1 h(ρ(u)) du = ∫ u^{β} [u^{−β} h] du ; Jacobi weight (1+x)^β = 2^β u^β, dx = 2 du
    weights = w / (2.0 ** (beta + 1.0)) * u ** (-beta)
    return rho, weights


def student_t_lad_risk(distance: np.ndarray, nu: float, noise: float, n: int = 200) -> np.ndarray:
    """``E|y − <x, w>|`` for the Student-t LAD task, as a function of ``||w − w*||``."""
    a = np.atleast_1d(np.asarray(distance, float))
    x, w = _laguerre(n, nu / 2.0 - 1.0)
    V = 2.0 * x
    std = np.sqrt(a[:, None] ** 2 * nu / V[None, :] + noise * noise)
    return math.sqrt(2.0 / math.pi) * (std * w[None, :]).sum(axis=1)


def hinge_t_risk(margin: np.ndarray, scale: np.ndarray, nu: float) -> np.ndarray:
    """``E(c − s t)₊`` for ``t ~ t_ν``: ``c F(c/s) + s (ν + (c/s)²)/(ν − 1) f(c/s)``."""
    c = np.asarray(margin, float)
    s = np.asarray(scale, float)
    safe = np.where(s > 0, s, 1.0)
    x = c / safe
    val = c * stats.t.cdf(x, nu) + safe * (nu + x * x) / (nu - 1.0) * stats.t.pdf(x, nu)
    return np.where(s > 0, val, np.maximum(c, 0.0))


def high_leverage_parts(dist_bulk: np.ndarray, dist_tail: np.ndarray, d: int, tail_index: float,
                        scale: float, noise: float, clip: float | None = None,
                        n: int = 160) -> tuple[np.ndarray, np.ndarray]:
    """Bulk and tail terms of the (optionally C-clipped) LAD population risk of the high-leverage task.

    Bulk: ``x ~ N(0, I_d)``, residual ``<x, w₁ − w> + σZ``; tail: ``x = ρu``,
    residual ``ρ <u, w₂ − w> + σZ``.  With ``clip = C`` each example's loss is
    weighted by ``min(1, C/||x||)`` (the extension on ``R^d``).
    """
    a1 = np.atleast_1d(np.asarray(dist_bulk, float))
    a2 = np.atleast_1d(np.asarray(dist_tail, float))
    t, wt = _sphere_coordinate(n, d)
    if clip is None:
        bulk = math.sqrt(2.0 / math.pi) * np.sqrt(a1**2 + noise * noise)
    else:
        x, wx = _laguerre(n, d / 2.0 - 1.0)
        R = np.sqrt(2.0 * x)
        weight = np.minimum(1.0, clip / R)
        mu = a1[:, None, None] * R[None, :, None] * t[None, None, :]
        weights = (wx * weight)[None, :, None] * wt[None, None, :]
        bulk = (abs_gaussian_mean(mu, noise) * weights).sum(axis=(1, 2))
    rho, wr = _pareto(n, tail_index, scale)
    weight = np.ones_like(rho) if clip is None else np.minimum(1.0, clip / rho)
    mu = a2[:, None, None] * rho[None, :, None] * t[None, None, :]
    tail = (abs_gaussian_mean(mu, noise) * (wr * weight)[None, :, None] * wt[None, None, :]).sum(axis=(1, 2))
    return bulk, tail


def minimize_on_segment(objective, lo: float = 0.0, hi: float = 1.0) -> float:
    """argmin of a convex 1-D function on ``[lo, hi]`` (bounded Brent, tight tolerance)."""
    res = optimize.minimize_scalar(objective, bounds=(lo, hi), method="bounded",
                                   options={"xatol": 1e-12, "maxiter": 500})
    return float(res.x)
