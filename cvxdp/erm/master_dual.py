"""The bundle method's master program solved by its dual, when its minimizer lies inside ``U``.

The master program of :func:`~cvxdp.erm.problem.bundle_master` is

    min_{w ∈ U}  max_t (<g_t, w> + β_t)  +  (1/m) Σ_{i ∈ K} max_j (<g_ij, w> + β_ij)
                 + (λ/2)||w − w₀||² + (μ/2)||w − w_p||²,

the cuts' model plus each kink row's own pieces.  Writing each maximum over its simplex and minimizing
over ``w ∈ R^d`` in closed form gives its dual

    max_{θ ∈ Δ_k, ρ_i ∈ Δ_J}  fᵀx − ||Aᵀx||²/(2Λ),      x = (θ, ρ_1, …, ρ_|K|),

with ``Λ = λ + μ``, ``c = (λ w₀ + μ w_p)/Λ``, the rows of ``A`` the slopes ``g_t`` and ``g_ij/m``, ``f`` the
values at ``c`` (``β_t + <g_t, c>`` and ``(β_ij + <g_ij, c>)/m``), and the minimizer ``w = c − Aᵀx/Λ``.  If
that point is in ``U`` (by the exact membership test) the constraint ``w ∈ U`` is idle and the dual solves
the master program; otherwise the caller hands it to the conic solver.

The dual is a quadratic program over a product of simplices whose Hessian ``AAᵀ/Λ`` has rank at most
``d``.  A primal-dual interior-point method solves it: the Newton system is block diagonal (a diagonal
plus one equality per simplex) up to that rank-``d`` term, so the Woodbury identity solves it in
``O(N d²)`` for ``N`` weights — thousands of kink rows' pieces cost milliseconds where a general conic
solver's factorization costs a tenth of a second.  Its capacitance matrix ``I + Uᵀ Q U`` (``Q`` the
projected inverse of the diagonal, positive semidefinite) is symmetric positive definite with
eigenvalues at least 1, so the identity is well conditioned.

Like the conic solver's, the result is a *proposal*: weights and a point.  The caller projects the
weights onto their simplices, evaluates the certified bound they give and charges its rounding
(:func:`~cvxdp.erm.problem._finish_master`); a poor proposal can only give a weaker bound, never a
false one.  ``None`` (the conic program then solves the master) when the point is not certainly in
``U``, the method does not converge, or its weights do not close the duality gap in the program's own
units (:data:`GAP_TOLERANCE`).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

#: Interior-point iterations before giving up (the conic program then solves the master).
MAX_STEPS = 80
#: The largest duality gap, relative to ``1 + |value|`` in the program's own units, of a proposal returned
#: (the stopping rule works in scaled units; a badly scaled program can stop far off — found by review).
GAP_TOLERANCE = 1e-9


def simplex_master(problem, G: np.ndarray, B: np.ndarray,
                   prox: tuple[float, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The master program without kink rows, by its dual (``x = θ`` alone), when its minimizer lies
    inside ``U``: ``max_{θ ∈ Δ} fᵀθ − θᵀHθ/2`` with ``H = G Gᵀ/Λ``, solved with a dense Newton
    system (``k`` weights, at most a few dozen: a millisecond).  Returns ``(θ, w)`` or ``None``."""
    k = G.shape[0]
    with np.errstate(all="ignore"):
        Lam, c = _centre(problem, prox)
        H = (G @ G.T) / Lam
        f = B + G @ c
        if not (np.all(np.isfinite(H)) and np.all(np.isfinite(f))):
            return None
        scale = max(1.0, float(np.max(np.abs(H))), float(np.max(f) - np.min(f)))
        H, f = H / scale, (f - np.max(f)) / scale  # the same maximizer; f ≤ 0, |entries| ≤ 1
        theta = np.full(k, 1.0 / k)
        z = np.ones(k)
        nu = float(np.max(f - H @ theta)) + 1.0
        ones = np.ones(k)
        for _ in range(60):
            r_d = H @ theta - f + nu - z
            r_p = float(theta.sum()) - 1.0
            gap = float(theta @ z) / k
            if gap < 1e-15 and float(np.max(np.abs(r_d))) < 1e-13 and abs(r_p) < 1e-15:
                break
            sigma = 0.1 if gap > 1e-8 else 0.01
            r_c = theta * z - sigma * gap
            K = np.zeros((k + 1, k + 1))
            K[:k, :k] = H + np.diag(z / theta)
            K[:k, k] = ones
            K[k, :k] = ones
            rhs = np.concatenate([-r_d - r_c / theta, [-r_p]])
            try:
                step = np.linalg.solve(K, rhs)
            except np.linalg.LinAlgError:
                return None
            d_theta, d_nu = step[:k], float(step[k])
            d_z = -(r_c + z * d_theta) / theta
            alpha = _step_length(theta, d_theta, z, d_z)
            theta = theta + alpha * d_theta
            z = z + alpha * d_z
            nu = nu + alpha * d_nu
            if not (np.all(np.isfinite(theta)) and np.all(theta > 0) and np.all(z > 0)):
                return None
        else:
            return None
        theta = theta / float(theta.sum())
        point = c - (G.T @ theta) / Lam
        ok = _closes_gap(problem, prox, G, B, None, None, theta, None, point) and _inside(problem, point)
    return (theta, point) if ok else None


def product_simplex_master(problem, G: np.ndarray, B: np.ndarray, kink_g: np.ndarray, kink_beta: np.ndarray,
                           prox: tuple[float, np.ndarray] | None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The master program with kink rows (``kink_g`` of shape ``(K, J, d)``, ``kink_beta`` ``(K, J)``), by
    its dual over ``Δ_k × Δ_J^K``, when its minimizer lies inside ``U`` (module docstring).

    The weights are kept as the cuts' ``θ`` (``k``) and the kink rows' ``ρ``, stored piece-major
    (``(J, K)``, with slopes ``(J, K, d)``) so that each simplex's sum is a sum over the leading axis.
    Stops when the duality gap and the stationarity residual are at rounding level; the simplices'
    sums, which the Woodbury solves keep only to about ``10⁻¹¹`` once some weights are tiny, are
    restored by normalizing (the caller projects and charges that rounding anyway).  Returns
    ``(θ, ρ, w)`` — ``ρ`` as ``(K, J)``, the multipliers of each kink row's pieces — and the master's
    minimizer, or ``None``.
    """
    m = problem.m
    k, (nk, J, d) = G.shape[0], kink_g.shape
    with np.errstate(all="ignore"):
        Lam, c = _centre(problem, prox)
        slopes = np.ascontiguousarray(kink_g.transpose(1, 0, 2)).reshape(J * nk, d)
        f_t = B + G @ c
        f_r = ((kink_beta.T.reshape(-1) + slopes @ c) / m).reshape(J, nk)
        if not (np.all(np.isfinite(G)) and np.all(np.isfinite(slopes)) and np.all(np.isfinite(f_t))
                and np.all(np.isfinite(f_r))):
            return None
        # a constant per simplex does not move the maximizer: each block's values shifted to max 0
        f_t, f_r = f_t - np.max(f_t), f_r - np.max(f_r, axis=0)
        U_r = slopes / m
        scale = max(1.0, float(np.max(np.einsum("kd,kd->k", G, G))) / Lam,
                    float(np.max(np.einsum("nd,nd->n", U_r, U_r))) / Lam, float(-np.min(f_t)),
                    float(-np.min(f_r)))
        root = np.sqrt(Lam * scale)
        U_t, U_r = G / root, U_r / root  # H = UUᵀ with |H_ij| ≤ 1, values in [−1, 0]
        f_t, f_r = f_t / scale, f_r / scale
        x_t, x_r = np.full(k, 1.0 / k), np.full((J, nk), 1.0 / J)
        z_t, z_r = np.ones(k), np.ones((J, nk))
        v = U_t.T @ x_t + x_r.reshape(-1) @ U_r
        nu_t = float(np.max(f_t - U_t @ v)) + 1.0
        nu_r = np.max(f_r - (U_r @ v).reshape(J, nk), axis=0) + 1.0
        n = k + nk * J
        for _ in range(MAX_STEPS):
            v = U_t.T @ x_t + x_r.reshape(-1) @ U_r
            rd_t = U_t @ v - f_t + nu_t - z_t
            rd_r = (U_r @ v).reshape(J, nk) - f_r + nu_r - z_r
            gap = (float(x_t @ z_t) + float(x_r.reshape(-1) @ z_r.reshape(-1))) / n
            residual = float(np.max(np.abs(np.concatenate([rd_t, rd_r.reshape(-1)]))))  # NaN stays NaN
            if gap < 1e-14 and residual < 1e-10:
                break
            if not gap > 0.0:  # NaN, or every product underflowed: no step to take
                return None
            rp_t, rp_r = float(x_t.sum()) - 1.0, x_r.sum(axis=0) - 1.0
            try:
                solve = _kkt_solver((U_t, U_r), (z_t / x_t, z_r / x_r))
                # Mehrotra's predictor: the affine step (complementarity driven to 0) ...
                (ax_t, ax_r), _ = solve((-rd_t - z_t, -rd_r - z_r), (-rp_t, -rp_r))
                az_t, az_r = -z_t - z_t * ax_t / x_t, -z_r - z_r * ax_r / x_r
                step = min(_step_length(x_t, ax_t, z_t, az_t, 1.0), _step_length(x_r, ax_r, z_r, az_r, 1.0))
                affine = (float((x_t + step * ax_t) @ (z_t + step * az_t))
                          + float(np.einsum("jk,jk->", x_r + step * ax_r, z_r + step * az_r))) / n
                sigma = min(1.0, max(affine / gap, 0.0)) ** 3
                # ... and the corrector, aiming at σμ with the predictor's second-order term
                rc_t = x_t * z_t + ax_t * az_t - sigma * gap
                rc_r = x_r * z_r + ax_r * az_r - sigma * gap
                (dx_t, dx_r), (dnu_t, dnu_r) = solve((-rd_t - rc_t / x_t, -rd_r - rc_r / x_r), (-rp_t, -rp_r))
            except (np.linalg.LinAlgError, ValueError):  # no factorization: the conic solver's turn
                return None
            dz_t, dz_r = -(rc_t + z_t * dx_t) / x_t, -(rc_r + z_r * dx_r) / x_r
            alpha = min(_step_length(x_t, dx_t, z_t, dz_t), _step_length(x_r, dx_r, z_r, dz_r))
            x_t, x_r = x_t + alpha * dx_t, x_r + alpha * dx_r
            z_t, z_r = z_t + alpha * dz_t, z_r + alpha * dz_r
            nu_t, nu_r = nu_t + alpha * dnu_t, nu_r + alpha * dnu_r
            if not all(np.all(np.isfinite(a)) and np.all(a > 0) for a in (x_t, x_r, z_t, z_r)):
                return None
        else:
            return None
        theta = x_t / float(x_t.sum())
        rho = (x_r / x_r.sum(axis=0)).T
        point = c - (G.T @ theta + np.einsum("kj,kjd->d", rho, kink_g) / m) / Lam
        ok = (_closes_gap(problem, prox, G, B, kink_g, kink_beta, theta, rho, point)
              and _inside(problem, point))
    return (theta, rho, point) if ok else None


def _kkt_solver(U, D):
    """A solver of ``(UUᵀ + diag(D)) dx + Eᵀ dν = a``, ``E dx = b`` (``E`` sums each simplex), by Woodbury,
    factored once for its right-hand sides ``(a, b)``.

    Each argument is a pair: the cuts' block (``θ``: vectors of ``k``, ``U_θ`` of shape ``(k, d)``) and
    the kink rows' blocks (``ρ``: ``(J, K)`` arrays, one simplex per column; ``U_ρ`` of shape
    ``(J·K, d)``).  Without ``UUᵀ`` the system splits into one per simplex: ``dx = D⁻¹(a − dν)`` with
    ``dν = (Σ D⁻¹a − b)/Σ D⁻¹``; call that solution operator ``K₀⁻¹``.  Then
    ``K⁻¹ = K₀⁻¹ − K₀⁻¹W (I + WᵀK₀⁻¹W)⁻¹ WᵀK₀⁻¹`` with ``W = [U; 0]``, and the capacitance
    ``I + WᵀK₀⁻¹W`` is symmetric positive definite (eigenvalues at least 1).  Each solve takes one step
    of iterative refinement: the identity loses digits when ``D`` spans many orders of magnitude.
    """
    (U_t, U_r), (D_t, D_r) = U, D
    J, nk = D_r.shape
    d = U_t.shape[1]
    inv_t, inv_r = 1.0 / D_t, 1.0 / D_r
    sum_t, sum_r = float(inv_t.sum()), inv_r.sum(axis=0)
    # K₀⁻¹ W = Q: per simplex b, Q_b = D_b⁻¹U_b − D_b⁻¹1 T_bᵀ with T_b = U_bᵀD_b⁻¹1 / 1ᵀD_b⁻¹1, so
    # UᵀQ = UᵀD⁻¹U − Σ_b (1ᵀD_b⁻¹1) T_b T_bᵀ; Q itself is never formed (Q c = D⁻¹(U c − T_b c) per block)
    P_t, P_r = inv_t[:, None] * U_t, inv_r.reshape(-1, 1) * U_r
    T_t, T_r = P_t.sum(axis=0) / sum_t, P_r.reshape(J, nk, d).sum(axis=0) / sum_r[:, None]
    capacitance = (np.eye(d) + U_t.T @ P_t - sum_t * np.outer(T_t, T_t) + U_r.T @ P_r
                   - (sum_r[:, None] * T_r).T @ T_r)
    factor = cho_factor(capacitance, check_finite=False)

    def once(a_t, a_r, b_t, b_r):
        s_t, s_r = inv_t * a_t, inv_r * a_r  # K₀⁻¹ (a, b), then the rank-d correction
        t_t, t_r = (float(s_t.sum()) - b_t) / sum_t, (s_r.sum(axis=0) - b_r) / sum_r
        x_t, x_r = s_t - inv_t * t_t, s_r - inv_r * t_r
        coef = cho_solve(factor, U_t.T @ x_t + x_r.reshape(-1) @ U_r, check_finite=False)
        tc_t, tc_r = float(T_t @ coef), T_r @ coef
        return (x_t - inv_t * (U_t @ coef - tc_t), x_r - inv_r * ((U_r @ coef).reshape(J, nk) - tc_r),
                t_t - tc_t, t_r - tc_r)

    def solve(a, b):
        (a_t, a_r), (b_t, b_r) = a, b
        dx_t, dx_r, dnu_t, dnu_r = once(a_t, a_r, b_t, b_r)
        v = U_t.T @ dx_t + dx_r.reshape(-1) @ U_r
        e = once(a_t - (U_t @ v + D_t * dx_t + dnu_t), a_r - ((U_r @ v).reshape(J, nk) + D_r * dx_r + dnu_r),
                 b_t - float(dx_t.sum()), b_r - dx_r.sum(axis=0))
        return (dx_t + e[0], dx_r + e[1]), (dnu_t + e[2], dnu_r + e[3])

    return solve


def _step_length(x: np.ndarray, dx: np.ndarray, z: np.ndarray, dz: np.ndarray, fraction: float = 0.99
                 ) -> float:
    """The largest step up to 1 that keeps ``x`` and ``z`` positive, times ``fraction``."""
    alpha = 1.0
    for v, dv in ((x, dx), (z, dz)):
        neg = dv < 0
        if np.any(neg):
            alpha = min(alpha, fraction * float(np.min(-v[neg] / dv[neg])))
    return alpha


def _centre(problem, prox: tuple[float, np.ndarray] | None) -> tuple[float, np.ndarray]:
    """``Λ = λ + μ`` and the centre ``c = (λ w₀ + μ w_p)/Λ`` of the two quadratic terms."""
    lam = problem.lam
    mu = 0.0 if prox is None else float(prox[0])
    Lam = lam + mu
    c = lam * problem.w0 if prox is None else lam * problem.w0 + mu * np.asarray(prox[1], float)
    return Lam, c / Lam


def _closes_gap(problem, prox, G, B, kink_g, kink_beta, theta, rho, point) -> bool:
    """Whether the weights and their point close the duality gap in the program's own units.

    The point is the Lagrangian's minimizer for the weights, so the dual value is the weighted pieces at
    the point plus the same quadratic terms as the primal; the gap is what the maxima exceed the weighted
    sums by, ``max_t ℓ_t(w) − Σθ_t ℓ_t(w) + (1/m) Σ_i (max_j p_ij(w) − Σ_j ρ_ij p_ij(w)) ≥ 0``.
    """
    cuts = G @ point + B
    gap = float(np.max(cuts) - theta @ cuts)
    value = float(np.max(cuts))
    if kink_g is not None:
        pieces = kink_g @ point + kink_beta
        tops = np.max(pieces, axis=1)
        gap += float(np.sum(tops - np.sum(rho * pieces, axis=1))) / problem.m
        value += float(np.sum(tops)) / problem.m
    value += 0.5 * problem.lam * float(np.sum((point - problem.w0) ** 2))
    if prox is not None:
        value += 0.5 * float(prox[0]) * float(np.sum((point - np.asarray(prox[1], float)) ** 2))
    return bool(gap <= GAP_TOLERANCE * (1.0 + abs(value)))  # False for NaN


def _inside(problem, point: np.ndarray) -> bool:
    """Whether the point is finite and certainly in ``U`` (then ``w ∈ U`` was idle)."""
    if not np.all(np.isfinite(point)):
        return False
    inside = problem.feasible_set.certainly_contains(point[None, :])
    return inside is not None and bool(inside[0])
