"""Extension oracle through conic programs, for any region ``U`` and any certifiable loss.

Each example's inner problem

    f_{C,U}(w, z) = min_{y, t} f(y, z) + C t   s.t.  (t, w − y) ∈ SOC,  y ∈ U

is assembled from the loss's :class:`~cvxdp.extension.blocks.EpigraphBlock`
and ``U``'s solver rows; a chunk of examples is one block-diagonal program
solved by Clarabel (or ECOS).  The solver's answer is then *repaired* and
evaluated by us:

* upper bound — the primal ``y`` moved into ``U`` (exact float membership) and
  ``f(y) + C ||w − y||`` evaluated by cvxdp;
* lower bound, structured losses — Appendix E.3's minorant with ``g`` the
  coupling cone's multiplier scaled into the C-ball, ``π`` the epigraph rows'
  multipliers projected onto the simplex (piecewise linear) or the link's
  derivative refined by a 1-D search (smooth links), and ``σ_U`` bounded
  through the split ``σ_W(s) + σ_B(v − s)`` with ``s`` read off ``W``'s
  multipliers;
* lower bound, generic losses — the conic dual ``−bᵀz`` of the compiled
  program with ``z`` projected onto the dual cone, the ``t``-column made exact,
  the auxiliary columns' residual reduced by a least-squares correction and
  then removed exactly (:func:`~cvxdp.conic.exact_dual.exact_aux_repair`,
  membership decided exactly), ``−bᵀz`` and the residual on ``y`` computed
  exactly and the latter charged worst-case over ``U``.  If no exact correction
  is found, the example is reported uncertified, never certified by assumption.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from cvxdp.conic.cones import Cone, in_dual, project_dual
from cvxdp.conic.exact_dual import exact_aux_repair, exact_dot, exact_transpose_product, float_with_error
from cvxdp.conic.program import ConicSettings, ProgramBuilder, solve
from cvxdp.extension.blocks import EpigraphBlock
from cvxdp.extension.certificates import (
    certified_inner_points,
    clip_to_ball,
    project_simplex_rows,
    upper_margin,
)
from cvxdp.extension.reduced import BracketResult, _golden_max
from cvxdp.geometry import Ball, Domain, LocalizedDomain
from cvxdp.geometry.certified import (
    has_exact_support,
    per_row_support_upper,
    support_rounding,
    support_upper,
)
from cvxdp.links import Link
from cvxdp.loss import Examples
from cvxdp.numerics import (
    EPS,
    argument_rounding,
    float_down,
    float_up,
    rounding_margin,
    row_combine,
    row_dot,
    row_norm,
)


@dataclass
class ConicBatch:
    """Solver proposals for a batch of extension programs."""

    y: np.ndarray
    z_loss: np.ndarray
    z_coupling: np.ndarray
    z_region: np.ndarray
    status: list[str]
    solve_time: float


def solve_extension_programs(block: EpigraphBlock, region: Domain, w: np.ndarray, C: float,
                             settings: ConicSettings, chunk: int = 1000) -> ConicBatch:
    """Solve ``min f(y) + C||w − y||`` over ``y ∈ U`` for every example (chunked block diagonal)."""
    m, d = block.m, block.d
    rows_U = region.cone_rows()
    k, kU, nA, nU = block.k, rows_U.n_rows, block.n_aux, rows_U.n_aux
    n_per = d + 2 + nA + nU
    k_per = k + d + 1 + kU
    t_col = d + 1 + nA
    cones = tuple(block.cones) + (Cone("soc", d + 1),) + tuple(rows_U.cones)
    y = np.empty((m, d))
    z_loss = np.empty((m, k))
    z_c = np.empty((m, d + 1))
    z_U = np.empty((m, kU))
    statuses: list[str] = []
    total = 0.0
    # structural pattern of the coupling and region rows (local indices)
    c_rows = np.concatenate([[k], k + 1 + np.arange(d)])
    c_cols = np.concatenate([[t_col], np.arange(d)])
    c_vals = np.concatenate([[-1.0], np.ones(d)])
    ur, uc = np.nonzero(rows_U.A_y)
    u_rows = k + d + 1 + ur
    u_cols = uc
    u_vals = rows_U.A_y[ur, uc]
    if nU:
        ar, ac = np.nonzero(rows_U.A_aux)
        u_rows = np.concatenate([u_rows, k + d + 1 + ar])
        u_cols = np.concatenate([u_cols, d + 2 + nA + ac])
        u_vals = np.concatenate([u_vals, rows_U.A_aux[ar, ac]])
    for start in range(0, m, chunk):
        idx = np.arange(start, min(m, start + chunk))
        n = idx.size
        builder = ProgramBuilder(n * n_per)
        base_r = (np.arange(n) * k_per)[:, None]
        base_c = (np.arange(n) * n_per)[:, None]
        vals = block.vals if block.vals.shape[0] == 1 else block.vals[idx]
        lr = np.concatenate([block.rows, c_rows, u_rows])
        lc = np.concatenate([block.cols, c_cols, u_cols])
        lv = np.concatenate([np.broadcast_to(vals, (n, block.rows.size)),
                             np.broadcast_to(c_vals, (n, c_vals.size)),
                             np.broadcast_to(u_vals, (n, u_vals.size))], axis=1)
        bb = np.concatenate([block.b[idx], np.zeros((n, 1)), w[idx],
                             np.broadcast_to(rows_U.b, (n, kU))], axis=1)
        builder.add_rows((base_r + lr[None, :]).ravel(), (base_c + lc[None, :]).ravel(),
                         lv.ravel(), bb.ravel(), list(cones) * n)
        q = np.zeros((n, n_per))
        obj = block.objective if block.objective.shape[0] == 1 else block.objective[idx]
        q[:, : d + 1 + nA] = obj
        q[:, t_col] = C
        sol = solve(builder.build(q.ravel()), settings)
        total += sol.solve_time
        statuses.append(sol.status)
        X = sol.x.reshape(n, n_per)
        Z = sol.z.reshape(n, k_per)
        y[idx] = X[:, :d]
        z_loss[idx] = Z[:, :k]
        z_c[idx] = Z[:, k:k + d + 1]
        z_U[idx] = Z[:, k + d + 1:]
    return ConicBatch(y=y, z_loss=z_loss, z_coupling=z_c, z_region=z_U, status=statuses,
                      solve_time=total)


def repair_aux_multipliers(z: np.ndarray, A_aux: np.ndarray, c_aux: np.ndarray,
                           cones: tuple[Cone, ...], iterations: int = 25
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Make multipliers exactly dual-feasible on the auxiliary (unbounded) columns.

    Alternates a least-squares step onto ``{z : A_auxᵀ z = −c_aux}`` with the
    projection onto ``K*``; ``A_aux`` is ``(m, k, n_aux)`` (or ``(k, n_aux)``
    shared), ``c_aux`` ``(m, n_aux)``.  Returns ``(z, ok)`` with ``z ∈ K*`` and
    ``ok`` true where the remaining residual is at rounding level
    (``≤ 1e-12`` relative to the terms).  Where ``ok`` is false the caller must
    not use ``z`` for a bound.
    """
    m = z.shape[0]
    A_aux = np.broadcast_to(A_aux, (m,) + np.shape(A_aux)[-2:])
    z = project_dual(z, cones)
    if A_aux.shape[-1] == 0:
        return z, np.ones(m, dtype=bool)
    pinv = np.linalg.pinv(np.einsum("mkj,mki->mji", A_aux, A_aux))

    def residual(zz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = c_aux + np.einsum("mkj,mk->mj", A_aux, zz)
        scale = 1.0 + np.abs(c_aux).sum(axis=1) + np.einsum("mkj,mk->m", np.abs(A_aux), np.abs(zz))
        return np.abs(r).sum(axis=1), scale

    live = np.ones(m, dtype=bool)  # each row stops at its own convergence: no row waits for another
    for _ in range(iterations):
        r_abs, scale = residual(z)
        live &= ~(r_abs <= 1e-13 * scale)
        if not live.any():
            break
        r = c_aux + np.einsum("mkj,mk->mj", A_aux, z)
        step = project_dual(z - np.einsum("mkj,mj->mk", A_aux, np.einsum("mji,mi->mj", pinv, r)),
                            cones)
        z = np.where(live[:, None], step, z)
    r_abs, scale = residual(z)
    return z, (r_abs <= 1e-12 * scale) & in_dual(z, cones)


def _region_support_fn(region: Domain, z_U: np.ndarray):
    """A cheap per-example upper bound ``v ↦ σ_U(v)`` using ``U``'s multipliers where needed."""
    if has_exact_support(region):
        return lambda v: support_upper(region, v)
    rows = region.cone_rows()
    if isinstance(region, LocalizedDomain):
        base_rows = region.base.cone_rows()
        kW = base_rows.n_rows
        ball = region.ball
    else:
        base_rows = rows
        kW = rows.n_rows
        c, r = region.bounding_ball()
        ball = Ball(c, r)
    # σ_W(A_yᵀ z) ≤ bᵀ z for z ∈ K* with A_auxᵀ z = 0 exactly (weak duality; W's auxiliary
    # variables are unbounded, so the equality is made exact per example by exact_aux_repair), and
    # σ_U(v) ≤ σ_W(s) + σ_B(v − s) for s = A_yᵀ z, whose rounding costs max_B ||u|| per unit
    m = z_U.shape[0]
    zW, ok = repair_aux_multipliers(z_U[:, :kW], base_rows.A_aux, np.zeros((m, base_rows.n_aux)),
                                    base_rows.cones)
    if base_rows.n_aux == 0:  # nothing unbounded: the float products with their rounding charged
        kW_rows = base_rows.A_y.shape[0]
        s = row_combine(zW, base_rows.A_y)  # row by row, not BLAS (cvxdp.numerics.row_dot)
        s_err = (kW_rows + 4.0) * EPS * row_norm(row_combine(np.abs(zW), np.abs(base_rows.A_y)))
        bound = (row_dot(zW, base_rows.b) + rounding_margin(zW * base_rows.b).sum(axis=-1)
                 + s_err * ball.norm_bound() * (1.0 + 8.0 * EPS))
        bound = np.where(ok & np.isfinite(bound), bound, np.inf)
    else:
        s = np.zeros((m, base_rows.A_y.shape[1]))
        bound = np.full(m, np.inf)
        for i in np.flatnonzero(ok):
            try:
                zq = exact_aux_repair(zW[i], base_rows.A_aux, np.zeros(base_rows.n_aux), base_rows.cones)
                if zq is None:
                    raise ValueError
                s[i], s_err = float_with_error(exact_transpose_product(base_rows.A_y, zq))
                bound[i] = (float_up(exact_dot(base_rows.b, zq))
                            + s_err * ball.norm_bound() * (1.0 + 4.0 * EPS))
            except (ValueError, OverflowError):  # no exact correction, or beyond the float range: σ_B alone
                s[i], bound[i] = 0.0, np.inf
        bound = np.where(np.isfinite(bound), bound, np.inf)

    def fn(v: np.ndarray) -> np.ndarray:
        return np.minimum(bound + ball.support(v - s), ball.support(v))

    return fn


def _loss_values(examples: Examples, y: np.ndarray) -> np.ndarray:
    return examples.loss.values(y, examples)


def structured_bracket(examples: Examples, block: EpigraphBlock, region: Domain, w: np.ndarray,
                       C: float, batch: ConicBatch, glm: tuple | None,
                       iters: int = 80) -> BracketResult:
    """Certified bracket from a conic batch for a piecewise-linear or smooth-GLM loss."""
    m, d = w.shape
    y, inside = certified_inner_points(region, region.make_feasible(batch.y))
    dist = row_norm(w - y)
    y_norm, w_norm = row_norm(y), row_norm(w)
    # f(y) from the same affine data the lower bound uses (not from the CVXPY expression), so
    # both bounds are of one function even where recovering that data rounded it
    if block.pi_rows is not None:
        A_, b_ = examples.pieces()  # max_j <A_j, y> + b_j moves by at most the worst piece's error
        fval = (row_dot(A_, y[:, None, :]) + b_).max(axis=1)
        value_error = argument_rounding(d, row_norm(A_).max(axis=1), y_norm,
                                        np.abs(b_).max(axis=1))
    else:
        assert glm is not None
        u_ = row_dot(glm[0], y) + glm[1]
        fval = glm[2].value(u_)
        du = argument_rounding(d, row_norm(glm[0]), y_norm, glm[1])
        value_error = glm[2].lipschitz_on(u_ - du, u_ + du) * du
    upper = fval + C * dist + upper_margin(fval, C, dist, d, value_error, w_norm, y_norm)
    upper = np.where(inside, upper, np.inf)
    g = clip_to_ball(-batch.z_coupling[:, 1:], C)
    sigma = _region_support_fn(region, batch.z_region)
    if block.pi_rows is not None:
        A, b = examples.pieces()
        pi = project_simplex_rows(batch.z_loss[:, block.pi_rows])
        v = g - row_combine(pi, A)
        sig = sigma(v)
        pib = row_dot(pi, b)
        beta = pib - sig
        scale_a = row_norm(A).max(axis=1)
        n_pieces = b.shape[1]
        margin = (rounding_margin(pib, sig) + (n_pieces + 64.0) * EPS * row_dot(pi, np.abs(b))
                  + support_rounding(region, d, (n_pieces + 2.0) * (row_norm(v)
                                                                    + row_norm(g) + scale_a)))
        pi_out = pi
    else:
        assert glm is not None
        a, bvec, link = glm
        link: Link
        u = row_dot(a, y) + bvec
        dl, dr = link.derivative_bounds(u)
        p0 = link.clip_to_dual_domain(0.5 * (dl + dr))

        def dual_obj(p: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore"):
                val = p * bvec - link.conjugate(p) - sigma(g - p[:, None] * a)
            return np.where(np.isfinite(val), val, -np.inf)

        lo, hi = link.dual_domain()
        span = 1e-3 * (1.0 + np.abs(p0))
        lo_b = np.maximum(np.broadcast_to(lo, (m,)), p0 - span)
        hi_b = np.minimum(np.broadcast_to(hi, (m,)), p0 + span)
        p_g = _golden_max(dual_obj, lo_b.astype(float), hi_b.astype(float), iters)
        pick = dual_obj(p_g) > dual_obj(p0)
        pi_out = np.where(pick, p_g, p0)
        phistar = link.conjugate(pi_out)
        v = g - pi_out[:, None] * a
        sig = sigma(v)
        beta = pi_out * bvec - phistar - sig
        margin = (rounding_margin(pi_out * bvec, phistar, sig) + link.conjugate_rounding(pi_out)
                  + support_rounding(region, d, row_norm(v) + row_norm(g)
                                     + np.abs(pi_out) * row_norm(a)))
    gw = row_dot(g, w)
    beta = beta - margin - (d + 64.0) * EPS * row_norm(g) * w_norm
    lower = gw + beta
    lower = np.where(np.isfinite(lower), lower, -np.inf)
    return BracketResult(upper=upper, lower=lower, g=g, beta=beta, y=y,
                         pi=pi_out if np.ndim(pi_out) == 1 else pi_out.max(axis=1))


def generic_bracket(examples: Examples, block: EpigraphBlock, region: Domain, w: np.ndarray,
                    C: float, batch: ConicBatch) -> tuple[BracketResult, np.ndarray]:
    """Certified bracket from the repaired conic dual of a generic loss's program.

    The multipliers of the loss rows and of ``U``'s rows are repaired jointly:
    alternating a least-squares step onto ``{A_auxᵀ z = −c_aux}`` (the columns
    of auxiliary variables, which are unbounded) with a projection onto
    ``K*`` brings the auxiliary residual to rounding level (``≤ 1e-12``
    relative), and :func:`~cvxdp.conic.exact_dual.exact_aux_repair` removes it
    exactly — weak duality holds for every feasible point only then, since
    nothing bounds the auxiliary variables.  For every feasible ``(y, aux, t)``
    the objective is at least ``−bᵀz' + <g, w> − σ_U(−r_y)``: ``−bᵀz'`` and
    ``r_y`` are computed exactly, ``r_y`` rounded with its error charged
    through ``max_U ||y||``, ``σ_U`` bounded per row.

    Returns the bracket and a boolean array: ``False`` where the repair failed
    (the lower bound is then ``-inf``, never a guess).
    """
    m, d = w.shape
    y, inside = certified_inner_points(region, region.make_feasible(batch.y))
    fval = _loss_values(examples, y)
    dist = row_norm(w - y)
    # CVXPY evaluates a generic expression: its intermediate magnitudes are unknown, so the value's
    # rounding is charged relative to |f(y)| (see SECURITY.md); the distance's is charged in full
    upper = fval + C * dist + upper_margin(fval, C, dist, d, np.zeros(m), row_norm(w),
                                           row_norm(y))
    upper = np.where(inside, upper, np.inf)
    k, nA = block.k, block.n_aux
    rows_U = region.cone_rows()
    kU, nU = rows_U.n_rows, rows_U.n_aux
    # the coupling cone's multiplier: z0 = C exactly (t column), vector part -> -g in the C-ball
    g = clip_to_ball(-batch.z_coupling[:, 1:], C)
    # joint dense rows [loss; U] over columns [y (d) | aux_loss (nA) | aux_U (nU)]
    ncol = d + nA + nU
    A = np.zeros((m, k + kU, ncol))
    vals = np.broadcast_to(block.vals, (m, block.rows.size))
    loc = np.where(block.cols < d, block.cols, block.cols - 1)  # drop the unused τ column
    np.add.at(A, (slice(None), block.rows, loc), vals)
    A[:, k:, :d] = rows_U.A_y
    if nU:
        A[:, k:, d + nA:] = rows_U.A_aux
    bvec = np.concatenate([block.b, np.broadcast_to(rows_U.b, (m, kU))], axis=1)
    cones = tuple(block.cones) + tuple(rows_U.cones)
    obj_full = np.broadcast_to(block.objective, (m, d + 1 + nA))
    c = np.zeros((m, ncol))
    c[:, :d] = obj_full[:, :d]
    c[:, d:d + nA] = obj_full[:, d + 1:]
    z, ok = repair_aux_multipliers(np.concatenate([batch.z_loss, batch.z_region], axis=1),
                                   A[:, :, d:], c[:, d:], cones)
    # the float repair leaves a residual of rounding size on the auxiliary columns, whose variables
    # nothing bounds: made exactly zero per example (exact_aux_repair), and the bound read off the
    # exact multipliers — -bᵀz' exactly, the residual on y exactly and then rounded, its rounding
    # charged through max_U ||y||
    offset = np.broadcast_to(np.asarray(block.offset, float), (m,))
    dual_lo = np.full(m, -np.inf)
    r_y = np.zeros((m, d))
    r_err = np.zeros(m)
    for i in np.flatnonzero(ok):
        try:
            zq = exact_aux_repair(z[i], A[i, :, d:], c[i, d:], cones)
            if zq is None:
                raise ValueError
            dual_lo[i] = float_down(Fraction(float(offset[i])) - exact_dot(bvec[i], zq))
            ry = exact_transpose_product(A[i, :, :d], zq)
            r_y[i], r_err[i] = float_with_error([ry[j] + Fraction(float(c[i, j])) - Fraction(float(g[i, j]))
                                                 for j in range(d)])
        except (ValueError, OverflowError):  # no exact correction, or a value beyond the float range
            ok[i], dual_lo[i] = False, -np.inf
    # for every feasible (y, aux, t): objective ≥ −bᵀz' + <g, w> + r_yᵀ y ≥ ... − σ_U(−r_y)
    with np.errstate(invalid="ignore", over="ignore"):
        # per row (a polytope's batched LP would couple the rows' bounds), its formula's rounding charged
        sig = (per_row_support_upper(region, -r_y) + support_rounding(region, d, row_norm(r_y))
               + r_err * region.norm_bound() * (1.0 + 4.0 * EPS))
        margin = (rounding_margin(dual_lo, sig)
                  + 64 * EPS * row_norm(g) * row_norm(w))
        beta = np.where(ok, dual_lo - sig - margin, -np.inf)
        beta = np.where(np.isfinite(beta), beta, -np.inf)
    gw = row_dot(g, w)
    lower = np.where(ok, gw + beta, -np.inf)
    lower = np.where(np.isfinite(lower), lower, -np.inf)
    return BracketResult(upper=upper, lower=lower, g=g, beta=beta, y=y, pi=np.zeros(m)), ok
