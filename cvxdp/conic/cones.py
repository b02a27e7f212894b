"""Cones in the solver convention ``A x + s = b, s in K`` and the operations on them.

Clarabel and ECOS both use this convention; the dual cone ``K*`` carries the
multipliers ``z``.  We need three things from a cone: its dual, a Euclidean
projection onto that dual (to *repair* a solver's multipliers before we
evaluate a certificate ourselves), and an exact membership test.

Cone kinds: ``"zero"`` (``s = 0``; dual: all of R^n), ``"nonneg"``,
``"soc"`` (``s_0 >= ||s_1:||``; self-dual) and ``"exp"`` (Clarabel's
``{(x, y, z): y e^{x/y} <= z}``; dual ``{(u, v, w): u < 0, -u e^{v/u} <= e w}``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

CONE_KINDS = ("zero", "nonneg", "soc", "exp")


@dataclass(frozen=True)
class Cone:
    """One cone block: ``kind`` in :data:`CONE_KINDS` and its dimension."""

    kind: str
    dim: int

    def __post_init__(self) -> None:
        if self.kind not in CONE_KINDS:
            raise ValueError(f"unknown cone kind {self.kind!r}; expected one of {CONE_KINDS}")
        if self.kind == "exp" and self.dim != 3:
            raise ValueError("an exponential cone has dimension 3")
        if self.dim < 1:
            raise ValueError("a cone needs dimension >= 1")


@dataclass
class ConeRows:
    """Rows ``A_y y + A_aux v + s = b, s in K`` describing a set of ``y`` (with auxiliaries ``v``).

    ``A_y`` is dense ``(k, d)``; ``A_aux`` is dense ``(k, n_aux)``; ``cones``
    partitions the ``k`` rows in order.
    """

    A_y: np.ndarray
    b: np.ndarray
    cones: tuple[Cone, ...]
    A_aux: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.A_y = np.atleast_2d(np.asarray(self.A_y, dtype=float))
        self.b = np.asarray(self.b, dtype=float).ravel()
        if self.A_aux is None:
            self.A_aux = np.zeros((self.A_y.shape[0], 0))
        self.A_aux = np.asarray(self.A_aux, dtype=float).reshape(self.A_y.shape[0], -1)
        if sum(c.dim for c in self.cones) != self.A_y.shape[0] or self.b.shape[0] != self.A_y.shape[0]:
            raise ValueError("cone dimensions do not add up to the number of rows")

    @property
    def n_rows(self) -> int:
        return int(self.A_y.shape[0])

    @property
    def n_aux(self) -> int:
        return int(self.A_aux.shape[1])

    @staticmethod
    def stack(parts: Sequence[ConeRows]) -> ConeRows:
        """Concatenate row blocks; auxiliaries of different parts stay distinct."""
        parts = list(parts)
        if not parts:
            raise ValueError("nothing to stack")
        d = parts[0].A_y.shape[1]
        n_aux = sum(p.n_aux for p in parts)
        A_aux = np.zeros((sum(p.n_rows for p in parts), n_aux))
        r = c = 0
        for p in parts:
            A_aux[r:r + p.n_rows, c:c + p.n_aux] = p.A_aux
            r += p.n_rows
            c += p.n_aux
        return ConeRows(
            A_y=np.vstack([p.A_y.reshape(-1, d) for p in parts]),
            b=np.concatenate([p.b for p in parts]),
            cones=tuple(c for p in parts for c in p.cones),
            A_aux=A_aux,
        )


def cone_offsets(cones: Sequence[Cone]) -> np.ndarray:
    """Start row of each cone block, plus the total as the last entry."""
    return np.concatenate([[0], np.cumsum([c.dim for c in cones])]).astype(int)


def project_soc(z: np.ndarray) -> np.ndarray:
    """Euclidean projection of the rows of ``z`` (shape ``(..., k)``) onto the second-order cone."""
    z = np.asarray(z, dtype=float)
    t = z[..., 0]
    x = z[..., 1:]
    nx = np.linalg.norm(x, axis=-1)
    out = z.copy()
    inside = nx <= t
    polar = nx <= -t
    mid = ~(inside | polar)
    out[polar] = 0.0
    if np.any(mid):
        alpha = (t[mid] + nx[mid]) / 2.0
        # a few ulps inside the boundary so float membership tests pass
        scale = alpha / nx[mid] * (1.0 - 4.0 * np.finfo(float).eps)
        out[mid, 0] = alpha
        out[mid, 1:] = x[mid] * scale[:, None]
    return out


def project_exp_dual(z: np.ndarray) -> np.ndarray:
    """A point of the (closed) dual exponential cone near ``z`` (rows ``(u, v, w)``).

    Not the exact Euclidean projection, which needs a root find: for ``u < 0``
    we keep ``(u, v)`` and raise ``w`` to the smallest value meeting
    ``-u e^{v/u} <= e w``; for ``u >= 0`` we project onto the face
    ``{u = 0, v >= 0, w >= 0}`` of the closure.  Any point of the dual cone
    gives a valid certificate; only its tightness depends on the distance moved.
    """
    z = np.array(z, dtype=float, copy=True)
    u, v, w = z[..., 0], z[..., 1], z[..., 2]
    neg = u < 0
    # keep the exponent moderate: where v/u is large (v < 0, u ≈ 0⁻) move u further negative
    u = np.where(neg & (v < 0) & (v < 50.0 * u), v / 50.0, u)
    ratio = np.where(neg, v / np.where(neg, u, -1.0), 0.0)
    need = np.where(neg, -u * np.exp(ratio) / np.e, np.inf)
    w_new = np.where(neg, np.maximum(w, need * (1 + 8 * np.finfo(float).eps)), w)
    # u >= 0: the closure contains {u = 0, v >= 0, w >= 0}; project onto it.
    z[..., 2] = np.where(neg, w_new, np.maximum(w, 0.0))
    z[..., 1] = np.where(neg, v, np.maximum(v, 0.0))
    z[..., 0] = np.where(neg, u, 0.0)
    return z


def project_dual(z: np.ndarray, cones: Sequence[Cone]) -> np.ndarray:
    """Map multipliers ``z`` (last axis = rows) into the dual cone ``K*`` blockwise."""
    z = np.array(z, dtype=float, copy=True)
    off = cone_offsets(cones)
    for c, a, b in zip(cones, off[:-1], off[1:], strict=True):
        blk = z[..., a:b]
        if c.kind == "zero":
            continue
        if c.kind == "nonneg":
            z[..., a:b] = np.maximum(blk, 0.0)
        elif c.kind == "soc":
            z[..., a:b] = project_soc(blk)
        else:
            z[..., a:b] = project_exp_dual(blk)
    return z


def in_dual(z: np.ndarray, cones: Sequence[Cone]) -> np.ndarray:
    """Exact (float) membership of multipliers ``z`` in ``K*``; returns a bool per leading index."""
    z = np.asarray(z, dtype=float)
    ok = np.ones(z.shape[:-1], dtype=bool)
    off = cone_offsets(cones)
    for c, a, b in zip(cones, off[:-1], off[1:], strict=True):
        blk = z[..., a:b]
        if c.kind == "nonneg":
            ok &= np.all(blk >= 0, axis=-1)
        elif c.kind == "soc":
            ok &= np.linalg.norm(blk[..., 1:], axis=-1) <= blk[..., 0]
        elif c.kind == "exp":
            u, v, w = blk[..., 0], blk[..., 1], blk[..., 2]
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                val = -u * np.exp(v / u)
            ok &= ((u < 0) & (val <= np.e * w)) | ((u == 0) & (v >= 0) & (w >= 0))
    return ok


def cones_from_dims(dims) -> tuple[Cone, ...]:
    """The cones of a CVXPY ``ConeDims`` (zero, nonnegative, second-order, exponential), in CVXPY's row order.

    Callers refuse PSD and power cones before calling this.
    """
    cones: list[Cone] = []
    if dims.zero:
        cones.append(Cone("zero", dims.zero))
    if dims.nonneg:
        cones.append(Cone("nonneg", dims.nonneg))
    cones += [Cone("soc", k) for k in dims.soc]
    cones += [Cone("exp", 3)] * dims.exp
    return tuple(cones)
