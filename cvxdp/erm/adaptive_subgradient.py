"""Algorithm 4: adaptive projected subgradient with inexact projections (Proposition 2.8).

Minimizes the joint objective of Lemma 2.6 over ``K = U^{m+1}``, ``x = (w, y₁..y_m)``:

    Φ(x) = (1/m) Σ [f(y_i, z_i) + C ||w − y_i||] + (λ/2) ||w − w₀||²,

without knowing its Lipschitz constant (heavy tails: it may be huge):

    S_t = Σ_{s≤t} ||g_s||²,   η_t = D_K / sqrt(S_t),   ξ_t = D_K ||g_t||² / (3 S_t),
    x_{t+1} = Π̃^{ξ_t}_K(x_t − η_t g_t),

stopping at the first ``t`` with ``3 D_K sqrt(S_t) / t ≤ α`` and returning the
average iterate, which is then an ``α``-minimizer (Prop. 2.8); ``D_K =
sqrt(m diam(U)² + diam(W)²)`` (``= sqrt(m+1) diam(U)`` when ``w`` ranges over
``U``).  It halts within ``⌈(3 D_K L/α)²⌉`` steps — exact, and far
too slow at the accuracies output perturbation needs, so cvxdp keeps it as
the provably terminating reference and as an explicit option.  Projections
onto ``U`` are blockwise, each with accuracy ``ξ_t / sqrt(m+1)`` (Lemma 2.7
for localized sets), so the product projection is ``ξ_t``-accurate.

**Not a certificate by itself.** Proposition 2.8's bound holds in exact
arithmetic, for exact subgradients and ``ξ_t``-accurate projections, and for the
joint average ``(w̄, ȳ)``; the point cvxdp would release is a float ``w̄`` moved
into the feasible set.  So ``converged`` only means "the rule holds":
:func:`~cvxdp.erm.solver.solve_certified` releases ``w̄`` only if its *evaluated*
certificate (the oracle's certified bracket at ``w̄``) is ``≤ α``.  A non-finite
subgradient stops the run unconverged.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from cvxdp.erm.problem import RegularizedERM
from cvxdp.error import UncertifiableLossError
from cvxdp.geometry import LocalizedDomain, inexact_projection
from cvxdp.loss import Examples
from cvxdp.numerics import row_dot, row_norm
from cvxdp.structure import GenericStructure, PiecewiseLinearStructure


def loss_subgradients(examples: Examples, Y: np.ndarray) -> np.ndarray:
    """An element of ``∂f(y_i, z_i)`` for each example (exact, from the loss's structure)."""
    st = examples.loss.structure
    if isinstance(st, GenericStructure):
        raise UncertifiableLossError("Algorithm 4 needs an exact subgradient oracle, which cvxdp has "
                                     "for piecewise-linear and generalized-linear losses only.")
    glm = examples.glm()
    g_glm = None
    if glm is not None:
        a, b, link = glm
        _, right = link.derivative_bounds(row_dot(a, Y) + b)
        g_glm = right[:, None] * a
        if not isinstance(st, PiecewiseLinearStructure):
            return g_glm  # a smooth link: every example is generalized linear, by structure
    A, b = examples.pieces()
    vals = row_dot(A, Y[:, None, :]) + b
    j = np.argmax(vals, axis=1)
    g_pieces = A[np.arange(A.shape[0]), j]
    # per example: the link's slope where the example is generalized linear, its active piece elsewhere
    return g_pieces if g_glm is None else np.where(glm.is_glm[:, None], g_glm, g_pieces)


@dataclass
class AdaptiveSubgradientResult:
    w: np.ndarray
    iterations: int
    converged: bool
    bound_iterations: int | None
    seconds: float


def adaptive_subgradient(problem: RegularizedERM, alpha: float, max_iterations: int = 100_000,
                         start: np.ndarray | None = None) -> AdaptiveSubgradientResult:
    """Run Algorithm 4 until its stopping rule certifies ``α`` (or ``max_iterations`` is reached)."""
    t0 = time.perf_counter()
    ex, U, C, lam, w0 = problem.examples, problem.region, problem.C, problem.lam, problem.w0
    Wf = problem.feasible_set
    m, d = ex.m, problem.dim
    D_K = math.sqrt(m * U.diameter**2 + Wf.diameter**2)
    w = Wf.make_feasible(problem.w0 if start is None else np.asarray(start, float))
    Y = np.tile(w, (m, 1))
    sum_w = np.zeros(d)
    sum_y = np.zeros((m, d))
    S = 0.0
    per_block = 1.0 / math.sqrt(m + 1)

    def project(points: np.ndarray, xi: float, S=U) -> np.ndarray:
        if isinstance(S, LocalizedDomain):
            return inexact_projection(S.base, S.center, S.radius, points, max(xi * per_block, 1e-300))
        return S.project(points)

    for t in range(1, max_iterations + 1):
        sum_w += w
        sum_y += Y
        diff = w - Y
        nrm = row_norm(diff)
        unit = np.where(nrm[:, None] > 0, diff / np.where(nrm > 0, nrm, 1.0)[:, None], 0.0)
        g_w = (C / m) * unit.sum(axis=0) + lam * (w - w0)
        g_y = (loss_subgradients(ex, Y) - C * unit) / m
        sq = float(g_w @ g_w + np.sum(g_y * g_y))
        if not math.isfinite(sq):  # a NaN or overflowing subgradient: the rule can no longer be met
            return AdaptiveSubgradientResult(w=Wf.make_feasible(sum_w / t), iterations=t, converged=False,
                                             bound_iterations=None, seconds=time.perf_counter() - t0)
        if sq == 0.0:
            return AdaptiveSubgradientResult(w=w, iterations=t, converged=True,
                                             bound_iterations=None, seconds=time.perf_counter() - t0)
        S += sq
        if 3.0 * D_K * math.sqrt(S) / t <= alpha:
            w_bar = Wf.make_feasible(sum_w / t)
            return AdaptiveSubgradientResult(w=w_bar, iterations=t, converged=True,
                                             bound_iterations=None, seconds=time.perf_counter() - t0)
        eta = D_K / math.sqrt(S)
        xi = D_K * sq / (3.0 * S)
        w = project((w - eta * g_w)[None, :], xi, Wf)[0]
        Y = project(Y - eta * g_y, xi)
    return AdaptiveSubgradientResult(w=Wf.make_feasible(sum_w / max_iterations), iterations=max_iterations,
                                     converged=False, bound_iterations=None,
                                     seconds=time.perf_counter() - t0)
