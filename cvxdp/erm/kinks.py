"""Rows whose kink lies near the minimizer, kept exactly in the bundle method's model.

A cutting-plane model of a piecewise-linear objective converges slowly near its minimizer: the
minimizer sits on the kinks of a few rows (about ``d`` for least absolute deviations), whose dual
weights are fractional, and an aggregated cut gives every row the same weight.  Strong convexity
says where the minimizer is: within ``r* = sqrt(2·gap/λ)`` of any point with a certified gap.  A
two-piece row ``φ(<a, y> + b)`` whose kink hyperplane ``{<a, y> + b = u_k}`` misses the ball
``B(w, r*)`` is affine on it (where it has a closed form), so one cut of the other rows is exact
there; the rows whose kink meets the ball — the *kink rows* ``K`` — enter the master program
exactly, as the maximum of their two pieces.

**The pieces.**  For a two-piece link with slopes ``κ₀ ≤ 0 ≤ κ₁`` (hinge, absolute value, pinball)
each piece's slope is clipped to ``|π| ≤ C(1 − (2d + 64)ε)/||a||`` (still in ``[κ₀, κ₁]``), so

    p_j(u) = <π_j a, u> + π_j b − φ*(π_j)  ≤  f_{C,U}(u, z)      for every u ∈ R^d

(the extension's dual, Appendix E.3, with ``σ_U(g − π a) = σ_U(0) = 0``); the slope ``g_j = fl(π_j a)``
is a rounding of ``π_j a``, so ``σ_U(g_j − π_j a) ≤ max_U ||u|| · ε |π_j| ||a||`` is charged, with the
rounding of ``π_j b`` and ``φ*(π_j)``.  For a row no steeper than ``C``, ``max_j p_j`` *is* ``f_{C,U}``
on ``U``, where the master program's ``w`` lives; for a steeper one it is, near the kink, while the
row's foot point stays in ``U`` (:mod:`cvxdp.extension.tight`).  Where it is below ``f_{C,U}`` the bound
is still valid, but modelled by its pieces alone (and left out of the cuts) such a row could hold the
model below ``F`` for good — found by review, a bundle run that stalled on one record.  So every pass
also returns each kink row's own minorant at the point it visits (a few thousand rows' slopes, not
sums), which joins that row's model: a cutting-plane model per kink row, which closes on ``f_{C,U}``
like any other.

**What this changes.**  Only the solver's route: which rows are kink rows depends on the data (like the
master program's weights), but every row's function, bounds and slopes are its own, and the released
point is certified as always.  The kink rows are found per partition and only their pieces travel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cvxdp.links import PiecewiseLinearLink
from cvxdp.numerics import EPS, rounding_margin, row_dot, row_max, row_min


@dataclass
class KinkRows:
    """Kink rows of a problem: global row indices, and for each its model's pieces — the two pieces of
    its loss, then one minorant per pass since it entered — as slopes ``g`` (``(k, J, d)``) and
    intercepts ``beta`` (``(k, J)``), rounding charged: each is a minorant of the row's ``f_{C,U}``."""

    index: np.ndarray
    g: np.ndarray
    beta: np.ndarray
    #: Whether more rows met the ball than the cap, and these are the cap rows nearest their kinks.
    truncated: bool = False

    @property
    def count(self) -> int:
        return int(self.index.size)

    def with_minorants(self, g: np.ndarray, beta: np.ndarray) -> KinkRows:
        """The rows with one more piece each: the minorants ``<g_i, u> + β_i`` a pass found for them
        (``(k, d)`` and ``(k,)``); a non-finite one is left out (a copy of an existing piece instead)."""
        g = np.asarray(g, dtype=float)
        beta = np.asarray(beta, dtype=float)
        bad = ~(np.isfinite(beta) & np.all(np.isfinite(g), axis=1))
        g = np.where(bad[:, None], self.g[:, 0], g)
        beta = np.where(bad, self.beta[:, 0], beta)
        return KinkRows(self.index, np.concatenate([self.g, g[:, None, :]], axis=1),
                        np.concatenate([self.beta, beta[:, None]], axis=1), self.truncated)

    def shifted(self, offset: int) -> KinkRows:
        """The same rows with their indices moved by ``offset`` (a partition's first row)."""
        return KinkRows(self.index + offset, self.g, self.beta, self.truncated)

    @staticmethod
    def concatenate(parts: list[KinkRows], d: int) -> KinkRows:
        if not parts:
            return KinkRows(np.zeros(0, dtype=np.int64), np.zeros((0, 2, d)), np.zeros((0, 2)))
        return KinkRows(np.concatenate([p.index for p in parts]), np.concatenate([p.g for p in parts]),
                        np.concatenate([p.beta for p in parts]), any(p.truncated for p in parts))


def two_piece(link: object) -> bool:
    """Whether the kink-row model applies to this link (a two-piece piecewise-linear link)."""
    return isinstance(link, PiecewiseLinearLink) and link.slopes.shape[-1] == 2


def kink_candidates(link: PiecewiseLinearLink, a_norm: np.ndarray, candidates: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether it may be a kink row and its kink ``u_k`` — computed once per problem.

    A kink row must be a candidate of the closed form whose two slopes bracket 0, with ``a ≠ 0``.
    """
    slopes = np.broadcast_to(link.slopes, (a_norm.size, 2))
    ok = candidates & (row_min(slopes) <= 0) & (row_max(slopes) >= 0) & (a_norm > 0)
    return ok, np.broadcast_to(link.kinks()[:, 0], a_norm.shape)


def kink_rows(w: np.ndarray, radius: float, a: np.ndarray, b: np.ndarray, link: PiecewiseLinearLink,
              a_norm: np.ndarray, eligible: np.ndarray, kink: np.ndarray, C: float, reach: float,
              cap: int) -> KinkRows | None:
    """The eligible rows (:func:`kink_candidates`) whose kink hyperplane meets ``B(w, radius)``, with
    their clipped pieces — or, if there are more than ``cap``, the ``cap`` rows whose kinks are
    nearest ``w`` (``truncated``).

    A row qualifies when ``|<a, w> + b − u_k| ≤ ||a|| radius`` (widened by a relative ``10⁻⁹``: a proposal
    only) and both pieces' intercepts are finite.  ``reach`` bounds ``max_U ||u||``.
    """
    d = a.shape[1]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        u = row_dot(a, np.asarray(w, dtype=float)) + b
        gap = np.abs(u - kink) / a_norm
        near = eligible & (gap <= radius * (1.0 + 1e-9))
    rows = np.nonzero(near)[0]
    truncated = rows.size > cap
    if truncated:
        pool = np.nonzero(eligible & np.isfinite(gap))[0]
        rows = np.sort(pool[np.argpartition(gap[pool], cap - 1)[:cap]]) if pool.size > cap else pool
    if not rows.size:
        return KinkRows.concatenate([], d)
    slopes = np.broadcast_to(link.slopes, (a.shape[0], 2))
    lk = link.subset(rows)
    an = a_norm[rows]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        limit = C * (1.0 - (2.0 * d + 64.0) * EPS) / an
        pi = np.clip(slopes[rows], -limit[:, None], limit[:, None])
        beta = np.empty((rows.size, 2))
        for j in range(2):
            p = pi[:, j]
            phistar = lk.conjugate(p)
            pib = p * b[rows]
            beta[:, j] = pib - phistar - (rounding_margin(pib, phistar) + lk.conjugate_rounding(p)
                                          + reach * 2.0 * EPS * np.abs(p) * an)
        g = pi[:, :, None] * a[rows][:, None, :]
    ok = np.all(np.isfinite(beta), axis=1) & np.all(np.isfinite(g), axis=(1, 2))
    return KinkRows(rows[ok], g[ok], beta[ok], truncated)


__all__ = ["KinkRows", "kink_candidates", "kink_rows", "two_piece"]
