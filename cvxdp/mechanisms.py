"""The ℓ2-Laplace (K-norm) mechanism used for output perturbation.

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
uniform on the sphere.  Both come from a :class:`~cvxdp.random.NoiseSource`
(a CSPRNG by default).  The radius' upper ``β``-quantile is exact:
``s · P^{-1}(d, 1 − β)`` with ``P`` the regularized incomplete gamma function.

**Failing closed.** A non-finite point is refused *before* any noise is drawn
(:class:`~cvxdp.error.CertificationError`), and a non-finite noise sample (a
broken :class:`~cvxdp.random.NoiseSource`) is refused after it is drawn
(:class:`~cvxdp.error.ParameterError`) — ``np.clip`` passes NaN through, so a
NaN would otherwise come out as a "released" point.  The second refusal depends
on the noise alone, which is drawn independently of the data, so its probability
is the same on neighbouring data sets and, given no refusal, the output is the
mechanism's; the first can only follow a bug upstream (the certified solver
never returns a non-finite point).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincinv

from cvxdp._validation import positive_finite, positive_int, privacy_epsilon, probability
from cvxdp.error import CertificationError, ParameterError
from cvxdp.random import NoiseSource


@dataclass(frozen=True)
class L2LaplaceMechanism:
    """ε-DP release of a ``d``-vector with ℓ2 sensitivity ``Δ``: add noise of scale ``s = Δ/ε``.

    Parameters
    ----------
    sensitivity:
        ``Δ``, a public bound on ``||x(Z) − x(Z')||`` over neighbouring data sets.
    epsilon:
        The privacy parameter spent by one release.
    dim:
        Dimension ``d`` of the released vector.
    """

    sensitivity: float
    epsilon: float
    dim: int

    def __post_init__(self) -> None:
        positive_finite("sensitivity", self.sensitivity)
        privacy_epsilon(self.epsilon, warn=False)
        positive_int("dim", self.dim)

    @property
    def scale(self) -> float:
        """``s = Δ / ε``."""
        return self.sensitivity / self.epsilon

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
        point = np.asarray(point, dtype=float)
        if point.shape != (self.dim,):
            raise ValueError(f"point must have shape ({self.dim},), got {point.shape}")
        if not np.all(np.isfinite(point)):  # before any noise is drawn
            raise CertificationError("the point to release is not finite; nothing was released.")
        return point + self.sample(source, 1)[0]

    @property
    def snap_granularity(self) -> float:
        """``Λ``: the smallest power of two at least the noise scale ``s``."""
        return snap_granularity(self.scale)

    def release(self, point: np.ndarray, source: NoiseSource, box: tuple[np.ndarray, np.ndarray],
                snap: bool = True) -> np.ndarray:
        """``point + b``, clamped to ``box`` widened by ``Λ`` and snapped to the grid ``Λ Z^d``.

        Floating-point defence (Mironov 2012, *On significance of the least
        significant bits for differential privacy*): a float sum ``x + b`` can
        only land on outputs whose low-order bits depend on ``x``, and those bits
        can identify ``x``.  Rounding each coordinate to a multiple of
        ``Λ ≥ s`` — a power of two, so the rounding is exact — and clamping to a
        public box first (bounded exponents, so the grid is far coarser than the
        float spacing of every possible sum) removes that channel; every later
        step (projection onto ``W``) is post-processing.  The snap moves the
        point by at most ``√d Λ/2 ≤ √d s``, which the radii of Algorithm 2 account for.
        """
        lo, hi = np.asarray(box[0], dtype=float), np.asarray(box[1], dtype=float)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo <= hi)):
            raise ParameterError("the release box must be finite with low <= high.")
        noisy = self.perturb(point, source)  # refuses a non-finite point or noise
        if not snap:
            return noisy
        lam = self.snap_granularity
        clamped = np.clip(noisy, lo - lam, hi + lam)
        return np.round(clamped / lam) * lam


def snap_granularity(scale: float) -> float:
    """The smallest power of two ``Λ ≥ scale`` (an exact float; ``scale`` must be > 0)."""
    m, e = np.frexp(float(scale))
    return float(np.ldexp(0.5, int(e))) * (2.0 if m > 0.5 else 1.0)
