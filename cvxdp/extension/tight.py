"""Examples whose extension has a closed form at the query point: tight rows and clipped rows.

For a generalized-linear example ``f(y, z) = φ(<a, y> + b)`` and a query point ``w ∈ U``, let
``π`` be the subgradient of least modulus of ``φ`` at ``u_w = <a, w> + b``.  If
``||π a|| ≤ C``, then

    f_{C,U}(w, z) = f(w, z),    y* = w,

and ``(g, π) = (π a, π)`` is an exact dual point of the extension's dual (Appendix E.3):
``σ_U(g − π a) = σ_U(0) = 0`` and, by Fenchel–Young with equality,
``<g, w> + π b − φ*(π) = π u_w − φ*(π) = φ(u_w)`` — the lower bound meets the upper bound
``f(w) + C·||w − w||``.  So the inner problem needs no search.  The minorant

    u ↦ <π a, u> + π b − φ*(π)  ≤  f_{C,U}(u, z)   for every u ∈ R^d

holds for *any* ``π`` in ``dom φ*`` with ``||π a|| ≤ C``: the test below only chooses the path,
never the validity.  Rows that are ``C``-Lipschitz on ``U`` (``L_φ ||a|| ≤ C``), inactive hinge
rows (``π = 0``) and constant rows (``a = 0``) are such rows at every ``w ∈ U``; with a public
``C`` near the bulk of ``||x||`` (what the private tail histogram picks), they are most rows.

**Clipped rows.**  If the row is steeper than ``C`` at ``w`` (``|π_w| ||a|| > C``), its extension
moves ``y`` from ``w`` down the loss along ``∓a`` until the slope falls to ``C/||a||``: with
``π* = sign(π_w) C/||a||`` and ``u*`` a point where ``π* ∈ ∂φ(u*)`` (the kink of a two-piece
link, ``(φ')⁻¹(π*)`` of a smooth one), the foot point ``y* = w − ((u_w − u*)/||a||²) a`` gives the
upper bound ``φ(u*) + C |u_w − u*|/||a||``, and the pair ``(π* a, π*)`` the lower bound
``π* u_w − φ*(π*) = π*(u_w − u*) + φ(u*)`` — the same number.  So wherever ``y* ∈ U`` (by the exact
membership test) the row is exact without a search: ``f_{C,U}(w) = φ(u*) + (C/||a||)|u_w − u*|``,
the loss clipped to slope ``C`` (the extension on all of ``R^d``), and ``U`` does not bind.  Where
``y*`` leaves ``U`` the row is the search's.

**Per example.**  Whether a row is tight, its ``π`` and its certified bounds are functions of its
own ``(a, b, φ)``, the query point, ``C`` and ``U`` — never of other rows; the arithmetic is row by
row (:func:`cvxdp.numerics.row_dot`, elementwise), so a row's bits do not depend on the batch it is
evaluated in.

**Rounding.**  ``||π a|| ≤ C`` must hold exactly, since ``g = π a`` is never clipped: the test is
``|π| fl(||a||) ≤ C (1 − (2d + 64) ε)``, which covers the norm's rounding, and a clipped row's
``π*`` is shrunk by that factor too (its bracket then has a width of ``(2d + 64) ε C ||w − y*||``).
A clipped row's upper bound is evaluated at the float foot point, with the rounding of its
argument, of the link and of ``||w − y||`` charged as everywhere in the oracle.  The upper bound
charges the argument's rounding times the link's slope next to it and the link's own rounding
(``y = w`` exactly, so ``||w − y|| = 0`` has none); the intercept charges the rounding of ``π b``
and of ``φ*(π)``; the lower bound at ``w`` also charges ``<π a, w>``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cvxdp.extension.certificates import upper_margin
from cvxdp.geometry import Domain
from cvxdp.links import Link, PiecewiseLinearLink
from cvxdp.numerics import EPS, argument_rounding, rounding_margin, row_dot, row_norm


def least_slope(link: Link, u: np.ndarray) -> np.ndarray:
    """The subgradient of least modulus of each row's link at its own argument ``u``."""
    left, right = link.derivative_bounds(u)
    return np.clip(0.0, left, right)


@dataclass
class TightRows:
    """Which rows are tight at their query point, with their arguments and slopes (all rows).

    ``mask[i]`` is True where ``y* = w_i`` and ``(π_i a_i, π_i)`` is the exact dual pair; ``u``
    and ``pi`` are defined on every finite row (stand-ins elsewhere), so array code can run on all
    rows at their own positions.
    """

    mask: np.ndarray
    u: np.ndarray
    pi: np.ndarray


def tight_rows(w: np.ndarray, a: np.ndarray, b: np.ndarray, link: Link, C: float, region: Domain,
               a_norm: np.ndarray, candidates: np.ndarray | None = None) -> TightRows:
    """The rows tight at ``w`` (``(d,)``, shared, or ``(m, d)``, one per row) — see the module docstring.

    ``a_norm`` is ``fl(||a_i||)``; ``candidates`` (default: all rows) restricts the test, e.g. to
    the generalized-linear rows without a level offset.  ``w`` must lie in ``U`` by the region's
    exact membership test (a region without one, ``certainly_contains → None``, has no tight rows).
    """
    d = a.shape[1]
    w = np.asarray(w, dtype=float)
    shared = w.ndim == 1
    with np.errstate(invalid="ignore", over="ignore"):
        # row by row: BLAS matrix-vector products round differently with the batch's shape
        u = row_dot(a, w) + b
        pi = least_slope(link, u)
        steep = np.abs(pi) * a_norm
    mask = np.isfinite(u) & np.isfinite(pi) & (steep <= C * (1.0 - (2.0 * d + 64.0) * EPS))
    if candidates is not None:
        mask &= candidates
    if np.any(mask):
        inside = region.certainly_contains(w[None, :] if shared else w[mask])
        if inside is None:
            mask[:] = False
        elif shared:
            mask &= bool(inside[0])
        else:
            mask[mask] = inside
    return TightRows(mask=mask, u=u, pi=pi)


@dataclass
class TightBounds:
    """Certified bounds of tight rows: ``lower ≤ f_{C,U}(w) ≤ upper`` and the minorant's intercept
    ``β`` (slope ``π a``): ``f_{C,U}(u) ≥ <π a, u> + β`` for all ``u``."""

    upper: np.ndarray
    lower: np.ndarray
    beta: np.ndarray


def tight_bounds(u: np.ndarray, pi: np.ndarray, b: np.ndarray, link: Link, a_norm: np.ndarray,
                 w_norm: np.ndarray | float, d: int, reach: float) -> TightBounds:
    """Certified bounds of rows tight at ``w`` (arrays over those rows; ``link`` restricted to them).

    ``u = fl(<a, w> + b)``, ``π`` the row's slope, ``w_norm = fl(||w||)``.  The upper bound is
    ``φ(u)`` moved by the argument's rounding times the link's slope next to ``u`` and by the
    link's own rounding; ``β = π b − φ*(π)`` moved down by their rounding and by
    ``σ_U(fl(π a) − π a) ≤ reach · 2ε |π| ||a||`` (``reach ≥ max_U ||u||``), so the minorant holds with the
    float slope ``fl(π a)`` the oracle returns as well as with ``π a`` (found by review: without it, a
    per-row minorant of ``evaluate`` rose above ``f_{C,U}`` by 10⁻¹⁷); the lower bound is
    ``π <a, w> + β`` with ``<a, w> = u − b`` recomputed from the rounded ``u`` and charged the
    dot product's rounding as well as the subtraction's.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        du = argument_rounding(d, a_norm, w_norm, b)
        fval = link.value(u)
        upper = fval + rounding_margin(fval) + link.slope_bound_near(u, du) * du
        phistar = link.conjugate(pi)
        pib = pi * b
        beta = pib - phistar - (rounding_margin(pib, phistar) + link.conjugate_rounding(pi)
                                + reach * 2.0 * EPS * np.abs(pi) * a_norm)
        # <a, w> = u − b up to the argument's rounding du (and the subtraction's, charged with the rest)
        aw = u - b
        piaw = pi * aw
        lower = piaw + beta - (np.abs(pi) * (du + 4.0 * EPS * (np.abs(u) + np.abs(b)))
                               + rounding_margin(piaw, beta))
    return TightBounds(upper=np.where(np.isfinite(upper), upper, np.inf),
                       lower=np.where(np.isfinite(lower), lower, -np.inf),
                       beta=np.where(np.isfinite(beta), beta, -np.inf))


def slope_point(link: Link, pi: np.ndarray) -> np.ndarray:
    """A point ``u`` with ``π ∈ ∂φ(u)`` per row (NaN where this module does not know one): the kink of
    a two-piece link for ``π`` between its slopes, ``(φ')⁻¹(π)`` of a smooth link inside its dual
    domain."""
    pi = np.asarray(pi, dtype=float)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if isinstance(link, PiecewiseLinearLink):
            if link.slopes.shape[-1] != 2:
                return np.full(pi.shape, np.nan)
            lo, hi = link.dual_domain()
            kink = link.kinks()[:, 0]
            return np.where((lo <= pi) & (pi <= hi), kink, np.nan)
        inverse = getattr(link, "inverse_derivative", None)
        if inverse is None:
            return np.full(pi.shape, np.nan)
        lo, hi = link.dual_domain()
        return np.where((lo < pi) & (pi < hi), inverse(pi), np.nan)


@dataclass
class ClosedFormRows:
    """The rows of a batch solved in closed form at their query point, with certified bounds.

    ``rows`` (ascending indices) are tight or clipped rows; over them, ``pi`` is the slope of the
    exact dual pair ``(π a, π)``, ``upper``/``lower``/``beta`` the certified bounds and intercept,
    ``clipped`` tells the clipped ones, whose inner points ``foot`` (``(k, d)``, in row order) are
    the foot points (a tight row's inner point is ``w``).
    """

    rows: np.ndarray
    pi: np.ndarray
    upper: np.ndarray
    lower: np.ndarray
    beta: np.ndarray
    clipped: np.ndarray
    foot: np.ndarray


def closed_form_rows(w: np.ndarray, a: np.ndarray, b: np.ndarray, link: Link, C: float, region: Domain,
                     a_norm: np.ndarray, candidates: np.ndarray | None = None) -> ClosedFormRows:
    """Tight and clipped rows at ``w`` (``(d,)`` shared or ``(m, d)``), certified (module docstring).

    Every row's path and bounds are functions of that row, ``w``, ``C`` and ``U`` only.
    """
    d = a.shape[1]
    w = np.asarray(w, dtype=float)
    shared = w.ndim == 1
    tight = tight_rows(w, a, b, link, C, region, a_norm, candidates)
    w_norm_all = (row_norm(w[None, :]) if shared  # as the oracle computes it, row by row
                  else row_norm(w))
    # on every row (elementwise, so a row's bits are its own), then kept where tight: cheaper than
    # copying the link's rows out when most rows are tight, as they are for a C near the data's scale
    reach = region.norm_bound()
    tb = tight_bounds(tight.u, tight.pi, b, link, a_norm, w_norm_all, d, reach)
    upper, lower, beta, slope = tb.upper, tb.lower, tb.beta, tight.pi
    # clipped candidates: steeper than C at w, with a point u* of slope ±C/||a|| toward which f falls
    shrink = 1.0 - (2.0 * d + 64.0) * EPS
    pool = ~tight.mask & np.isfinite(tight.u) & np.isfinite(tight.pi) & (tight.pi != 0) & (a_norm > 0)
    if candidates is not None:
        pool &= candidates
    c_rows = np.nonzero(pool)[0]
    foot = np.zeros((0, d))
    if c_rows.size:
        lk = link.subset(c_rows)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            an = a_norm[c_rows]
            pi = np.sign(tight.pi[c_rows]) * (C * shrink / an)
            u_w = tight.u[c_rows]
            u_star = slope_point(lk, pi)
            step = (u_w - u_star) / (an * an)
            ok = np.isfinite(step) & (np.sign(step) == np.sign(pi))
        c_rows, pi, u_w, step, an = c_rows[ok], pi[ok], u_w[ok], step[ok], an[ok]
        if c_rows.size:
            wc = np.broadcast_to(w, (c_rows.size, d)) if shared else w[c_rows]
            y = wc - step[:, None] * a[c_rows]
            inside = region.certainly_contains(y)
            keep = np.zeros(c_rows.size, dtype=bool) if inside is None else np.asarray(inside, dtype=bool)
            c_rows, pi, u_w, an, y, wc = c_rows[keep], pi[keep], u_w[keep], an[keep], y[keep], wc[keep]
        if c_rows.size:
            lk = link.subset(c_rows)
            bc = b[c_rows]
            wn = w_norm_all if shared else w_norm_all[c_rows]
            c_upper, c_lower, c_beta = _clipped_bounds(wc, y, a[c_rows], bc, lk, C, pi, u_w, an, wn, d,
                                                       reach)
            upper, lower, beta, slope = (np.array(v, copy=True) for v in (upper, lower, beta, slope))
            upper[c_rows], lower[c_rows], beta[c_rows], slope[c_rows] = c_upper, c_lower, c_beta, pi
            foot = y
    solved = tight.mask.copy()
    solved[c_rows] = True
    rows = np.nonzero(solved)[0]  # ascending, and so are the clipped rows' foot points
    clipped = np.zeros(solved.size, dtype=bool)
    clipped[c_rows] = True
    return ClosedFormRows(rows=rows, pi=slope[rows], upper=upper[rows], lower=lower[rows], beta=beta[rows],
                          clipped=clipped[rows], foot=foot)


def _clipped_bounds(w: np.ndarray, y: np.ndarray, a: np.ndarray, b: np.ndarray, link: Link, C: float,
                    pi: np.ndarray, u_w: np.ndarray, a_norm: np.ndarray, w_norm: np.ndarray | float,
                    d: int, reach: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Certified ``(upper, lower, β)`` of clipped rows: the upper bound at the float foot point
    ``y ∈ U``, the lower bound and intercept from the pair ``(π a, π)`` at ``w``."""
    with np.errstate(invalid="ignore", over="ignore"):
        u_y = row_dot(a, y) + b
        y_norm = row_norm(y)
        dist = row_norm(w - y)
        du_y = argument_rounding(d, a_norm, y_norm, b)
        fval = link.value(u_y)
        upper = fval + C * dist
        value_error = link.slope_bound_near(u_y, du_y) * du_y
        upper = upper + upper_margin(fval, C, dist, d, value_error, w_norm, y_norm)
    bounds = tight_bounds(u_w, pi, b, link, a_norm, w_norm, d, reach)
    return np.where(np.isfinite(upper), upper, np.inf), bounds.lower, bounds.beta


__all__ = ["ClosedFormRows", "TightBounds", "TightRows", "closed_form_rows", "least_slope", "slope_point",
           "tight_bounds", "tight_rows"]
