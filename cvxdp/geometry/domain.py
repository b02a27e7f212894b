"""The :class:`Domain` interface: a nonempty, compact convex set ``W ⊂ R^d``.

Everything the algorithms need from ``W`` goes through this interface:

* ``project`` — the Euclidean projection ``Π_W`` (closed form where one exists);
* ``support`` — the support function ``σ_W(v) = max_{y∈W} <v, y>``, which the
  extension's dual (:mod:`cvxdp.extension.certificates`, the paper's Appendix E.3) evaluates;
* ``contains`` and ``make_feasible`` — exact floating-point membership, so a
  point used for a certified *upper* bound is really in the set;
* ``diameter`` — an upper bound on the ℓ2 diameter ``D`` (exact where cheap);
* ``cone_rows`` — the set's rows in solver form, for cvxdp's conic programs.

All point-wise methods are vectorized over leading axes: ``points`` has shape
``(..., d)``.
"""

from __future__ import annotations

import abc

import cvxpy as cp
import numpy as np

from cvxdp.conic.cones import ConeRows
from cvxdp.numerics import row_dot, row_norm


class Domain(abc.ABC):
    """A nonempty compact convex set in ``R^dim``."""

    #: True when :meth:`support` is exact in exact arithmetic (closed form);
    #: False when it is a solver estimate (use :meth:`support_upper` for bounds).
    support_is_exact: bool = True
    #: True when :attr:`diameter` is the exact diameter, False for an upper bound.
    diameter_is_exact: bool = True

    def __init__(self, dim: int) -> None:
        self.dim = int(dim)

    # -- geometry ---------------------------------------------------------
    @abc.abstractmethod
    def contains(self, points: np.ndarray, tol: float = 0.0) -> np.ndarray:
        """Boolean membership of each point, allowing a violation of ``tol``."""

    @abc.abstractmethod
    def project(self, points: np.ndarray) -> np.ndarray:
        """Euclidean projection of each point onto the set."""

    @abc.abstractmethod
    def support(self, directions: np.ndarray) -> np.ndarray:
        """Support function ``σ(v) = max_{y ∈ W} <v, y>`` for each direction."""

    def support_upper(self, directions: np.ndarray) -> np.ndarray:
        """A guaranteed upper bound on ``σ(v)`` (equal to :meth:`support` when it is exact)."""
        return self.support(directions)

    @property
    @abc.abstractmethod
    def diameter(self) -> float:
        """An upper bound on the ℓ2 diameter (exact when :attr:`diameter_is_exact`)."""

    @abc.abstractmethod
    def bounding_ball(self) -> tuple[np.ndarray, float]:
        """``(center, radius)`` of a ball containing the set."""

    def norm_bound(self) -> float:
        """``||c|| + r ≥ max_{u ∈ W} ||u||`` for the bounding ball ``B(c, r)``.

        What a slope rounded by ``δ`` can cost on ``W`` is ``||δ|| · norm_bound()``.
        """
        c, r = self.bounding_ball()
        return float(np.linalg.norm(c)) + r

    @abc.abstractmethod
    def interior_point(self) -> np.ndarray:
        """A point of the set, in its relative interior when possible."""

    @abc.abstractmethod
    def cone_rows(self) -> ConeRows:
        """The set as solver rows ``A_y y + A_aux v + s = b, s ∈ K``."""

    @abc.abstractmethod
    def constraints(self, w: cp.Variable) -> list[cp.Constraint]:
        """The set as CVXPY constraints on ``w``."""

    def translate(self, shift: np.ndarray) -> Domain | None:
        """The set ``{y − shift : y ∈ W}`` as a domain of the same kind, or ``None`` if it has no such form.

        Used by the certified ERM solver to work in coordinates centred near the set (see
        :mod:`cvxdp.erm.translation`).  The translated set's data are rounded floats (exact where the
        shift and the set's coordinates are close, by Sterbenz's lemma); any public set will do for
        the privacy argument, so the rounding is not charged.
        """
        return None

    # -- shared helpers -----------------------------------------------------
    def feasibility_tolerance(self) -> float:
        """Tolerance used by :meth:`contains` for sets with equality constraints (else 0)."""
        return 0.0

    def certainly_contains(self, points: np.ndarray) -> np.ndarray | None:
        """Membership guaranteed in exact arithmetic for the float points, or ``None`` if unknown.

        :meth:`contains` evaluates the constraints in float64 and can pass a point
        that is outside by a rounding error.  Certificates evaluate the loss at
        points that must lie in the set, so sets that can, answer with a margin
        covering that error.  ``None`` (the default: equality constraints,
        generic CVXPY sets) means the float test is all there is.
        """
        return None

    def make_feasible(self, points: np.ndarray) -> np.ndarray:
        """Points in the set (exact float membership) close to ``points``.

        A point that already passes :meth:`contains` is returned unchanged.  For
        the others we shoot a ray from :meth:`interior_point` toward both the
        raw point and its projection, keep the farthest feasible point of each
        ray (bisection on the exact membership test), and return whichever of
        the two is closer to the raw point.  The ray from the raw point is what
        repairs a solver's answer that violates a constraint by rounding:
        solver-based projections of such points are only accurate to about the
        square root of the solver tolerance.
        """
        pts = as_points(points, self.dim)
        flat = np.array(pts.reshape(-1, self.dim), dtype=float, copy=True)
        tol = self.feasibility_tolerance()
        bad = ~self.contains(flat, tol)
        if not np.any(bad):
            return flat.reshape(pts.shape)
        raw = flat[bad]
        center = self.interior_point()
        shot_raw = self._shoot(center, raw, tol)
        shot_proj = self._shoot(center, self.project(raw), tol)
        use_raw = (np.linalg.norm(shot_raw - raw, axis=1)
                   <= np.linalg.norm(shot_proj - raw, axis=1))
        flat[bad] = np.where(use_raw[:, None], shot_raw, shot_proj)
        return flat.reshape(pts.shape)

    def _shoot(self, center: np.ndarray, targets: np.ndarray, tol: float) -> np.ndarray:
        """The feasible point ``center + s (t − center)`` with the largest ``s ∈ [0, 1]`` found."""
        lo = np.zeros(targets.shape[0])
        hi = np.ones(targets.shape[0])
        ok_full = self.contains(targets, tol)
        lo[ok_full] = 1.0
        diff = targets - center
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            ok = self.contains(center + mid[:, None] * diff, tol)
            lo = np.where(ok, mid, lo)
            hi = np.where(ok, hi, mid)
        out = center + lo[:, None] * diff
        out[ok_full] = targets[ok_full]  # c + (t − c) need not round back to t
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}(dim={self.dim}, diameter≤{self.diameter:.4g})"


def ball_support(v: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
    """``σ_{B(c, r)}(v) = <c, v> + r||v||`` for each row of ``v``, each from that row alone
    (:func:`cvxdp.numerics.row_dot`; a BLAS product rounds a row by its position and the matrix's
    size) — a per-example quantity's bits must not depend on the batch it is evaluated in."""
    return row_dot(v, np.asarray(center, float)) + radius * row_norm(v)


def scaled_offsets(points: np.ndarray, center: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``((y − c)·2^{−e}, e)`` for each row ``y``, with ``2^{e−1} ≤ max(|y|, |c|) < 2^e``: an offset whose
    norm neither overflows nor — for a row far away — loses its direction, and its exponent.

    For points so far from ``c`` that ``y − c`` or its norm overflows (``|y| ≳ 10¹⁵⁴``), which a
    projection still has to send to the right boundary point.  Scaling by a power of two is exact, so
    each entry is ``fl(y − c)·2^{−e}`` up to the rounding of entries below ``2^{e−1074}``.  Row by row.
    """
    y = np.asarray(points, float)
    c = np.asarray(center, float)
    top = np.maximum(np.max(np.abs(y), axis=-1), float(np.max(np.abs(c), initial=0.0)))
    _, e = np.frexp(top)
    return np.ldexp(y, -e[..., None]) - np.ldexp(c, -e[..., None]), e


def as_points(points: np.ndarray, dim: int) -> np.ndarray:
    """``points`` as a C-ordered float array whose last axis has length ``dim`` (C order: numpy
    reduces a Fortran-ordered row in another order, see :func:`cvxdp.numerics.row_dot`)."""
    arr = np.ascontiguousarray(points, dtype=float)
    if arr.shape[-1] != dim:
        raise ValueError(f"points must have last dimension {dim}, got shape {arr.shape}")
    return arr
