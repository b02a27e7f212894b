"""Conic multipliers made *exactly* dual feasible on a program's unbounded columns.

Weak conic duality for ``min cᵀx`` s.t. ``A x + s = b``, ``s ∈ K``: for every ``z ∈ K*`` and every
feasible ``x``,

    cᵀx = −bᵀz + (c + Aᵀz)ᵀx + zᵀs ≥ −bᵀz + rᵀx,      r = c + Aᵀz.

On a column whose variable is bounded (the point ``y`` of a set ``U``) the residual costs at most
``σ_U(−r_y)``; on a column whose variable is not bounded (an epigraph variable CVXPY introduced)
nothing bounds ``r_jᵀx_j`` — a residual of ``10⁻¹³`` times a variable of ``10⁹`` already moves the
bound by ``10⁻⁴``.  So the bound is valid only where ``r`` vanishes on those columns *exactly*.

:func:`exact_aux_repair` takes float multipliers ``z ∈ K*`` whose residual on the unbounded columns
is already at rounding level (:func:`~cvxdp.extension.conic_path.repair_aux_multipliers`) and moves a
few of their blocks by an exact rational correction with ``A_auxᵀ(z + δ) = −c_aux``
exactly.  Multipliers of active cones sit on the boundary of ``K*``, so a correction that moves
their coordinates independently may leave it; each second-order or exponential block can therefore
be *scaled* (a cone is closed under positive scaling, exactly), and single coordinates moved — a
zero cone's freely, a nonnegative one's down to 0, a second-order or exponential block's where the
result stays in the cone.  Membership is decided exactly in rational arithmetic (an exponential
block's transcendental inequality in float with every rounding charged).  Where the system has no exact
solution on those coordinates or the corrected point leaves ``K*``, the example gets ``None`` and its
caller must not use a bound from it (fail closed).

Everything here is a function of one example's program and multipliers; nothing is shared between
examples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import scipy.linalg

from cvxdp.conic.cones import Cone, cone_offsets
from cvxdp.numerics import EPS, float_down, float_up

ExactVector = tuple[Fraction, ...]


def exp_dual_member(u: Fraction, v: Fraction, w: Fraction) -> bool:
    """``(u, v, w)`` in the dual exponential cone ``{u < 0, −u e^{v/u} ≤ e w} ∪ {u = 0, v, w ≥ 0}``.

    Signs are decided exactly.  The inequality is tested in float with every rounding charged: ``u``,
    ``v`` rounded to nearest and ``v/u`` move the exponent by at most ``4|v/u|ε``, ``exp`` and the
    products err by a few ulps, so the left side is raised by ``(1 + 32ε(|v/u| + 4))``; ``w`` is
    rounded down and ``np.e`` lies below ``e``, the right side lowered by ``(1 − 4ε)``.
    """
    if u == 0:
        return v >= 0 and w >= 0
    if u > 0 or w <= 0:
        return False
    uf, vf, wf = float(u), float(v), float_down(w)
    ratio = vf / uf
    if not (math.isfinite(ratio) and -700.0 <= ratio <= 700.0):  # exp's relative error holds there
        return False
    lhs = -uf * math.exp(ratio) * (1.0 + 32.0 * EPS * (abs(ratio) + 4.0))
    return lhs <= np.e * wf * (1.0 - 4.0 * EPS)


def exact_member(z: Sequence[Fraction], cones: Sequence[Cone]) -> bool:
    """Membership of the rational ``z`` in ``K*``, decided exactly (exponential blocks: see
    :func:`exp_dual_member`)."""
    off = cone_offsets(cones)
    for cone, a, b in zip(cones, off[:-1], off[1:], strict=True):
        if cone.kind == "zero":
            continue
        if cone.kind == "nonneg":
            if any(z[i] < 0 for i in range(a, b)):
                return False
        elif cone.kind == "soc":
            head = z[a]
            if head < 0 or head * head < sum((z[i] * z[i] for i in range(a + 1, b)), Fraction(0)):
                return False
        elif not exp_dual_member(z[a], z[a + 1], z[a + 2]):
            return False
    return True


def _solve_exact(M: list[list[Fraction]], rhs: list[Fraction]) -> list[Fraction] | None:
    """A solution of the (possibly non-square) system ``M x = rhs`` by exact Gauss–Jordan elimination,
    or ``None`` if it has none.  Free unknowns are set to 0."""
    rows, cols = len(M), len(M[0]) if M else 0
    A = [list(r) + [q] for r, q in zip(M, rhs, strict=True)]
    pivots: list[int] = []
    r = 0
    for c in range(cols):
        p = next((i for i in range(r, rows) if A[i][c] != 0), None)
        if p is None:
            continue
        A[r], A[p] = A[p], A[r]
        inv = 1 / A[r][c]
        A[r] = [v * inv for v in A[r]]
        for i in range(rows):
            if i != r and A[i][c] != 0:
                f = A[i][c]
                A[i] = [vi - f * vr for vi, vr in zip(A[i], A[r], strict=True)]
        pivots.append(c)
        r += 1
        if r == rows:
            break
    if any(A[i][cols] != 0 for i in range(r, rows)):
        return None  # inconsistent: the residual is not in the range of the chosen columns
    x = [Fraction(0)] * cols
    for i, c in enumerate(pivots):
        x[c] = A[i][cols]
    return x


def _into_cone(z: np.ndarray, cones: Sequence[Cone]) -> np.ndarray:
    """``z`` with each block nudged off the boundary of ``K*`` where float tests are marginal.

    An exponential block's ``w`` is raised by twice the margin of :func:`exp_dual_member`, a
    second-order block's head to ``(1 + 4(k + 8)ε)`` times its tail's float norm, a nonnegative
    coordinate clipped at 0: a point of ``K*`` up to rounding becomes one the exact test accepts,
    moved by a few dozen ulps.  The residual this creates is removed by the exact correction.
    """
    z = np.array(z, dtype=float, copy=True)
    off = cone_offsets(cones)
    for cone, a, b in zip(cones, off[:-1], off[1:], strict=True):
        if cone.kind == "nonneg":
            z[a:b] = np.maximum(z[a:b], 0.0)
        elif cone.kind == "soc":
            z[a] = max(float(z[a]), float(np.linalg.norm(z[a + 1:b])) * (1.0 + 4.0 * (b - a + 8.0) * EPS))
        elif cone.kind == "exp" and z[a] < 0 and np.isfinite(z[a + 1] / z[a]):
            z[a + 2] = z[a + 2] * (1.0 + 64.0 * EPS * (abs(z[a + 1] / z[a]) + 8.0))
    return z


def exact_aux_repair(z: np.ndarray, A_aux: np.ndarray, c_aux: np.ndarray,
                     cones: Sequence[Cone]) -> ExactVector | None:
    """Multipliers ``z' ∈ K*`` with ``A_auxᵀ z' + c_aux = 0`` exactly, near the float ``z``, or ``None``.

    ``z`` (``k``), ``A_aux`` (``k × n_aux``), ``c_aux`` (``n_aux``) are one example's.  ``z`` is nudged
    into ``K*`` (:func:`_into_cone`) and its membership decided exactly (:func:`exact_member`).  The
    correction then *scales* each second-order or exponential block — ``z'_b = (1 + s_b) z_b``, in
    the cone for every ``s_b ≥ −1`` since ``K*`` is a cone — and *moves* single coordinates: a zero
    cone's freely (its dual is all of ``R``), a nonnegative one's by ``δ_i ≥ −z_i``, a second-order
    or exponential block's if the result's membership holds.  The exact
    linear system ``Σ s_b A_bᵀz_b + Σ δ_i A_iᵀ = −r`` for the exact residual ``r = c_aux + A_auxᵀz``
    is solved by Gauss–Jordan elimination on unknowns that a pivoted QR of its float copy picks
    (weighted by their room); unknowns the solution pushes past their bound are dropped and the
    system solved again, and so are the single coordinates of a second-order or exponential block
    when the result leaves ``K*`` (at most 8 times).  ``None`` if no exact solution within the
    bounds is found.
    """
    z = np.asarray(z, float)
    n_aux = A_aux.shape[1]
    if not (np.all(np.isfinite(z)) and np.all(np.isfinite(A_aux)) and np.all(np.isfinite(c_aux))):
        return None
    z = _into_cone(z, cones)
    zq = [Fraction(float(v)) for v in z]
    if not exact_member(zq, cones):
        return None
    if n_aux == 0:
        return tuple(zq)
    # the unknowns: a block scaled as a whole (second-order, exponential: z_b -> (1 + s) z_b, s ≥ −1),
    # or one coordinate moved (a zero cone's: free; a nonnegative one's: z_i + δ ≥ 0)
    unknowns: list[tuple[range, bool]] = []
    off = cone_offsets(cones)
    for cone, a, b in zip(cones, off[:-1], off[1:], strict=True):
        if cone.kind in ("zero", "nonneg"):
            unknowns += [(range(i, i + 1), False) for i in range(a, b)]
        elif any(z[a:b] != 0):
            unknowns.append((range(a, b), True))
            # an interior block's coordinates may also move one by one (the result's membership is
            # decided exactly below): scaling alone couples the columns a block touches, and the
            # unique solution may then need a multiplier at 0 to go negative (found by review)
            unknowns += [(range(i, i + 1), False) for i in range(a, b)]
    # A_aux's nonzero entries, exactly, by row: {row: [(column, value)]}
    Aq: dict[int, list[tuple[int, Fraction]]] = {}
    for i, j in zip(*np.nonzero(A_aux), strict=True):
        Aq.setdefault(int(i), []).append((int(j), Fraction(float(A_aux[i, j]))))

    def generator(rows: range, scaled: bool) -> dict[int, Fraction]:
        """The unknown's column of the system, sparse: ``A_bᵀz_b`` (scaled) or ``A_iᵀ`` (moved)."""
        out: dict[int, Fraction] = {}
        for i in rows:
            for j, a in Aq.get(i, ()):
                out[j] = out.get(j, 0) + (zq[i] * a if scaled else a)
        return {j: v for j, v in out.items() if v != 0}

    resid = [Fraction(float(c)) for c in c_aux]
    for i, entries in Aq.items():
        if zq[i] != 0:
            for j, a in entries:
                resid[j] += zq[i] * a
    if all(r == 0 for r in resid):
        return tuple(zq)
    gens = [generator(rows, scaled) for rows, scaled in unknowns]
    lower = [Fraction(-1) if scaled else (-zq[rows[0]] if _kind_at(cones, off, rows[0]) == "nonneg" else None)
             for rows, scaled in unknowns]
    # prefer unknowns with room: a scaled block (up to −1), a free row, a positive multiplier
    room = np.array([1.0 if lo is None or scaled else float(-lo) / (1e-300 + float(np.max(np.abs(z))))
                     for (_, scaled), lo in zip(unknowns, lower, strict=True)])
    candidates = [u for u, g in enumerate(gens) if g]
    for _ in range(8):  # an active set: drop the unknowns a solution pushed past their bound
        if not candidates:
            return None
        G = np.zeros((n_aux, len(candidates)))  # a float copy, only to choose the pivots
        for col, u in enumerate(candidates):
            for j, v in gens[u].items():
                G[j, col] = float(v) * (room[u] + 1e-6)
        _, R, piv = scipy.linalg.qr(G, mode="economic", pivoting=True)
        diag = np.abs(np.diag(R))
        rank = int(np.sum(diag > 1e-12 * diag[0])) if diag.size and diag[0] > 0 else 0
        if rank == 0:
            return None
        chosen = [candidates[p] for p in piv[:rank]]
        sol = _solve_exact([[gens[u].get(j, Fraction(0)) for u in chosen] for j in range(n_aux)],
                           [-r for r in resid])
        if sol is None:
            return None
        bad = {u for u, step in zip(chosen, sol, strict=True) if lower[u] is not None and step < lower[u]}
        if bad:
            candidates = [u for u in candidates if u not in bad]
            continue
        # z' = (1 + s_b) z_b on scaled blocks, then the coordinate moves: linear in the unknowns, as solved
        trial = list(zq)
        for u, step in zip(chosen, sol, strict=True):
            rows, scaled = unknowns[u]
            if scaled:
                for i in rows:
                    trial[i] = trial[i] * (1 + step)
        for u, step in zip(chosen, sol, strict=True):
            rows, scaled = unknowns[u]
            if not scaled:
                trial[rows[0]] += step
        if exact_member(trial, cones):
            return tuple(trial)
        # a coordinate move took a second-order or exponential block out of its cone: solve again
        # with those blocks scaled only
        in_block = {u for u in chosen if not unknowns[u][1]
                    and _kind_at(cones, off, unknowns[u][0][0]) in ("soc", "exp")}
        if not in_block:
            return None
        candidates = [u for u in candidates if u not in in_block]
    return None


def _kind_at(cones: Sequence[Cone], off: np.ndarray, i: int) -> str:
    """The kind of the cone block holding row ``i``."""
    return cones[int(np.searchsorted(off, i, side="right")) - 1].kind


def exact_dot(a: np.ndarray, zq: Sequence[Fraction]) -> Fraction:
    """``Σ a_i z_i`` exactly (``a`` floats, ``z`` rationals)."""
    return sum((Fraction(float(v)) * zq[i] for i, v in enumerate(a) if v != 0), Fraction(0))


def exact_transpose_product(A: np.ndarray, zq: Sequence[Fraction]) -> list[Fraction]:
    """``Aᵀz`` exactly for a float matrix ``A`` (``k × n``) and rational ``z`` (``k``)."""
    out = [Fraction(0)] * A.shape[1]
    rows, cols = np.nonzero(A)
    for i, j in zip(rows, cols, strict=True):
        out[j] += Fraction(float(A[i, j])) * zq[i]
    return out


def float_with_error(q: Sequence[Fraction]) -> tuple[np.ndarray, float]:
    """The floats nearest ``q`` and an upper bound on ``Σ |q_i − fl(q_i)|`` (≥ the ℓ2 distance)."""
    f = np.array([float(v) for v in q])
    err = sum((abs(v - Fraction(float(x))) for v, x in zip(q, f, strict=True)), Fraction(0))
    return f, float_up(err)


__all__ = ["exact_aux_repair", "exact_dot", "exact_member", "exact_transpose_product", "exp_dual_member",
           "float_with_error"]
