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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaincinv

from cvxdp._validation import positive_finite, positive_int, probability
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
        positive_finite("epsilon", self.epsilon)
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
        """``n`` noise vectors ``(n, d)``: Gamma(d, s) radii times uniform directions."""
        radius = source.gamma(self.dim, self.scale, n)
        return radius[:, None] * source.unit_vectors(n, self.dim)

    def perturb(self, point: np.ndarray, source: NoiseSource) -> np.ndarray:
        """``point + b`` for one draw ``b``."""
        point = np.asarray(point, dtype=float)
        if point.shape != (self.dim,):
            raise ValueError(f"point must have shape ({self.dim},), got {point.shape}")
        return point + self.sample(source, 1)[0]
