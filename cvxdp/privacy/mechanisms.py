"""The mechanisms that bind data to noise: the ℓ2-Laplace (K-norm) mechanism and integer counts.

Every mechanism implements :class:`Mechanism` — its sensitivity, ``ε``, dimension, the radius of
its noise at level ``β``, how far its output snapping can move a point, and the release itself —
so the planner reads a mechanism's constants and the runner calls its ``release``; a new
mechanism is one class.

**The ℓ2-Laplace mechanism** (:class:`L2LaplaceMechanism`, output perturbation).

Noise ``b ∈ R^d`` with density ``p(b) ∝ exp(−||b||₂ / s)``.

**Privacy.** If two neighbouring data sets map to centers ``x, x'`` with
``||x − x'|| ≤ Δ``, then for every output ``o``

    p(o − x) / p(o − x') = exp((||o − x'|| − ||o − x||)/s) ≤ exp(Δ/s),

by the triangle inequality, and the normalizing constant does not depend on
the center.  So ``s = Δ/ε`` gives pure ε-DP, provided ``Δ`` (and therefore
``s``) is computed from public quantities only — never from the data or a
solver's run.

**Sampling.** In polar coordinates the density of the radius is
``∝ r^{d−1} e^{−r/s}``, i.e. ``||b|| ~ Gamma(d, s)``, independent of a direction
uniform on the sphere.  Both come from a :class:`~cvxdp.privacy.random.NoiseSource`
(a CSPRNG by default).  The radius' upper ``β``-quantile is exact:
``s · P^{-1}(d, 1 − β)`` with ``P`` the regularized incomplete gamma function.

**Failing closed.** A non-finite point is refused *before* any noise is drawn
(:class:`~cvxdp.error.CertificationError`), and a non-finite noise sample (a
broken :class:`~cvxdp.privacy.random.NoiseSource`) is refused after it is drawn
(:class:`~cvxdp.error.ParameterError`) — ``np.clip`` passes NaN through, so a
NaN would otherwise come out as a "released" point.  The second refusal depends
on the noise alone, which is drawn independently of the data, so its probability
is the same on neighbouring data sets and, given no refusal, the output is the
mechanism's; the first can only follow a bug upstream (the certified solver
never returns a non-finite point).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.special import gammaincinv

from cvxdp._validation import positive_finite, positive_int, privacy_epsilon, probability
from cvxdp.error import CertificationError, ParameterError
from cvxdp.privacy.random import NoiseSource


@runtime_checkable
class Mechanism(Protocol):
    """A pure ε-DP release of a ``dim``-vector whose sensitivity is at most ``sensitivity``.

    ``epsilon`` is what the ledger charges for one release.  ``radius_quantile(β)`` bounds the
    size of the noise with probability ``1 − β`` (in the norm the sensitivity is measured in) and
    ``snap_radius`` how far the release's output rounding can move a value: the planner's radii
    read both.  ``release`` is the only method that draws noise.
    """

    name: str
    sensitivity: float
    epsilon: float
    dim: int

    def radius_quantile(self, beta: float) -> float: ...

    @property
    def snap_radius(self) -> float: ...

    def release(self, value: np.ndarray, source: NoiseSource, box: tuple[np.ndarray, np.ndarray],
                snap: bool = True) -> np.ndarray: ...


@dataclass(frozen=True)
class L2LaplaceMechanism:
    """ε-DP release of a ``d``-vector with ℓ2 sensitivity ``Δ``: add noise of scale ``s ≥ Δ/ε``.

    Parameters
    ----------
    sensitivity:
        ``Δ``, a public bound on ``||x(Z) − x(Z')||`` over neighbouring data sets.
    epsilon:
        The privacy parameter spent by one release (what the ledger charges).
    dim:
        Dimension ``d`` of the released vector.
    scale:
        The noise scale; default :func:`laplace_scale` (``Δ/ε``, moved up an ulp if it rounded
        down).  A larger public scale (the paper profile's ``10C/(ε_j λ m)``) only lowers the
        privacy loss ``Δ/s``; one with ``s·ε < Δ`` in exact arithmetic is refused.
    """

    sensitivity: float
    epsilon: float
    dim: int
    scale: float = field(default=float("nan"))
    name: str = field(default="ℓ2-Laplace", init=False)

    def __post_init__(self) -> None:
        positive_finite("sensitivity", self.sensitivity)
        privacy_epsilon(self.epsilon, warn=False)
        positive_int("dim", self.dim)
        if math.isnan(self.scale):
            object.__setattr__(self, "scale", float(laplace_scale(self.sensitivity, self.epsilon)))
        positive_finite("noise scale", self.scale)
        if Fraction(self.scale) * Fraction(self.epsilon) < Fraction(self.sensitivity):  # exact
            raise ParameterError("the noise scale of an ℓ2-Laplace release is below sensitivity/ε: the "
                                 "release would not be ε-DP.")

    @property
    def snap_radius(self) -> float:
        """``√d Λ/2``: how far snapping to the grid ``Λ Z^d`` can move the released point."""
        return math.sqrt(self.dim) * self.snap_granularity / 2.0

    def radius_quantile(self, beta: float) -> float:
        """The exact ``r`` with ``P(||b|| > r) = β`` (Gamma(d, s) upper quantile)."""
        b = probability("beta", beta)
        return float(self.scale * gammaincinv(self.dim, 1.0 - b))

    @property
    def mean_radius(self) -> float:
        """``E||b|| = d s``."""
        return self.dim * self.scale

    def sample(self, source: NoiseSource, n: int = 1) -> np.ndarray:
        """``n`` noise vectors ``(n, d)``: Gamma(d, s) radii times uniform directions.

        Raises :class:`~cvxdp.error.ParameterError` if the source produced a non-finite sample
        (a decision on the noise alone, independent of the data).
        """
        radius = np.asarray(source.gamma(self.dim, self.scale, n), dtype=float)
        noise = radius[:, None] * source.unit_vectors(n, self.dim)
        if not np.all(np.isfinite(noise)):
            raise ParameterError("the noise source returned a non-finite sample; nothing was released. "
                                 "Use random_state=None (the operating system's CSPRNG) or a NoiseSource "
                                 "whose uniforms lie in the open interval (0, 1).")
        return noise

    def perturb(self, point: np.ndarray, source: NoiseSource) -> np.ndarray:
        """``point + b`` for one draw ``b`` (no floating-point protection; see :meth:`release`)."""
        return self._checked(point) + self.sample(source, 1)[0]

    def _checked(self, point: np.ndarray) -> np.ndarray:
        """The point as a float ``d``-vector, refused before any noise if it has another shape or is not
        finite (only a bug upstream gives either)."""
        point = np.asarray(point, dtype=float)
        if point.shape != (self.dim,):
            raise ValueError(f"point must have shape ({self.dim},), got {point.shape}")
        if not np.all(np.isfinite(point)):  # before any noise is drawn
            raise CertificationError("the point to release is not finite; nothing was released.")
        return point

    @property
    def snap_granularity(self) -> float:
        """``Λ``: the smallest power of two at least the noise scale ``s``."""
        return snap_granularity(self.scale)

    def release(self, point: np.ndarray, source: NoiseSource, box: tuple[np.ndarray, np.ndarray],
                snap: bool = True) -> np.ndarray:
        """``point + b``, clamped to ``box`` widened by ``Λ`` and snapped to the grid ``o + Λ Z^d``.

        Floating-point defence (Mironov 2012, *On significance of the least
        significant bits for differential privacy*): a float sum ``x + b`` can
        only land on outputs whose low-order bits depend on ``x``, and those bits
        can identify ``x``.  Rounding each coordinate to a multiple of
        ``Λ ≥ s`` — a power of two, so the rounding is exact — and clamping to a
        public box first (bounded exponents, so the grid is far coarser than the
        float spacing of every possible sum) removes that channel; every later
        step (adding ``o`` back, the projection onto ``W``) is post-processing.  The snap moves the
        point by at most ``√d Λ/2 ≤ √d s``, which the radii of Algorithm 2 account for.

        The frame.  The sum is formed in coordinates centred near the box, ``x − o`` for the public
        origin ``o`` of :func:`release_frame` (``0`` unless the box lies far from 0), so "far coarser"
        holds wherever the domain sits: the box is at most ``9`` half-widths from ``o``.  The point is
        first clamped to the box (1-Lipschitz, a no-op for the points the callers release: each lies in
        its box), and ``x − o`` is then exact (Sterbenz), so the sensitivity is that of ``x``.

        "Far coarser" is checked, not assumed: :func:`grid_fits` refuses, before any noise is drawn,
        a grid finer than ``2⁻⁵²`` of the widened box in that frame (a public decision).  Without it
        an absurd ``ε`` (``10³⁰⁸``: scale ``10⁻³⁰⁸``, found by review helper-41) made ``(x + b)/Λ``
        overflow for points far enough out and not for others — a refusal on one side of a
        neighbouring pair only.  The snapped point lies within ``1.5Λ`` of the box.
        """
        if not snap:
            self._box(box)
            return self.perturb(point, source)  # refuses a non-finite point or noise
        lo, hi, origin = self.check_box(box)
        lam = self.snap_granularity
        inner = np.clip(self._checked(point), lo, hi) - origin  # exact: see release_frame
        noisy = self.perturb(inner, source)  # refuses a non-finite noise draw
        clamped = np.clip(noisy, (lo - origin) - lam, (hi - origin) + lam)
        return origin + np.round(clamped / lam) * lam

    @staticmethod
    def _box(box: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = np.asarray(box[0], dtype=float), np.asarray(box[1], dtype=float)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
            raise ParameterError("the release box must be finite with low <= high.")
        return lo, hi

    def check_box(self, box: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every check a snapped :meth:`release` in ``box`` makes before it reads the point; returns
        ``(lo, hi, o)`` with ``o`` the frame's origin (:func:`release_frame`).

        Public — a function of the box and the scale only — so a caller runs it before its charge and
        its solve (:func:`cvxdp.run.release.release_round`, the baselines, private selection), and a
        refusal costs neither budget nor a solve; :meth:`release` runs it again.  Refuses a box that is
        not finite, a grid finer than floating point resolves across the box (:func:`grid_fits`: then
        whether the division overflowed would depend on the point) and a box at the end of the float
        range, where the released point itself could overflow.
        """
        lo, hi = self._box(box)
        origin, reach = release_frame(lo, hi)
        if not grid_fits(self.scale, reach):
            raise ParameterError(GRID_TOO_FINE)
        with np.errstate(over="ignore"):
            if not np.all(np.isfinite(np.abs(origin) + (reach + 2.0 * self.snap_granularity))):
                raise ParameterError("the release box lies at the end of the float range, where the released "
                                     "point could overflow; nothing was released. Rescale the domain.")
        return lo, hi, origin


#: A box coordinate whose centre lies beyond this many half-widths from 0 is released in a frame
#: centred near it (:func:`release_frame`).
FRAME_FAR = 8.0


def release_frame(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, float]:
    """The public origin ``o`` of a release in the box ``[lo, hi]`` and its reach ``max|[lo, hi] − o|``.

    With ``c = lo/2 + hi/2``, ``r`` the largest half-width and ``q`` the smallest power of two ``≥ r``:
    ``o_j = q·round(c_j/q)`` where ``|c_j| > 8r``, ``0`` elsewhere.  On a far coordinate every point of
    the box and ``o_j`` lie within ``r`` of ``c_j`` (``|c_j − o_j| ≤ q/2 < r``), so their ratio is within
    ``[7/9, 9/7]`` and their difference is exact (Sterbenz's lemma) — the release's ``x − o`` changes
    nothing a neighbour could see — and the reach is below ``2r``; elsewhere it is at most ``9r``.  At the
    float edges (review helper-43) a far coordinate ``2⁵²`` steps of ``q`` out (or beyond the float range
    in steps) takes ``o_j = c_j``, already a multiple of ``q``, and a box of single points (``r = 0``: a
    radius below the float spacing of its centre) is its own frame.  A function of the box only.
    """
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    c = lo / 2.0 + hi / 2.0  # halves first: no overflow at the ends of the float range
    r = float(np.max(hi / 2.0 - lo / 2.0)) if lo.size else 0.0
    origin = np.zeros_like(c)
    if r == 0.0:  # a box of single points (a radius below the float spacing of its centre): its own frame
        origin = c.copy()
    elif math.isfinite(r):
        far = np.abs(c) > FRAME_FAR * r
        if np.any(far):
            q = math.ldexp(1.0, math.frexp(r)[1] - (1 if math.frexp(r)[0] == 0.5 else 0))
            with np.errstate(over="ignore", invalid="ignore"):
                steps = c / q
            # a coordinate 2⁵² steps out (or beyond the float range in steps) is a multiple of q already
            coarse = ~np.isfinite(steps) | (np.abs(steps) >= 2.0**GRID_BITS)
            origin = np.where(far, np.where(coarse, c, np.round(np.where(coarse, 0.0, steps)) * q), 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        reach = float(np.max(np.maximum(np.abs(lo - origin), np.abs(hi - origin)))) if lo.size else 0.0
    return origin, reach


@dataclass(frozen=True)
class DiscreteLaplaceCounts:
    """ε-DP release of an integer vector (a histogram) with ℓ1 sensitivity ``Δ``: discrete Laplace noise.

    Each coordinate gets ``Z`` with ``P(Z = z) ∝ exp(−|z|/b)``, ``b = Δ/ε`` as an exact rational
    (:meth:`~cvxdp.privacy.random.NoiseSource.discrete_laplace`): for integer vectors with
    ``||c − c'||₁ ≤ Δ``, ``P(c + Z = o)/P(c' + Z = o) ≤ e^{Δ/b} = e^ε``.  No float is involved, so
    there is no snapping (``snap_radius = 0``) and no truncated tail.
    """

    sensitivity: float
    epsilon: float
    dim: int
    name: str = field(default="discrete Laplace counts", init=False)

    def __post_init__(self) -> None:
        positive_finite("sensitivity", self.sensitivity)
        privacy_epsilon(self.epsilon, warn=False)
        positive_int("dim", self.dim)

    @property
    def scale(self) -> Fraction:
        """``b = Δ/ε`` exactly (the floats' exact binary values)."""
        return Fraction(self.sensitivity) / Fraction(self.epsilon)

    @property
    def snap_radius(self) -> float:
        return 0.0

    def radius_quantile(self, beta: float) -> float:
        """``t`` with ``P(|Z| ≥ t) ≤ β`` for one coordinate: ``b log(1/β)`` (``P(|Z| ≥ t) ≤ e^{−t/b}``)."""
        b = probability("beta", beta)
        return math.nextafter(float(self.scale), math.inf) * math.log(1.0 / b)

    def release(self, value: np.ndarray, source: NoiseSource,
                box: tuple[np.ndarray, np.ndarray] | None = None, snap: bool = True) -> np.ndarray:
        """``counts + Z`` as floats (exact: integers well inside the float range); ``box`` is unused."""
        counts = np.asarray(value)
        if counts.shape != (self.dim,) or not np.issubdtype(counts.dtype, np.integer):
            raise ParameterError(f"a count release needs {self.dim} integer counts.")
        noise = source.discrete_laplace(self.scale, self.dim)
        return np.array([float(int(c) + int(z)) for c, z in zip(counts, noise, strict=True)])


def laplace_scale(sensitivity, epsilon):
    """The float noise scale ``s = fl(Δ/ε)``, moved up one ulp unless ``s·ε ≥ Δ`` holds exactly.

    ``fl(Δ/ε)`` is within half an ulp of ``Δ/ε`` and can sit below it, which would make the
    mechanism's privacy loss ``Δ/s`` exceed the ``ε`` the ledger charged by a relative ``2⁻⁵³``; the
    next float up is above ``Δ/ε``.  Whether ``s·ε ≥ Δ`` is decided exactly from ``p = fl(s·ε)``
    and its rounding error (Dekker's product): ``p > Δ`` implies ``sε ≥ Δ`` and ``p < Δ`` implies
    ``sε < Δ`` (rounding is monotone and ``Δ`` is a float); on a tie the error's sign decides.
    Works on arrays (positive, finite, normal inputs).
    """
    s = np.divide(sensitivity, epsilon)
    p = s * epsilon
    covered = (p > sensitivity) | ((p == sensitivity) & (_product_error(s, epsilon, p) >= 0.0))
    out = np.where(covered, s, np.nextafter(s, np.inf))
    return float(out) if np.ndim(out) == 0 else out


def _product_error(a, b, p):
    """``a·b − p`` exactly (Dekker's two-product with Veltkamp's split; no overflow in the ranges used)."""
    def split(x):
        c = 134217729.0 * x  # 2^27 + 1
        hi = c - (c - x)
        return hi, x - hi

    ah, al = split(np.asarray(a, float))
    bh, bl = split(np.asarray(b, float))
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


#: ``Λ`` must be at least ``2^-GRID_BITS`` of the farthest point of the widened release box.
GRID_BITS = 52

GRID_TOO_FINE = ("ε is too large for a floating-point-safe release: the grid the release is snapped to "
                 "(spacing the power of two at or above the noise scale) would be finer than floating point "
                 "resolves across the release box; nothing was released. Lower ε (the noise is then below "
                 "the float spacing of the domain anyway) or rescale the domain toward 0.")


def ball_box(centre: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """The release box ``(c − r, c + r)`` of a domain with bounding ball ``B(c, r)``: the one box every
    release onto it is clamped and snapped in (:func:`cvxdp.run.release.release_box`) and the planner
    checks (:func:`release_box_edge`)."""
    centre = np.asarray(centre, dtype=float)
    return centre - radius, centre + radius


def release_box_edge(centre: np.ndarray, radius: float) -> float:
    """The reach (:func:`release_frame`) of the release box :func:`ball_box` of a fit on a domain with
    bounding ball ``B(c, r)``: every round of Algorithm 2 releases in ``W``'s own box
    (:func:`cvxdp.run.release.release_point` reads the model's domain, which translation and partitioning
    keep), so the planner checks the very box the release will — computed the same way."""
    with np.errstate(over="ignore", invalid="ignore"):
        return release_frame(*ball_box(centre, radius))[1]


def grid_fits(scale: float, edge: float) -> bool:
    """Whether snapping to ``Λ Z`` (``Λ`` = :func:`snap_granularity` of ``scale``) is exact on ``[−e, e]``,
    ``e = edge + Λ`` (the box widened by ``Λ``): ``e < 2^52 Λ``, so ``x/Λ`` is finite and exact, every
    multiple ``kΛ`` there is a float, and the grid is coarser than the float spacing of every point of the
    box (the floating-point defence of :meth:`L2LaplaceMechanism.release`).  Public: a function of the
    noise scale and the box only.  NaN and infinities: ``False``.
    """
    scale, edge = float(scale), float(edge)
    if not (math.isfinite(scale) and scale > 0 and math.isfinite(edge) and edge >= 0):
        return False
    with np.errstate(over="ignore"):  # a scale above 2¹⁰²³ has no finite power of two above it
        lam = float(snap_granularity(scale))
    reach = edge + lam
    if not (math.isfinite(lam) and math.isfinite(reach) and math.isfinite(2.0 * reach)):
        return False
    return reach / lam < 2.0**GRID_BITS  # Λ a power of two: the quotient is exact (or overflows: False)


def snap_granularity(scale):
    """The smallest power of two ``Λ ≥ scale`` (an exact float; ``scale`` must be > 0).  Works on arrays."""
    mant, expo = np.frexp(np.asarray(scale, float))
    out = np.ldexp(0.5, expo) * np.where(mant > 0.5, 2.0, 1.0)
    return float(out) if np.ndim(out) == 0 else out


__all__ = ["FRAME_FAR", "GRID_BITS", "GRID_TOO_FINE", "DiscreteLaplaceCounts", "L2LaplaceMechanism",
           "Mechanism", "ball_box", "grid_fits", "laplace_scale", "release_box_edge", "release_frame",
           "snap_granularity"]
