"""Lemma 2.6: the regularized extension ERM as one joint conic program.

    min_{w ∈ U, y_i ∈ U}  (1/m) Σ_i [f(y_i, z_i) + C ||w − y_i||] + (λ/2) ||w − w₀||²

equals ``min_U F`` because minimizing over each ``y_i`` first gives
``f_{C,U}(w, z_i)``.  Two exact reductions keep the program small:

* **light examples** — if ``f(·, z_i)`` is C-Lipschitz on ``U`` (certified from
  public bounds: ``||a_i|| · Lip_φ(range of <a_i, y> + b_i over U) ≤ C``), then
  ``f_{C,U}(·, z_i) = f(·, z_i)`` on ``U`` and the example enters as ``f(w, z_i)``
  without ``y_i`` or ``t_i``;
* **grouped copies of w** — the coupling rows reference a per-group copy of
  ``w`` (tied to ``w`` by equalities) so no column of the KKT system is dense;
  without this, sparse LDL orderings fill in quadratically with ``m``.

The solution is only a proposal: :func:`solve_joint` returns the point and,
from the repaired multipliers, per-example minorants that
:mod:`cvxdp.erm.problem` turns into a certified gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from cvxdp.conic.cones import Cone
from cvxdp.conic.program import ConicSettings, ProgramBuilder, solve
from cvxdp.erm.problem import Cut, RegularizedERM, average_cut
from cvxdp.error import SolverError
from cvxdp.extension.blocks import EpigraphBlock, structured_block
from cvxdp.extension.certificates import project_simplex_rows
from cvxdp.extension.conic_path import ConicBatch, generic_bracket, structured_bracket
from cvxdp.extension.exact import round_down
from cvxdp.geometry.certified import support_upper
from cvxdp.numerics import EPS, argument_rounding, rounding_margin, row_combine, row_dot, row_norm
from cvxdp.structure import GenericStructure, PiecewiseLinearStructure

GROUP_SIZE = 100


def light_mask(problem: RegularizedERM) -> np.ndarray:
    """Examples whose loss is certifiably C-Lipschitz on ``U`` (so ``f_{C,U} = f`` there)."""
    ex = problem.examples
    st = problem.model.loss.structure
    if isinstance(st, GenericStructure):
        return np.zeros(ex.m, dtype=bool)
    glm = ex.glm()
    limit = problem.C * (1.0 - 1e-9)
    lip = None
    if isinstance(st, PiecewiseLinearStructure):
        A, _ = ex.pieces()
        lip = row_norm(A).max(axis=1)
    if glm is not None:
        a, b, link = glm
        a_norm = glm.a_norm()  # row_norm(a), taken once per form
        # widen the range of <a, y> + b over U by its rounding, so no kink just outside is missed
        slack = argument_rounding(a.shape[1], a_norm, problem.region.norm_bound(), b)
        hi = b + support_upper(problem.region, a) + slack
        lo = b - support_upper(problem.region, -a) - slack
        lip_glm = a_norm * link.lipschitz_on(lo, hi)
        # decided per example: the GLM bound where the example is generalized linear
        lip = lip_glm if lip is None else np.where(glm.is_glm, lip_glm, lip)
    return lip <= limit


def _block(problem: RegularizedERM) -> EpigraphBlock:
    if isinstance(problem.model.loss.structure, GenericStructure):
        return problem.extension._template.block(problem.examples)  # type: ignore[union-attr]
    return structured_block(problem.examples)


@dataclass
class JointSolution:
    """The joint program's proposal and the minorants read off its multipliers."""

    w: np.ndarray
    cut: Cut
    status: str
    iterations: int
    seconds: float
    n_heavy: int


def solve_joint(problem: RegularizedERM, settings: ConicSettings) -> JointSolution:
    """Solve the Lemma 2.6 program with Clarabel (or ECOS) and repair its multipliers into a cut."""
    m, d, C, lam = problem.m, problem.dim, problem.C, problem.lam
    block = _block(problem)
    light = light_mask(problem)
    H = np.nonzero(~light)[0]
    L = np.nonzero(light)[0]
    bH = block.subset(H) if H.size else None
    bL = block.subset(L) if L.size else None
    rows_U = problem.region.cone_rows()
    kU, nU, k, nA = rows_U.n_rows, rows_U.n_aux, block.k, block.n_aux
    mh, ml = H.size, L.size
    order = np.concatenate([H, L])
    group = np.empty(m, dtype=np.int64)
    group[order] = np.arange(m) // GROUP_SIZE
    n_groups = int(group.max()) + 1
    nH = d + 1 + nA + 1 + nU
    nL = 1 + nA
    c_copies = d
    c_heavy = c_copies + n_groups * d
    c_light = c_heavy + mh * nH
    c_waux = c_light + ml * nL
    n = c_waux + problem.feasible_set.cone_rows().n_aux
    copy_cols = c_copies + group[:, None] * d + np.arange(d)[None, :]  # (m, d) per example
    builder = ProgramBuilder(n)
    # 1. copies: w_g − w = 0
    gi = np.arange(n_groups * d)
    builder.add_rows(np.concatenate([gi, gi]), np.concatenate([c_copies + gi, gi % d]),
                     np.concatenate([np.ones(gi.size), -np.ones(gi.size)]), np.zeros(gi.size),
                     [Cone("zero", gi.size)])
    q = np.zeros(n)
    q[:d] = -lam * problem.w0
    # 2. heavy examples: loss rows on (y, τ, aux), coupling (t, w_g − y), U rows on y
    if mh:
        base = c_heavy + np.arange(mh)[:, None] * nH
        t_loc = d + 1 + nA
        ur, uc = np.nonzero(rows_U.A_y)
        k_per = k + d + 1 + kU
        lr = np.concatenate([bH.rows, [k], k + 1 + np.arange(d), k + d + 1 + ur])
        lc_local = np.concatenate([bH.cols, [t_loc], np.arange(d), uc])
        vals = np.concatenate([
            np.broadcast_to(bH.vals, (mh, bH.rows.size)),
            np.broadcast_to(np.concatenate([[-1.0], np.ones(d)]), (mh, d + 1)),
            np.broadcast_to(rows_U.A_y[ur, uc], (mh, ur.size))], axis=1)
        cols = base + lc_local[None, :]
        # the coupling's w part references the group copy
        wr = np.broadcast_to(k + 1 + np.arange(d), (mh, d))
        wc = copy_cols[H]
        all_r = np.concatenate([(np.arange(mh)[:, None] * k_per + lr[None, :]), np.arange(mh)[:, None]
                                * k_per + wr], axis=1)
        all_c = np.concatenate([cols, wc], axis=1)
        all_v = np.concatenate([vals, -np.ones((mh, d))], axis=1)
        if nU:
            ar, ac = np.nonzero(rows_U.A_aux)
            all_r = np.concatenate([all_r, np.arange(mh)[:, None] * k_per + (k + d + 1 + ar)[None, :]],
                                   axis=1)
            all_c = np.concatenate([all_c, base + (d + 2 + nA + ac)[None, :]], axis=1)
            all_v = np.concatenate([all_v, np.broadcast_to(rows_U.A_aux[ar, ac], (mh, ar.size))], axis=1)
        bb = np.concatenate([bH.b, np.zeros((mh, d + 1)), np.broadcast_to(rows_U.b, (mh, kU))], axis=1)
        cones = (*bH.cones, Cone("soc", d + 1), *rows_U.cones)
        heavy_start = builder.add_rows(all_r.ravel(), all_c.ravel(), all_v.ravel(), bb.ravel(),
                                       list(cones) * mh)
        obj = np.broadcast_to(bH.objective, (mh, d + 1 + nA)) / m
        qq = np.zeros((mh, nH))
        qq[:, : d + 1 + nA] = obj
        qq[:, t_loc] = C / m
        q[(base + np.arange(nH)).ravel()] += qq.ravel()
    # 3. light examples: loss rows with y replaced by the group copy of w
    if ml:
        base = c_light + np.arange(ml)[:, None] * nL
        is_y = bL.cols < d
        loc = np.where(is_y, 0, bL.cols - d)  # τ -> 0, aux -> 1..
        cols = np.where(is_y[None, :], copy_cols[L][:, np.minimum(bL.cols, d - 1)], base + loc[None, :])
        light_start = builder.add_rows(
            (np.arange(ml)[:, None] * k + bL.rows[None, :]).ravel(), cols.ravel(),
            np.broadcast_to(bL.vals, (ml, bL.rows.size)).ravel(), bL.b.ravel(), list(bL.cones) * ml)
        obj = np.broadcast_to(bL.objective, (ml, d + 1 + nA)) / m
        np.add.at(q, copy_cols[L].ravel(), obj[:, :d].ravel())
        q[(base + np.arange(nL)).ravel()] += obj[:, d:].ravel()
    # 4. w in its feasible set (U itself, or W inside U)
    rows_Wf = problem.feasible_set.cone_rows()
    ur, uc = np.nonzero(rows_Wf.A_y)
    wr, wc, wv = [ur], [uc], [rows_Wf.A_y[ur, uc]]
    if rows_Wf.n_aux:
        ar, ac = np.nonzero(rows_Wf.A_aux)
        wr.append(ar)
        wc.append(c_waux + ac)
        wv.append(rows_Wf.A_aux[ar, ac])
    builder.add_rows(np.concatenate(wr), np.concatenate(wc), np.concatenate(wv), rows_Wf.b,
                     rows_Wf.cones)
    if settings.solver == "clarabel":
        P = sp.diags(np.concatenate([np.full(d, lam), np.zeros(n - d)]), format="csc")
        prog = builder.build(q, P)
    else:
        # ECOS has no quadratic objective: epigraph q_col ≥ (λ/2)||w − w₀||² as a second-order cone
        # (q+1, q−1, sqrt(2λ)(w − w₀)) ∈ SOC, i.e. 2λ||w − w₀||² ≤ 4q.
        q_col = builder.n
        builder.n += 1
        root = np.sqrt(2.0 * lam)
        rr = np.concatenate([[0, 1], 2 + np.arange(d)])
        cc = np.concatenate([[q_col, q_col], np.arange(d)])
        vv = np.concatenate([[-1.0, -1.0], np.full(d, -root)])
        builder.add_rows(rr, cc, vv, np.concatenate([[1.0, -1.0], -root * problem.w0]),
                         [Cone("soc", d + 2)])
        q = np.concatenate([q, [1.0]])
        q[:d] += lam * problem.w0  # the epigraph already contains the linear term
        prog = builder.build(q)
    sol = solve(prog, settings)
    if not sol.usable:
        raise SolverError(f"the joint program's solver returned status {sol.status} without usable "
                          "points")
    w = sol.x[:d].copy()
    if not np.all(np.isfinite(w)):  # fail closed: a NaN proposal is a solver failure, never a point
        raise SolverError("the joint program's solver returned a non-finite point")
    w_feas = problem.feasible_set.make_feasible(w)
    G = np.zeros((m, d))
    beta = np.zeros(m)
    if mh:
        k_per = k + d + 1 + kU
        Z = sol.z[heavy_start:heavy_start + mh * k_per].reshape(mh, k_per) * m
        X = sol.x[c_heavy:c_heavy + mh * nH].reshape(mh, nH)
        batch = ConicBatch(y=X[:, :d], z_loss=Z[:, :k], z_coupling=Z[:, k:k + d + 1],
                           z_region=Z[:, k + d + 1:], status=[sol.status], solve_time=sol.solve_time)
        sub = problem.examples.subset(H)
        Wq = np.broadcast_to(w_feas, (mh, d))
        if bH.kind == "generic":
            r, _ = generic_bracket(sub, bH, problem.region, Wq, C, batch)
        else:
            sub_glm = sub.glm() if bH.pi_rows is None else None
            r = structured_bracket(sub, bH, problem.region, Wq, C, batch, sub_glm)
        G[H], beta[H] = r.g, r.beta
    if ml:
        sub = problem.examples.subset(L)
        reach = problem.region.norm_bound()
        if isinstance(problem.model.loss.structure, PiecewiseLinearStructure):
            A, b = sub.pieces()
            Z = sol.z[light_start:light_start + ml * k].reshape(ml, k) * m
            pi = project_simplex_rows(Z[:, bL.pi_rows])
            G[L] = row_combine(pi, A)
            pib = row_dot(pi, b)
            M = b.shape[1]
            beta[L] = pib - (M + 64.0) * EPS * (row_dot(pi, np.abs(b))
                                                + row_norm(A).max(axis=1) * reach)
        else:
            a, b, link = sub.glm()
            u = row_dot(a, w_feas) + b
            pi = link.clip_to_dual_domain(link.derivative_bounds(u)[1])
            phistar = link.conjugate(pi)
            G[L] = pi[:, None] * a
            beta[L] = (pi * b - phistar - rounding_margin(pi * b, phistar) - link.conjugate_rounding(pi)
                       - 64 * EPS * np.abs(pi) * row_norm(a) * reach)
    # for a generalized-linear example the certified loss is its GLM form, while the multipliers
    # above minorize its recovered pieces: charge the difference (per example; 0 for others)
    glm = problem.examples.glm()
    if glm is not None and np.any(glm.is_glm):
        gap = problem.examples.glm_pieces_gap(problem.region.norm_bound())  # sup over y ∈ U
        with np.errstate(invalid="ignore"):
            beta = np.where(glm.is_glm, np.nextafter(beta - gap, -np.inf), beta)
    # the certificate's bounds are relative to the problem's per-example offsets; a valid minorant of
    # f_i stays one of f_i − κ_i when κ_i is subtracted and the difference rounded down
    off = problem.offsets
    shifted = np.nonzero(np.asarray(off != 0, dtype=bool))[0]
    if shifted.size:
        beta = beta.copy()
        for i in shifted:  # the offsets are exact rationals: subtract exactly, then round down
            beta[i] = round_down(Fraction(float(beta[i])) - off[i]) if math.isfinite(beta[i]) else -math.inf
    cut = average_cut(problem, G, beta)
    return JointSolution(w=w_feas, cut=cut, status=sol.status, iterations=sol.iterations,
                         seconds=sol.solve_time, n_heavy=int(mh))
