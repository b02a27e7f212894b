"""Closed-form extension oracle for generalized-linear losses on balls and lenses.

For ``f(y, z) = φ(<a, y> + b)`` and ``U`` a ball ``B(c₁, r₁)`` or a lens
``B(c₁, r₁) ∩ B(c₂, r₂)``, the inner problem

    f_{C,U}(w) = min_{y ∈ U} φ(<a, y> + b) + C ||w − y||

is invariant under rotations fixing ``a``, ``c₂ − c₁`` and ``w − c₁``, so its
solution lies in ``c₁ + span{a, c₂ − c₁, w − c₁}`` — at most three dimensions
whatever ``d`` is.  In an orthonormal basis ``(q₁ = a/||a||, q₂, q₃)`` of that
span, write ``y = c₁ + t q₁ + p₂ q₂ + p₃ q₃``.  For fixed ``t`` (that is,
fixed ``u = ||a|| t + <a, c₁> + b``) the best ``(p₂, p₃)`` is the projection of
``w``'s in-plane coordinates onto the slice of ``U`` — the intersection of two
disks — which has a closed form.  That leaves a convex function of one
variable,

    J(t) = φ(||a|| t + b̃) + C sqrt((w₁ − t)² + dist_in(t)²),

minimized by golden-section search (vectorized over all examples, ~100 steps)
plus exact evaluation at ``φ``'s kinks and the interval ends.  The dual point
is ``g = C (w − y*)/||w − y*||`` and the best ``π`` for it, found by a second
1-D search on the concave function ``π ↦ π b − φ*(π) − σ_U(g − π a)``.

The bounds themselves are then evaluated in the full space, in float64, from
the lifted points: the upper bound at a point ``y`` checked to lie in ``U``,
the lower bound from the minorant formula of
:mod:`cvxdp.extension.certificates`.  Nothing here trusts a solver; examples
whose bracket is not tight enough are handed to the conic path by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cvxdp.extension.certificates import certified_inner_points, clip_to_ball, upper_margin
from cvxdp.extension.tight import closed_form_rows
from cvxdp.geometry import Ball, Lens
from cvxdp.geometry.certified import support_rounding
from cvxdp.links import Link
from cvxdp.numerics import EPS, argument_rounding, rounding_margin, row_combine, row_dot, row_norm

_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


@dataclass
class BracketResult:
    """Per-example certified bracket and dual data (arrays over examples)."""

    upper: np.ndarray
    lower: np.ndarray
    g: np.ndarray
    beta: np.ndarray
    y: np.ndarray
    pi: np.ndarray


def _unit(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = row_norm(v)
    return v / np.where(n > 0, n, 1.0)[:, None], n


def _orthonormal_basis(first: np.ndarray, others: list[np.ndarray], k: int) -> np.ndarray:
    """Rows ``(m, k, d)``: Gram–Schmidt of ``first`` then ``others``, completed where degenerate."""
    m, d = first.shape
    Q = np.zeros((m, k, d))
    Q[:, 0], _ = _unit(first)
    for j in range(1, k):
        cand = others[j - 1] if j - 1 < len(others) else np.zeros((m, d))
        v = cand - row_combine(row_dot(Q[:, :j], cand[:, None, :]), Q[:, :j])
        v, n = _unit(v)
        scale = row_norm(cand)
        bad = n <= 1e-10 * np.maximum(scale, 1e-300)
        if np.any(bad):
            # complete with the standard basis vector least aligned with the basis so far
            idx = np.nonzero(bad)[0]
            for _ in range(2):
                weights = np.sum(Q[idx, :j] ** 2, axis=1)
                pick = np.argmin(weights, axis=1)
                e = np.zeros((idx.size, d))
                e[np.arange(idx.size), pick] = 1.0
                ee = e - row_combine(row_dot(Q[idx, :j], e[:, None, :]), Q[idx, :j])
                ee, _ = _unit(ee)
                v[idx] = ee
        # re-orthogonalize once for numerical safety
        v = v - row_combine(row_dot(Q[:, :j], v[:, None, :]), Q[:, :j])
        v, _ = _unit(v)
        Q[:, j] = v
    return Q


def _project_two_disks(x: np.ndarray, z: np.ndarray, rho1: np.ndarray, delta: np.ndarray,
                       rho2: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Project ``(x, z)`` onto disk(0, ρ₁) ∩ disk((δ, 0), ρ₂) (or disk(0, ρ₁) alone)."""
    n1 = np.hypot(x, z)
    s1 = np.where(n1 > rho1, rho1 / np.maximum(n1, 1e-300), 1.0)
    p1x, p1z = x * s1, z * s1
    if rho2 is None:
        return p1x, p1z
    tol1 = 4 * EPS * (1.0 + rho1)
    tol2 = 4 * EPS * (1.0 + rho2)
    in2 = np.hypot(p1x - delta, p1z) <= rho2 + tol2
    n2 = np.hypot(x - delta, z)
    s2 = np.where(n2 > rho2, rho2 / np.maximum(n2, 1e-300), 1.0)
    p2x, p2z = delta + (x - delta) * s2, z * s2
    in1 = np.hypot(p2x, p2z) <= rho1 + tol1
    with np.errstate(divide="ignore", invalid="ignore"):
        xh = np.where(delta != 0, (rho1 * rho1 - rho2 * rho2 + delta * delta) / (2 * delta), 0.0)
    yh = np.sqrt(np.maximum(rho1 * rho1 - xh * xh, 0.0))
    hz = np.where(z >= 0, yh, -yh)
    px = np.where(in2, p1x, np.where(in1, p2x, xh))
    pz = np.where(in2, p1z, np.where(in1, p2z, hz))
    return px, pz


def _norm3(v: np.ndarray) -> np.ndarray:
    return np.sqrt(v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1] + v[:, 2] * v[:, 2])


def _support_two_balls(v: np.ndarray, r1: float, c2: np.ndarray | None,
                       r2: float | None) -> np.ndarray:
    """``σ`` of B(0, r₁) ∩ B(c₂, r₂) (per-row ``c₂``) at rows of ``v`` (three columns).

    The ball alone when ``c₂`` is None.  Case split as in
    :class:`~cvxdp.geometry.lens.Lens`: a single ball's maximizer if it lies in
    the other ball, else the maximum over the intersection circle.
    """
    nv = _norm3(v)
    s1 = r1 * nv
    if c2 is None:
        return s1
    inv = 1.0 / np.where(nv > 0, nv, 1.0)
    vc = v[:, 0] * c2[:, 0] + v[:, 1] * c2[:, 1] + v[:, 2] * c2[:, 2]
    s2 = vc + r2 * nv
    cc = c2[:, 0] * c2[:, 0] + c2[:, 1] * c2[:, 1] + c2[:, 2] * c2[:, 2]
    # ||r1 v̂ − c2||² ≤ r2²  and  ||c2 + r2 v̂||² ≤ r1²
    ok1 = r1 * r1 - 2.0 * r1 * vc * inv + cc <= r2 * r2
    ok2 = cc + 2.0 * r2 * vc * inv + r2 * r2 <= r1 * r1
    delta = np.sqrt(cc)
    dsafe = np.where(delta > 0, delta, 1.0)
    t = np.where(delta > 0, (r1 * r1 - r2 * r2 + cc) / (2.0 * dsafe), 0.0)
    rho = np.sqrt(np.maximum(r1 * r1 - t * t, 0.0))
    ve = vc / dsafe
    vperp = np.sqrt(np.maximum(nv * nv - ve * ve, 0.0))
    s_sph = ve * t + rho * vperp
    val = np.where(ok1, s1, np.where(ok2, s2, s_sph))
    return np.minimum(val, np.minimum(s1, s2))


class _Slices:
    """Reduced-coordinate description of one batch: examples × (ball or lens)."""

    def __init__(self, w: np.ndarray, a: np.ndarray, b: np.ndarray, region: Ball | Lens) -> None:
        m, d = a.shape
        if isinstance(region, Lens):
            c1, r1 = region.first.center, region.first.radius
            c2, r2 = region.second.center, region.second.radius
            k = min(d, 3)
            others = [np.broadcast_to(c2 - c1, (m, d)), w - c1]
        else:
            c1, r1, c2, r2 = region.center, region.radius, None, None
            k = min(d, 2)
            others = [w - c1]
        self.Q = _orthonormal_basis(a, others, k)
        self.k = k
        self.c1, self.r1, self.r2 = c1, r1, r2
        self.alpha = row_norm(a)
        self.btil = b + row_dot(a, c1)  # row-local (cvxdp.numerics.row_dot)
        red = lambda v: row_dot(self.Q, v[:, None, :])  # noqa: E731
        self.w_red = red(w - c1)
        self.c2_red = None if c2 is None else red(np.broadcast_to(c2 - c1, (m, d)))
        # pad reduced coordinates to 3 so the in-plane formulas always see (x, z)
        pad = 3 - k
        if pad:
            self.w_red = np.pad(self.w_red, ((0, 0), (0, pad)))
            if self.c2_red is not None:
                self.c2_red = np.pad(self.c2_red, ((0, 0), (0, pad)))
        # extent of U along q1
        e1 = np.zeros((m, 3))
        e1[:, 0] = 1.0
        self.t_hi = _support_two_balls(e1, r1, self.c2_red, r2)
        self.t_lo = -_support_two_balls(-e1, r1, self.c2_red, r2)

    def inplane(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rho1 = np.sqrt(np.maximum(self.r1 * self.r1 - t * t, 0.0))
        if self.c2_red is None:
            return _project_two_disks(self.w_red[:, 1], self.w_red[:, 2], rho1, None, None)
        d1, d2 = self.c2_red[:, 0], self.c2_red[:, 1]
        rho2 = np.sqrt(np.maximum(self.r2 * self.r2 - (t - d1) ** 2, 0.0))
        return _project_two_disks(self.w_red[:, 1], self.w_red[:, 2], rho1, d2, rho2)

    def objective(self, t: np.ndarray, link: Link, C: float) -> np.ndarray:
        px, pz = self.inplane(t)
        dist = np.sqrt((self.w_red[:, 0] - t) ** 2 + (self.w_red[:, 1] - px) ** 2
                       + (self.w_red[:, 2] - pz) ** 2)
        return link.value(self.alpha * t + self.btil) + C * dist

    def lift(self, t: np.ndarray) -> np.ndarray:
        px, pz = self.inplane(t)
        coords = np.stack([t, px, pz], axis=1)[:, : self.k]
        return self.c1 + row_combine(coords, self.Q)

    def support(self, v_red: np.ndarray) -> np.ndarray:
        return _support_two_balls(v_red, self.r1, self.c2_red, self.r2)

    def to_reduced(self, v: np.ndarray) -> np.ndarray:
        out = row_dot(self.Q, v[:, None, :])
        return np.pad(out, ((0, 0), (0, 3 - self.k))) if self.k < 3 else out


def normal_cone_slopes(w: np.ndarray, base: np.ndarray, region: Ball | Lens) -> np.ndarray:
    """The least-norm ``g ∈ base + N_U(w)`` for points ``w`` on the boundary of ``U`` (``base`` elsewhere).

    When the inner point is ``y* = w`` on a sphere of ``U`` and the slope ``base = π a`` is
    steeper than ``C``, the tight minorant has ``g − π a`` in the normal cone at ``w``: then
    ``β = π b − φ*(π) − σ_U(g − π a)`` gives ``<g, w> + β = φ(<a, w> + b)``, exactly the value.
    ``N_U(w)`` is spanned by the outward normals ``n_k`` of the spheres ``w`` lies on (within a
    relative ``10⁻⁹``); the least-norm element of ``base + cone(n_k)`` is found over one normal
    (``t = max(0, −<base, n>)``) and, on a lens's rim, over both (a 2 × 2 system, kept when
    both ``t ≥ 0``).  A proposal only: the caller evaluates and certifies the bound it gives.
    """
    balls = ([(region.first.center, region.first.radius), (region.second.center, region.second.radius)]
             if isinstance(region, Lens) else [(region.center, region.radius)])
    best = base.copy()
    best_norm = row_norm(base)
    normals, active = [], []
    for c, r in balls:
        diff = w - c
        nd = row_norm(diff)
        on = nd >= r * (1.0 - 1e-9)
        n = diff / np.where(nd > 0, nd, 1.0)[:, None]
        normals.append(n)
        active.append(on)
        t = np.maximum(0.0, -row_dot(base, n))
        cand = base + t[:, None] * n
        cn = row_norm(cand)
        take = on & (cn < best_norm)
        best[take], best_norm[take] = cand[take], cn[take]
    if len(balls) == 2:
        n1, n2 = normals
        g11, g22 = row_dot(n1, n1), row_dot(n2, n2)
        g12 = row_dot(n1, n2)
        r1, r2 = -row_dot(base, n1), -row_dot(base, n2)
        det = g11 * g22 - g12 * g12
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            t1 = (g22 * r1 - g12 * r2) / det
            t2 = (g11 * r2 - g12 * r1) / det
            cand = base + t1[:, None] * n1 + t2[:, None] * n2
            cn = row_norm(cand)
        take = active[0] & active[1] & (det > 1e-12) & (t1 >= 0) & (t2 >= 0) & (cn < best_norm)
        best[take] = cand[take]
    return best


def _float_bound(g: np.ndarray, pi: np.ndarray, w: np.ndarray, a: np.ndarray, b: np.ndarray, link: Link,
                 region: Ball | Lens) -> np.ndarray:
    """``<g, w> + π b − φ*(π) − σ_U(g − π a)`` in float64 (−∞ where not finite): to compare candidate
    dual pairs only; the chosen pair's bound is certified, rounding charged, at the end."""
    with np.errstate(invalid="ignore", over="ignore"):
        val = (row_dot(g, w) + pi * b - link.conjugate(pi)
               - region.support(g - pi[:, None] * a))
    return np.where(np.isfinite(val), val, -np.inf)


def _golden_min(fun, lo: np.ndarray, hi: np.ndarray, iters: int) -> np.ndarray:
    a, b = lo.copy(), hi.copy()
    x1 = b - _GOLDEN * (b - a)
    x2 = a + _GOLDEN * (b - a)
    f1, f2 = fun(x1), fun(x2)
    for _ in range(iters):
        left = f1 <= f2
        b = np.where(left, x2, b)
        a = np.where(left, a, x1)
        nx1 = np.where(left, b - _GOLDEN * (b - a), x2)
        nx2 = np.where(left, x1, a + _GOLDEN * (b - a))
        nf = fun(np.where(left, nx1, nx2))
        f1, f2 = np.where(left, nf, f2), np.where(left, f1, nf)
        x1, x2 = nx1, nx2
    return np.where(f1 <= f2, x1, x2)


def _golden_max(fun, lo: np.ndarray, hi: np.ndarray, iters: int) -> np.ndarray:
    return _golden_min(lambda x: -fun(x), lo, hi, iters)


def evaluate_on_balls(w: np.ndarray, a: np.ndarray, b: np.ndarray, link: Link, C: float,
                      region: Ball | Lens, iters: int = 80) -> BracketResult:
    """Certified ``[lower, upper]`` for ``f_{C,U}(w_i, z_i)`` with ``f = φ_i(<a_i, y> + b_i)``.

    ``w`` is ``(m, d)``, or ``(d,)``: one point shared by every row (a level offset's public point),
    the same bracket for each row as the point repeated, without ``m`` copies of the point's
    membership test.  Returns the bracket, the minorant slopes ``g`` and
    intercepts ``β`` (valid on all of ``R^d``), the feasible inner points ``y``
    and the conjugate weights ``π``.

    Rows no steeper than ``C`` at their query point, and rows whose loss clipped to slope ``C``
    keeps its inner point in ``U``, are exact without a search (:mod:`cvxdp.extension.tight`); the
    others take the 1-D reduction below.  The choice is
    each row's own (its numbers, ``w``, ``C``, ``U``), and both parts are computed row by row.
    """
    m, d = a.shape
    w = np.asarray(w, dtype=float)
    shared = w.ndim == 1

    def points(index: np.ndarray) -> np.ndarray:
        return np.broadcast_to(w, (index.size, d)).copy() if shared else w[index]

    solved = closed_form_rows(w, a, b, link, C, region, row_norm(a))
    rows = solved.rows
    if not rows.size:
        return _search_on_balls(points(np.arange(m)), a, b, link, C, region, iters)
    out = BracketResult(upper=np.empty(m), lower=np.empty(m), g=np.empty((m, d)), beta=np.empty(m),
                        y=np.empty((m, d)), pi=np.empty(m))
    out.upper[rows], out.lower[rows], out.beta[rows], out.pi[rows] = (solved.upper, solved.lower,
                                                                      solved.beta, solved.pi)
    out.g[rows] = solved.pi[:, None] * a[rows]
    out.y[rows] = w if shared else w[rows]
    out.y[rows[solved.clipped]] = solved.foot
    rest = np.ones(m, dtype=bool)
    rest[rows] = False
    rest = np.nonzero(rest)[0]
    if rest.size:
        r = _search_on_balls(points(rest), a[rest], b[rest], link.subset(rest), C, region, iters)
        out.upper[rest], out.lower[rest], out.beta[rest] = r.upper, r.lower, r.beta
        out.g[rest], out.y[rest], out.pi[rest] = r.g, r.y, r.pi
    return out


def _search_on_balls(w: np.ndarray, a: np.ndarray, b: np.ndarray, link: Link, C: float,
                     region: Ball | Lens, iters: int) -> BracketResult:
    """:func:`evaluate_on_balls` by the 1-D reduction: golden-section searches, then certification."""
    m, d = a.shape
    alpha = row_norm(a)
    flat = alpha == 0
    y = np.empty((m, d))
    pi = np.zeros(m)
    g = np.zeros((m, d))
    live = ~flat
    if np.any(flat):
        # constant loss: f_{C,U}(w) = φ(b) + C dist(w, U), y = Π_U(w)
        yf = region.project(w[flat])
        y[flat] = yf
        diff = w[flat] - yf
        nd = row_norm(diff)
        g[flat] = np.where(nd[:, None] > 0, C * diff / np.where(nd > 0, nd, 1.0)[:, None], 0.0)
        lf = link.subset(np.nonzero(flat)[0])
        lo_d, hi_d = lf.derivative_bounds(b[flat])
        pi[flat] = np.clip(0.0, lo_d, hi_d)
    if np.any(live):
        idx = np.nonzero(live)[0]
        lk = link.subset(idx)
        S = _Slices(w[idx], a[idx], b[idx], region)
        t_lo, t_hi = S.t_lo, S.t_hi
        t_best = _golden_min(lambda t: S.objective(t, lk, C), t_lo, t_hi, iters)
        cands = [t_best, t_lo, t_hi]
        kinks = lk.kinks()
        if kinks.size:
            tk = (np.broadcast_to(kinks, (idx.size, kinks.shape[-1])) - S.btil[:, None]) \
                / S.alpha[:, None]
            for j in range(tk.shape[1]):
                col = tk[:, j]
                ok = np.isfinite(col) & (col >= t_lo) & (col <= t_hi)
                cands.append(np.where(ok, col, t_best))
        # the point whose normal coordinate matches w (zero normal distance)
        cands.append(np.clip(S.w_red[:, 0], t_lo, t_hi))
        vals = np.stack([S.objective(c, lk, C) for c in cands])
        choice = np.argmin(vals, axis=0)
        t_star = np.stack(cands)[choice, np.arange(idx.size)]
        y_live = S.lift(t_star)
        y[idx] = y_live
        diff = w[idx] - y_live
        nd = row_norm(diff)
        scale_w = 1.0 + row_norm(w[idx])
        degenerate = nd <= 1e-10 * scale_w
        g_live = C * diff / np.where(nd > 0, nd, 1.0)[:, None]
        # degenerate: y* = w, extension equals f at w; take π ∈ ∂φ(u_w) of least modulus
        u_w = row_dot(a[idx], w[idx]) + b[idx]
        dl, dr = lk.derivative_bounds(u_w)
        pi_deg = np.clip(0.0, dl, dr)
        g_deg = clip_to_ball(pi_deg[:, None] * a[idx], C)
        g_live = np.where(degenerate[:, None], g_deg, g_live)
        g[idx] = g_live
        # best π for the chosen g: maximize π b̃ − φ*(π) − σ_red(g − π α e1)
        g_red = S.to_reduced(g_live)
        e1 = np.zeros((idx.size, 3))
        e1[:, 0] = 1.0

        def dual_obj(p: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore"):
                val = p * S.btil - lk.conjugate(p) - S.support(g_red - (p * S.alpha)[:, None] * e1)
            return np.where(np.isfinite(val), val, -np.inf)

        p_lo, p_hi = lk.dual_domain()
        p_lo = np.broadcast_to(p_lo, (idx.size,)).astype(float)
        p_hi = np.broadcast_to(p_hi, (idx.size,)).astype(float)
        u_star = S.alpha * t_star + S.btil
        sl, sr = lk.derivative_bounds(u_star)
        p0 = np.clip(0.5 * (sl + sr), p_lo, p_hi)
        span = np.maximum(np.abs(sr - sl), 1e-6 * (1.0 + np.abs(p0)))
        lo_b = np.where(np.isfinite(p_lo), p_lo, p0 - 4 * span - 1.0)
        hi_b = np.where(np.isfinite(p_hi), p_hi, p0 + 4 * span + 1.0)
        p_gold = _golden_max(dual_obj, lo_b, hi_b, iters)
        pcands = [p_gold, p0, pi_deg, np.clip(sl, p_lo, p_hi), np.clip(sr, p_lo, p_hi)]
        pvals = np.stack([dual_obj(p) for p in pcands])
        pick = np.argmax(pvals, axis=0)
        pi_live = np.stack(pcands)[pick, np.arange(idx.size)]
        pi[idx] = pi_live
        # y* inside U with a slope clipped to C: at the optimum g = π a, so σ_U(g − π a) sits at its kink
        # 0 and the golden searches converge only linearly there; the pair (π a, π) with π the
        # subgradient at u* nearest <g, a>/||a||² is then exact (kept where its bound is better)
        a_live = a[idx]
        with np.errstate(invalid="ignore", divide="ignore"):
            p_c = np.clip(np.clip(row_dot(g_live, a_live) / (S.alpha * S.alpha), sl, sr),
                          p_lo, p_hi)
        g_c = clip_to_ball(p_c[:, None] * a_live, C)
        rows_live = (w[idx], a_live, b[idx], lk, region)
        take = _float_bound(g_c, p_c, *rows_live) > _float_bound(g_live, pi_live, *rows_live)
        if np.any(take):
            g[idx[take]] = g_c[take]
            pi[idx[take]] = p_c[take]
            g_live = np.where(take[:, None], g_c, g_live)
            pi_live = np.where(take, p_c, pi_live)
        # y* at (or next to) w on U's boundary with a slope steeper than C: the direction w − y* is
        # rounding noise; the normal-cone slope is the tight one (kept where its bound is better)
        near = np.nonzero(nd <= 1e-6 * scale_w)[0]
        if near.size:
            rows = idx[near]
            g_alt = clip_to_ball(normal_cone_slopes(w[rows], pi_deg[near, None] * a[rows], region), C)
            rows_near = (w[rows], a[rows], b[rows], lk.subset(near), region)
            better = (_float_bound(g_alt, pi_deg[near], *rows_near)
                      > _float_bound(g_live[near], pi_live[near], *rows_near))
            g[rows[better]] = g_alt[better]
            pi[rows[better]] = pi_deg[near][better]
    # -- certified evaluation in the full space ------------------------------
    y, inside = certified_inner_points(region, region.make_feasible(y))
    u = row_dot(a, y) + b
    fval = link.value(u)
    dist = row_norm(w - y)
    y_norm, w_norm = row_norm(y), row_norm(w)
    du = argument_rounding(d, alpha, y_norm, b)
    upper = fval + C * dist
    upper = upper + upper_margin(fval, C, dist, d, link.lipschitz_on(u - du, u + du) * du, w_norm, y_norm)
    upper = np.where(inside, upper, np.inf)
    g = clip_to_ball(g, C)
    phistar = link.conjugate(pi)
    v = g - pi[:, None] * a
    sig = region.support(v)
    beta = pi * b - phistar - sig
    gw = row_dot(g, w)
    g_norm = row_norm(g)
    margin = (rounding_margin(pi * b, phistar, sig, gw) + link.conjugate_rounding(pi)
              + support_rounding(region, d, row_norm(v) + g_norm + np.abs(pi) * alpha)
              + (d + 64.0) * EPS * g_norm * w_norm)
    beta = beta - margin
    lower = gw + beta
    lower = np.where(np.isfinite(lower), lower, -np.inf)
    return BracketResult(upper=upper, lower=lower, g=g, beta=beta, y=y, pi=pi)
