"""The ℓ2-Laplace sampler and the noise sources: distribution tests that also have power."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from cvxdp.error import ParameterError, PrivacyLeakWarning
from cvxdp.mechanisms import L2LaplaceMechanism
from cvxdp.random import NoiseSource, SecureRandom, SeededRandom, noise_source


def _radii(source: NoiseSource, d: int, s: float, n: int) -> np.ndarray:
    mech = L2LaplaceMechanism(sensitivity=s, epsilon=1.0, dim=d)
    return np.linalg.norm(mech.sample(source, n), axis=1)


@pytest.mark.parametrize("d", [1, 5, 20])
def test_radius_is_gamma_and_test_rejects_wrong_scale(d):
    """KS against Gamma(d, s) passes, and rejects Gamma(d, s(1 ± 3%)) — the test has power."""
    s, n = 0.7, 100_000
    radii = _radii(SeededRandom(d), d, s, n)
    assert stats.kstest(radii, stats.gamma(a=d, scale=s).cdf).pvalue > 1e-3
    for wrong in (0.97, 1.03):
        assert stats.kstest(radii, stats.gamma(a=d, scale=s * wrong).cdf).pvalue < 1e-6


def test_secure_source_radius_distribution():
    """Same KS test on the default CSPRNG source (false-alarm probability 1e-6)."""
    radii = _radii(SecureRandom(), 4, 1.3, 100_000)
    assert stats.kstest(radii, stats.gamma(a=4, scale=1.3).cdf).pvalue > 1e-6
    assert stats.kstest(radii, stats.gamma(a=4, scale=1.3 * 1.03).cdf).pvalue < 1e-6


@pytest.mark.parametrize("d", [2, 3, 8])
def test_directions_are_uniform_on_the_sphere(d):
    """(u₁ + 1)/2 ~ Beta((d−1)/2, (d−1)/2) for u uniform on S^{d−1}; an anisotropic law is rejected."""
    src = SeededRandom(100 + d)
    u = src.unit_vectors(60_000, d)
    assert np.allclose(np.linalg.norm(u, axis=1), 1.0)
    beta = stats.beta((d - 1) / 2.0, (d - 1) / 2.0)
    for j in range(d):
        assert stats.kstest((u[:, j] + 1) / 2, beta.cdf).pvalue > 1e-4
    assert np.allclose(u.T @ u / u.shape[0], np.eye(d) / d, atol=0.01)
    skew = src.standard_normal((60_000, d)) * np.linspace(1.0, 1.3, d)
    skew /= np.linalg.norm(skew, axis=1, keepdims=True)
    assert stats.kstest((skew[:, -1] + 1) / 2, beta.cdf).pvalue < 1e-6


def test_secure_uniforms():
    u = SecureRandom().uniform(200_000)
    assert np.all((u > 0) & (u < 1))
    assert stats.kstest(u, "uniform").pvalue > 1e-6
    assert len(np.unique(u)) > 199_000


def test_radius_quantile_is_exact():
    mech = L2LaplaceMechanism(sensitivity=2.0, epsilon=0.5, dim=7)
    for beta in (0.5, 0.1, 1e-3, 1e-9):
        q = mech.radius_quantile(beta)
        assert np.isclose(stats.gamma(a=7, scale=mech.scale).sf(q), beta, rtol=1e-8)
    assert mech.scale == 4.0 and mech.mean_radius == 28.0


def test_density_ratio_is_bounded_by_epsilon():
    """p(o − x)/p(o − x') ≤ exp(ε) whenever ||x − x'|| ≤ Δ: the mechanism's privacy inequality."""
    rng = np.random.default_rng(0)
    mech = L2LaplaceMechanism(sensitivity=0.3, epsilon=0.8, dim=5)
    x = rng.normal(size=5)
    xp = x + 0.3 * rng.normal(size=5) / np.sqrt(5) * 0.99
    xp = x + (xp - x) * min(1.0, 0.3 / np.linalg.norm(xp - x))
    o = x + mech.sample(SeededRandom(1), 20_000)
    log_ratio = (np.linalg.norm(o - xp, axis=1) - np.linalg.norm(o - x, axis=1)) / mech.scale
    assert np.all(log_ratio <= mech.epsilon + 1e-12)
    assert log_ratio.max() > 0.9 * mech.epsilon * np.linalg.norm(x - xp) / 0.3  # the bound is tight


def test_noise_source_selection():
    assert isinstance(noise_source(None), SecureRandom)
    with pytest.warns(PrivacyLeakWarning):
        a = noise_source(7)
    with pytest.warns(PrivacyLeakWarning):
        b = noise_source(7)
    assert isinstance(a, SeededRandom)
    assert np.array_equal(a.uniform(5), b.uniform(5))
    with pytest.warns(PrivacyLeakWarning):
        noise_source(np.random.default_rng(3))
    src = SecureRandom()
    assert noise_source(src) is src
    for bad in ("7", 1.5, True, -1, [1]):
        with pytest.raises(ParameterError), warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            noise_source(bad)


@pytest.mark.parametrize("kwargs", [
    {"sensitivity": 0.0, "epsilon": 1.0, "dim": 3},
    {"sensitivity": 1.0, "epsilon": float("nan"), "dim": 3},
    {"sensitivity": 1.0, "epsilon": float("inf"), "dim": 3},
    {"sensitivity": 1.0, "epsilon": -1.0, "dim": 3},
    {"sensitivity": 1.0, "epsilon": 1.0, "dim": 0},
])
def test_mechanism_rejects_bad_parameters(kwargs):
    with pytest.raises(ParameterError):
        L2LaplaceMechanism(**kwargs)


def test_snapping_removes_the_low_order_bit_channel():
    """Mironov's attack reads the low-order bits of x + b; snapped releases carry none.

    Two centers a hair apart (1e-12) produce naive outputs whose values modulo the
    grid differ; snapped outputs are exact multiples of Λ (a power of two ≥ s)
    whatever the center, and move by at most Λ/2 per coordinate.
    """
    from cvxdp.mechanisms import snap_granularity

    mech = L2LaplaceMechanism(sensitivity=0.3, epsilon=1.0, dim=3)
    lam = mech.snap_granularity
    assert lam == snap_granularity(mech.scale) and mech.scale <= lam < 2 * mech.scale
    assert np.log2(lam) == np.round(np.log2(lam))
    box = (np.full(3, -5.0), np.full(3, 5.0))
    for center in (np.zeros(3), np.full(3, 1e-12)):
        src_a, src_b = SeededRandom(3), SeededRandom(3)
        snapped = np.array([mech.release(center, src_a, box) for _ in range(2000)])
        naive = np.array([mech.release(center, src_b, box, snap=False) for _ in range(2000)])
        assert np.all(np.mod(snapped, lam) == 0.0)
        assert np.all(np.abs(snapped - np.clip(naive, -5 - lam, 5 + lam)) <= lam / 2)
        assert np.any(np.mod(naive, lam) != 0.0)   # the channel snapping closes
    far = mech.release(np.zeros(3), SeededRandom(1), (np.full(3, -1e-3), np.full(3, 1e-3)))
    assert np.all(np.abs(far) <= 1e-3 + lam) and np.all(np.mod(far, lam) == 0.0)
