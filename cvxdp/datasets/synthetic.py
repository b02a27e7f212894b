"""Heavy-tailed synthetic tasks with known moment bounds ``G_k``.

All features use the *multivariate* Student-t law ``T = Z / sqrt(V/ν)`` with
``Z ~ N(0, I_d)`` and ``V ~ χ²_ν`` independent, so ``||T|| = ||Z|| sqrt(ν/V)``
and, for ``k < ν``,

    E||T||^k = ν^{k/2} Γ((d+k)/2) Γ((ν−k)/2) / (Γ(d/2) Γ(ν/2))

(``= dν/(ν−2)`` for ``k = 2`` and ``ν² d(d+2)/((ν−2)(ν−4))`` for ``k = 4``).
``G_k`` is a property of the *distribution*, hence public; each task reports a
value that is exact or a certified upper bound (Minkowski).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gammaln

from cvxdp._validation import positive_finite, positive_int
from cvxdp.datasets.population import (
    high_leverage_parts,
    hinge_t_risk,
    minimize_on_segment,
    student_t_lad_risk,
)
from cvxdp.moment_bounds import student_t_norm_moment

_KS = (2.0, 2.5, 3.0, 4.0, 6.0, 8.0)


def multivariate_t(rng: np.random.Generator, n: int, d: int, nu: float) -> np.ndarray:
    """``n`` draws of the ``d``-variate Student-t with ``ν`` degrees of freedom."""
    z = rng.standard_normal((n, d))
    v = rng.chisquare(nu, size=n)
    return z / np.sqrt(v / nu)[:, None]


@dataclass
class Task:
    """A learning task: train/test data, the canned loss that fits it and public constants.

    Attributes
    ----------
    loss:
        Name of the canned loss in :mod:`cvxdp.losses` (``"hinge"``, ``"absolute"``, ...).
    radius:
        Radius of the ℓ2-ball domain ``W`` (public).
    moments:
        ``k -> G_k``, exact or a certified upper bound for the generating law.
    """

    name: str
    loss: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    radius: float
    moments: dict[float, float]
    w_star: np.ndarray | None = None
    description: str = ""
    meta: dict = field(default_factory=dict)
    risk: Callable[[np.ndarray], float] | None = field(default=None, repr=False)

    @property
    def d(self) -> int:
        return int(self.X_train.shape[1])

    def population_risk(self, w: np.ndarray) -> float:
        """``F(w) = E f(w, z)`` under the generating law (quadrature, not a sample average)."""
        if self.risk is None:
            raise NotImplementedError(f"{self.name} has no closed-form population risk")
        return float(self.risk(np.asarray(w, float)))

    def excess_risk(self, w: np.ndarray) -> float:
        """``F(w) − min_W F``."""
        return self.population_risk(w) - self.population_risk(self.w_star)

    def G(self, k: float) -> float:
        """``G_k`` (raises if the task's law has no finite k-th moment)."""
        if k not in self.moments:
            raise KeyError(f"{self.name} reports G_k for k in {sorted(self.moments)}, not {k}")
        return self.moments[k]


def student_t_lad(n: int = 10_000, d: int = 10, nu: float = 5.0, noise: float = 0.5,
                  n_test: int = 20_000, seed: int | None = 0, radius: float | None = None) -> Task:
    """LAD regression: ``x ~ t_ν`` (multivariate), ``y = <x, w*> + N(0, σ²)``; loss ``|y − <x, w>|``.

    ``A(z) = ||x||``, so ``G_k = (E||T||^k)^{1/k}`` exactly.  The model is well
    specified with symmetric noise: the population minimizer is ``w*``.
    """
    positive_int("n", n)
    positive_finite("nu", nu)
    rng = np.random.default_rng(seed)
    w_star = rng.normal(size=d)
    w_star /= np.linalg.norm(w_star)
    X = multivariate_t(rng, n + n_test, d, nu)
    y = X @ w_star + noise * rng.standard_normal(n + n_test)
    moments = {k: student_t_norm_moment(d, nu, k) ** (1.0 / k) for k in _KS if k < nu}

    def risk(w: np.ndarray) -> float:
        return float(student_t_lad_risk(np.linalg.norm(w - w_star), nu, noise)[0])

    return Task(name=f"student-t LAD (ν={nu:g}, d={d})", loss="absolute", X_train=X[:n], y_train=y[:n],
                X_test=X[n:], y_test=y[n:], radius=radius or 2.0, moments=moments, w_star=w_star,
                description="well-specified LAD with multivariate Student-t features",
                meta={"nu": nu, "noise": noise}, risk=risk)


def student_t_hinge(n: int = 10_000, d: int = 10, nu: float = 5.0, separation: float = 1.0,
                    spread: float = 1.0, n_test: int = 20_000, seed: int | None = 0,
                    radius: float = 2.0) -> Task:
    """Hinge classification: ``y = ±1`` equiprobable, ``x = y μ + σ T`` with ``T ~ t_ν``.

    ``A(z) = ||x||``; ``G_k ≤ ||μ|| + σ (E||T||^k)^{1/k}`` (Minkowski) — a
    certified upper bound, which is all the algorithms need.
    """
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=d)
    mu *= separation / np.linalg.norm(mu)
    y = np.where(rng.random(n + n_test) < 0.5, -1.0, 1.0)
    X = y[:, None] * mu + spread * multivariate_t(rng, n + n_test, d, nu)
    moments = {k: float(np.linalg.norm(mu)) + spread * student_t_norm_moment(d, nu, k) ** (1.0 / k)
               for k in _KS if k < nu}
    mu_hat = mu / np.linalg.norm(mu)

    def risk(w: np.ndarray) -> float:
        # y <x, w> = <μ, w> + σ y <T, w> and y <T, w> ~ ||w|| t_ν
        return float(hinge_t_risk(1.0 - mu @ w, spread * np.linalg.norm(w), nu))

    # the minimizer over the ball is r μ/||μ||: for fixed ||w||, <μ, w> is largest along μ
    r_star = minimize_on_segment(lambda r: risk(r * mu_hat), 0.0, radius)
    return Task(name=f"student-t hinge (ν={nu:g}, d={d})", loss="hinge", X_train=X[:n], y_train=y[:n],
                X_test=X[n:], y_test=y[n:], radius=radius, moments=moments, w_star=r_star * mu_hat,
                description="two Student-t classes around ±μ", meta={"nu": nu, "mu": mu}, risk=risk)


def high_leverage_tail(n: int = 10_000, d: int = 10, p: float = 0.05, tail_index: float = 4.5,
                       scale: float = 20.0, noise: float = 0.5, n_test: int = 20_000,
                       seed: int | None = 0, radius: float = 2.0) -> Task:
    """LAD with a rare, high-leverage tail subpopulation that follows a different model.

    Bulk (prob. ``1 − p``): ``x ~ N(0, I_d)``, ``y = <x, w₁> + N(0, σ²)``.  Tail
    (prob. ``p``): ``x = ρ u`` with ``u`` uniform on the sphere and ``ρ`` Pareto
    with index ``tail_index`` and scale ``scale``, ``y = <x, w₂> + N(0, σ²)``.
    One-shot clipping at a small ``C`` reweights the tail away and is biased
    toward ``w₁``; the population minimizer weighs the tail by its leverage.

    ``A(z) = ||x||``: ``E||x||^k = (1−p) E||Z||^k + p · scale^k a/(a − k)``
    for ``k < a``, exact.
    """
    rng = np.random.default_rng(seed)
    w1 = rng.normal(size=d)
    w1 /= np.linalg.norm(w1)
    w2 = rng.normal(size=d)
    w2 -= (w2 @ w1) * w1
    w2 /= np.linalg.norm(w2)
    N = n + n_test
    tail = rng.random(N) < p
    X = rng.standard_normal((N, d))
    u = rng.standard_normal((int(tail.sum()), d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    rho = scale * (1.0 - rng.random(int(tail.sum()))) ** (-1.0 / tail_index)
    X[tail] = rho[:, None] * u
    w_row = np.where(tail[:, None], w2, w1)
    y = np.einsum("nd,nd->n", X, w_row) + noise * rng.standard_normal(N)
    moments = {}
    for k in _KS:
        if k < tail_index:
            gauss = math.exp((k / 2.0) * math.log(2.0) + gammaln((d + k) / 2.0) - gammaln(d / 2.0))
            pareto = scale**k * tail_index / (tail_index - k)
            moments[k] = ((1.0 - p) * gauss + p * pareto) ** (1.0 / k)
    gap = float(np.linalg.norm(w2 - w1))

    def risk(w: np.ndarray, clip: float | None = None) -> float:
        bulk, tl = high_leverage_parts(np.linalg.norm(w - w1), np.linalg.norm(w - w2), d, tail_index,
                                       scale, noise, clip)
        return float((1.0 - p) * bulk[0] + p * tl[0])

    def on_segment(theta: float, clip: float | None = None) -> float:
        # both terms grow with the distances to w₁ and w₂, so minimizers lie on the segment w₁w₂
        bulk, tl = high_leverage_parts(theta * gap, (1.0 - theta) * gap, d, tail_index, scale, noise,
                                       clip)
        return float((1.0 - p) * bulk[0] + p * tl[0])

    theta_star = minimize_on_segment(on_segment)
    w_star = w1 + theta_star * (w2 - w1)

    def clipped_minimizer(C: float) -> np.ndarray:
        """Population minimizer of the C-clipped (reweighted) loss, on the segment ``w₁w₂``."""
        th = minimize_on_segment(lambda t: on_segment(t, C))
        return w1 + th * (w2 - w1)

    return Task(name=f"high-leverage tail LAD (p={p:g}, Pareto({tail_index:g}) scale {scale:g}, d={d})",
                loss="absolute", X_train=X[:n], y_train=y[:n], X_test=X[n:], y_test=y[n:],
                radius=radius, moments=moments, w_star=w_star,
                description="Gaussian bulk plus a rare high-leverage tail with a different slope",
                meta={"p": p, "tail_index": tail_index, "scale": scale, "w1": w1, "w2": w2,
                      "noise": noise, "clipped_minimizer": clipped_minimizer}, risk=risk)


def linear_lower_bound(n: int = 10_000, d: int = 10, p: float = 0.01, magnitude: float = 10.0,
                       n_test: int = 10, seed: int | None = 0, radius: float = 1.0, cross_rate: float = 0.0,
                       cross_share: float = 0.0) -> Task:
    """The paper's lower-bound instance: ``f(w, z) = −<w, z>``, ``z = a v`` w.p. ``p``, else 0.

    ``A(z) = ||z||``: ``G_k = a p^{1/k}`` exactly.  ``F(w) = −p a <w, v>`` and the
    minimizer over the ball of radius ``R`` is ``R v``: ``F(w) − F* = p a (R − <w, v>)``.

    With ``cross_rate = q > 0`` a *crossed* variant: with probability ``q`` (and ``p + q ≤ 1``) the
    example is instead ``z = b u`` with ``u ⊥ v`` a unit vector and ``b = cross_share · p a / q`` —
    frequent, light gradients across ``v`` carrying ``cross_share`` times the rare atom's mass
    (``q b = cross_share · p a``).  Then ``E z = p a v + q b u``, ``G_k^k = p a^k + q b^k`` and the
    minimizer is ``R E z/||E z||``: clipping below ``a`` shrinks the rare term only, so it turns the
    clipped mean toward ``u`` — the bias a clip level must weigh against noise.
    """
    rng = np.random.default_rng(seed)
    v = rng.normal(size=d)
    v /= np.linalg.norm(v)
    N = n + n_test
    if cross_rate <= 0.0:
        Z = np.where((rng.random(N) < p)[:, None], magnitude * v, 0.0)
        moments = {k: magnitude * p ** (1.0 / k) for k in _KS}
        return Task(name=f"linear lower-bound instance (p={p:g}, a={magnitude:g}, d={d})", loss="affine",
                    X_train=-Z[:n], y_train=np.zeros(n), X_test=-Z[n:], y_test=np.zeros(n_test),
                    radius=radius, moments=moments, w_star=radius * v,
                    description="f(w, z) = −<w, z> with a rare large z (Theorem 4.1's hard instance)",
                    meta={"p": p, "magnitude": magnitude, "v": v},
                    risk=lambda w: float(-p * magnitude * (w @ v)))
    q = float(cross_rate)
    if not (p + q <= 1.0 and cross_share > 0.0 and d >= 2):
        raise ValueError("the crossed variant needs p + cross_rate ≤ 1, cross_share > 0 and d ≥ 2")
    u = rng.normal(size=d)
    u -= (u @ v) * v
    u /= np.linalg.norm(u)
    b = cross_share * p * magnitude / q
    r = rng.random(N)
    Z = np.where((r < p)[:, None], magnitude * v, np.where((r < p + q)[:, None], b * u, 0.0))
    mean = p * magnitude * v + q * b * u
    moments = {k: (p * magnitude**k + q * b**k) ** (1.0 / k) for k in _KS}
    return Task(name=f"crossed linear lower-bound instance (p={p:g}, a={magnitude:g}, q={q:g}, b={b:.3g}, "
                     f"d={d})", loss="affine",
                X_train=-Z[:n], y_train=np.zeros(n), X_test=-Z[n:], y_test=np.zeros(n_test), radius=radius,
                moments=moments, w_star=radius * mean / np.linalg.norm(mean),
                description="f(w, z) = −<w, z>: a rare large z along v, frequent light ones across it",
                meta={"p": p, "magnitude": magnitude, "v": v, "u": u, "q": q, "b": b},
                risk=lambda w: float(-(w @ mean)))


TASKS = {
    "student-t-lad": student_t_lad,
    "student-t-hinge": student_t_hinge,
    "high-leverage-tail": high_leverage_tail,
    "linear-lower-bound": linear_lower_bound,
}
