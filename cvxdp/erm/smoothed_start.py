"""The bundle method's start for two-piece generalized-linear losses: Newton's method on a smoothing.

**Why.**  A cutting-plane model of a piecewise-linear objective closes its gap slowly until the ball
``B(w_best, sqrt(2·gap/λ))`` meets the kinks of few enough rows for them to enter the master program
exactly (:mod:`cvxdp.erm.kinks`).  From the regularizer's centre, with heavy-tailed features (whose
steep rows have kinks near every point), that took 30 passes over 5·10⁴ rows and 39 over 5·10⁵
(``benchmarks/bench_scale.py``'s instances, the first phase of Algorithm 1) — most of a fit's time.  A
point within about 10⁻⁴ of the minimizer lets the kink model take over at once (2–3 passes).

**The smoothing.**  A generalized-linear row ``φ(<a, y> + b)`` with two pieces of slopes ``κ₀ ≤ 0 ≤ κ₁``
and kink ``u_k`` has, on ``R^d``, the Lipschitz extension (the clipped rows of
:mod:`cvxdp.extension.tight`)

    φ_C(u) = φ(u_k) + max(ℓ t, h t),   t = u − u_k,   ℓ = max(κ₀, −C/||a||),   h = min(κ₁, C/||a||).

Its Huber smoothing of width ``μ > 0``,

    ψ_μ(t) = t²/(2μ)  where ℓμ < t < hμ,      ψ_μ(t) = q t − q² μ/2,  q = clip(t/μ, ℓ, h),  elsewhere,

is convex and continuously differentiable with ``ψ_μ' = clip(t/μ, ℓ, h)``, ``ψ_μ'' = 1/μ`` on
``(ℓμ, hμ)`` and 0 outside, and ``0 ≤ max(ℓt, ht) − ψ_μ(t) ≤ max(ℓ², h²) μ/2`` (it is the Moreau
envelope of ``max(ℓt, ht)`` with parameter ``μ``).  So

    S_μ(w) = (1/m) Σ_i ψ_μ(<a_i, w> + b_i − u_{k,i}) + (λ/2)||w − w₀||²

is ``λ``-strongly convex, twice differentiable almost everywhere, and within ``max κ² μ/2`` of the
objective with each row's ``φ_C`` in place of ``f_{C,U}`` (up to the constants ``φ(u_k)``) — that is
``F`` where the rows' foot points stay in ``U``; elsewhere ``f_{C,U} ≥ φ_C`` and the start is only
nearer ``F``'s minimizer than the centre.  Newton's method with backtracking, the iterates made
feasible in ``U`` by the region's own :meth:`make_feasible`, and ``STAGES`` stages of continuation
``μ ← μ·SHRINK`` from the residuals' mean modulus follow the minimizers of ``S_μ`` toward ``F``'s.  The
mean is of ``min(|t|, ||a|| diam U)``: a row whose kink lies far outside ``U`` is affine on it whatever
its residual, and must not set the width for every other row (found by review: one row with features
10⁻⁵⁰ and label 1 made every stage too wide to move).  Each step needs one pass over the rows for
``Σψ``, ``Σψ' a`` and ``Σψ'' a aᵀ`` — sums, so partitions compute theirs where they live
(:meth:`RegularizedERM.smoothed_sums <cvxdp.erm.problem.RegularizedERM.smoothed_sums>`) and the driver
solves the ``d × d`` system.  The width's pass and the first ``COARSE_STAGES`` stages sum every
``COARSE_STRIDE``-th row only (partitions: of their own rows) where that leaves ``COARSE_ROWS`` or more:
a wide smoothing's minimizer needs few rows to be found, those stages' Hessians take nearly every row,
and the later stages, on all rows, start from their point (a choice by position, like the subsample
start's).  Rows outside the closed form (a level offset, a link that is not two
pieces bracketing 0) are left out of ``S_μ``: they only make the start worse.

**What this changes.**  The route only, as the subsample start of :mod:`cvxdp.erm.bundle` does: the
point found is a starting point for the bundle method, which evaluates, bounds and certifies its own
iterates as always, and the released point is an ``α``-minimizer of ``F`` with the certified gap, so
the sensitivity (which holds for every ``α``-minimizer) does not see the start.  Nothing here is
certified and nothing needs to be; any failure (a non-finite sum, a singular system, a point the
region cannot make feasible, a partition whose sums failed) ends the search with the best point so far
or, before any step was taken, with no start at all (``None``: the bundle method then starts as without
it).  A partition's sums never raise on its worker (a failed task would be logged there): they answer
``None`` instead.  The start is a function of all rows, like every iterate of the bundle method;
per-example quantities are untouched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cvxdp.numerics import EPS

#: The smoothing width shrinks by this factor between stages ...
SHRINK = 0.01
#: ... over this many stages, from the residuals' (capped) mean modulus at the start.
STAGES = 5
#: Rows per block of a pass's Hessian (its temporaries stay a block's size).
BLOCK = 65_536
#: Newton steps per stage at most (the quadratic convergence of each stage needs two or three).
NEWTON_STEPS = 3
#: Halvings of a Newton step before the stage gives up on it.
BACKTRACKS = 10
#: Sufficient decrease of the backtracking (Armijo) test.
ARMIJO = 1e-4
#: The width's pass and the first ``COARSE_STAGES`` stages sum every ``COARSE_STRIDE``-th row only, where
#: that leaves at least ``COARSE_ROWS`` rows: a wide smoothing's minimizer moves little with the rows
#: left out, and those passes (most rows curved, the Hessian of nearly all of them) cost the most.
COARSE_STRIDE = 8
COARSE_STAGES = 2
COARSE_ROWS = 4096


@dataclass(frozen=True)
class SmoothedSums:
    """Sums over some rows of the smoothed objective's loss part at ``w``: ``Σψ_μ``, ``Σψ_μ' a``,
    ``Σψ_μ'' a aᵀ`` and ``Σ min(|t|, ||a|| diam U)`` (the capped residuals: the first stage's width), and
    the number of rows summed (``None``: all the problem's)."""

    value: float
    gradient: np.ndarray
    hessian: np.ndarray
    abs_residual: float
    rows: int | None = None

    @staticmethod
    def total(parts: list[SmoothedSums]) -> SmoothedSums:
        return SmoothedSums(float(sum(p.value for p in parts)),
                            np.sum([p.gradient for p in parts], axis=0),
                            np.sum([p.hessian for p in parts], axis=0),
                            float(sum(p.abs_residual for p in parts)),
                            None if any(p.rows is None for p in parts) else sum(p.rows for p in parts))


@dataclass(frozen=True)
class SmoothingRows:
    """Per row, what :func:`smoothed_row_sums` reads besides ``a``: the shift ``b − u_k``, the clipped
    slopes ``ℓ ≤ 0 ≤ h`` (both 0 for a row left out, which then contributes nothing) and ``||a|| diam U``,
    the most ``|t|`` can vary over ``U`` (the cap of the first width's residuals)."""

    shift: np.ndarray
    low: np.ndarray
    high: np.ndarray
    span: np.ndarray

    @staticmethod
    def of(b: np.ndarray, link: object, a_norm: np.ndarray, eligible: np.ndarray, kink: np.ndarray,
           C: float, diameter: float) -> SmoothingRows:
        """The smoothing's rows for a two-piece link (``eligible`` and ``kink`` from
        :func:`~cvxdp.erm.kinks.kink_candidates`; ``diameter`` a bound on ``U``'s)."""
        slopes = np.broadcast_to(link.slopes, (a_norm.size, 2))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            reach = C / a_norm
            low = np.maximum(slopes.min(axis=1), -reach)
            high = np.minimum(slopes.max(axis=1), reach)
            shift = b - kink
            span = a_norm * diameter
        keep = eligible & np.isfinite(shift) & np.isfinite(low) & np.isfinite(high) & np.isfinite(span)
        return SmoothingRows(np.where(keep, shift, 0.0), np.where(keep, low, 0.0), np.where(keep, high, 0.0),
                             np.where(keep, span, 0.0))

    def subset(self, rows: slice | np.ndarray) -> SmoothingRows:
        """The rows ``rows`` (copies)."""
        return SmoothingRows(*(np.array(v[rows]) for v in (self.shift, self.low, self.high, self.span)))


def smoothed_row_sums(a: np.ndarray, rows: SmoothingRows, w: np.ndarray, mu: float) -> SmoothedSums:
    """:class:`SmoothedSums` of the rows ``a`` (``(m, d)``) at ``w`` for the width ``mu``; ``mu = ∞`` gives
    the residuals' modulus only (the other sums 0).

    One formula serves both zones: inside, ``q = t/μ`` and ``q t − q² μ/2 = t²/(2μ)``."""
    d = a.shape[1]
    with np.errstate(all="ignore"):
        t = a @ w + rows.shift
        if math.isinf(mu):
            kept = np.where(rows.high > rows.low, np.minimum(np.abs(t), rows.span), 0.0)
            return SmoothedSums(0.0, np.zeros(d), np.zeros((d, d)), float(np.sum(kept)), a.shape[0])
        s = t / mu
        q = np.clip(s, rows.low, rows.high)
        value = float(np.sum(q * (t - 0.5 * mu * q)))
        gradient = a.T @ q
        inner = (s > rows.low) & (s < rows.high)
        hessian = np.zeros((d, d))
        for start in range(0, a.shape[0], BLOCK):
            block = slice(start, start + BLOCK)
            curved = a[block][inner[block]]
            hessian += curved.T @ curved
        hessian /= mu
    return SmoothedSums(value, gradient, hessian, 0.0, a.shape[0])


@dataclass(frozen=True)
class SmoothedStart:
    """The start found and the passes over the rows it took."""

    w: np.ndarray
    passes: int


def smoothed_newton_start(problem: object, start: np.ndarray, coarse_rows: int | None = None
                          ) -> SmoothedStart | None:
    """A point near the minimizer of ``F`` from Newton's method on ``S_μ`` with continuation (module
    docstring), or ``None`` where the problem has no smoothing (``problem.smoothed_sums`` answers
    ``None``), the first pass fails or no step was taken.  Never raises for a numerical failure: the
    search stops with the best point so far.  ``coarse_rows`` (default :data:`COARSE_ROWS`): the fewest
    strided rows the first stages may sum."""
    m, lam, w0 = problem.m, float(problem.lam), np.asarray(problem.w0, float)
    region = problem.feasible_set
    d = w0.size

    def feasible(point: np.ndarray) -> np.ndarray | None:
        out = region.make_feasible(np.asarray(point, float)[None, :])[0]
        return out if np.all(np.isfinite(out)) else None

    def count(sums: SmoothedSums) -> int:
        return m if sums.rows is None else sums.rows

    def objective(x: np.ndarray, sums: SmoothedSums) -> float:
        return sums.value / count(sums) + 0.5 * lam * float(np.dot(x - w0, x - w0))

    coarse = m // COARSE_STRIDE >= (COARSE_ROWS if coarse_rows is None else coarse_rows)

    def sums_at(point: np.ndarray, width: float, stage: int) -> SmoothedSums | None:
        if coarse and stage < COARSE_STAGES:
            return problem.smoothed_sums(point, width, COARSE_STRIDE)
        return problem.smoothed_sums(point, width)

    x = feasible(start)
    if x is None:
        return None
    first = sums_at(x, math.inf, 0)
    passes, moved_any = 1, False
    if first is None or not math.isfinite(first.abs_residual) or not count(first) > 0:
        return None
    mu = first.abs_residual / count(first)
    if not (mu > 0 and math.isfinite(mu)):
        return None

    def found() -> SmoothedStart | None:
        return SmoothedStart(x, passes) if moved_any else None

    for stage in range(STAGES):
        if stage:
            mu *= SHRINK
        sums = sums_at(x, mu, stage)
        passes += 1
        if sums is None:
            return found()
        reach = math.inf  # a stage's first step is Newton's full step
        for _ in range(NEWTON_STEPS):
            value = objective(x, sums)
            g = sums.gradient / count(sums) + lam * (x - w0)
            H = sums.hessian / count(sums) + lam * np.eye(d)
            if not (math.isfinite(value) and np.all(np.isfinite(g)) and np.all(np.isfinite(H))):
                return found()
            try:
                step = -np.linalg.solve(H, g)
            except np.linalg.LinAlgError:
                return found()
            # gᵀH⁻¹g is twice the decrease Newton's model predicts: at the objective's rounding, no trial
            # can show a decrease, and its pass would be wasted (NaN ends the stage as well)
            if not float(-(g @ step)) > 8.0 * EPS * abs(value) + 1e-300:
                break
            # later steps at most twice as long as the stage's last one save the halvings of a step that
            # the model's few curved rows made too long
            length = float(np.linalg.norm(step))
            tau, accepted = (min(1.0, 2.0 * reach / length) if length > 0 else 1.0), None
            for _ in range(BACKTRACKS):
                trial = feasible(x + tau * step)
                if trial is None:
                    break
                trial_sums = sums_at(trial, mu, stage)
                passes += 1
                if trial_sums is None:
                    return found()
                trial_value = objective(trial, trial_sums)
                if trial_value <= value + ARMIJO * float(g @ (trial - x)):  # False for NaN
                    accepted = (trial, trial_sums)
                    break
                tau *= 0.5
            if accepted is None:
                break  # no decrease along the step: this stage is done
            moved = float(np.linalg.norm(accepted[0] - x))
            reach = max(moved, 1e-300)
            x, sums = accepted
            moved_any = True
            if moved <= 1e-12 * (1.0 + float(np.linalg.norm(x))):
                break
    return found()


__all__ = ["SmoothedStart", "SmoothedSums", "SmoothingRows", "smoothed_newton_start", "smoothed_row_sums"]
