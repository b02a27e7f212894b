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


def test_snapped_releases_of_two_close_centers_coincide():
    """With the same noise draws, centers 2⁻⁴⁰·Λ apart give *identical* snapped outputs (except when a noisy
    coordinate falls within 2⁻⁴⁰·Λ of a rounding boundary, which is rare), while the unsnapped outputs
    differ in their low-order bits almost always: what an observer could read is gone."""
    mech = L2LaplaceMechanism(sensitivity=0.3, epsilon=1.0, dim=3)
    lam = mech.snap_granularity
    box = (np.full(3, -50.0), np.full(3, 50.0))
    a, b = np.full(3, 0.1), np.full(3, 0.1) + lam * 2.0**-40
    runs = 3000
    snap_a = np.array([mech.release(a, SeededRandom(i), box) for i in range(runs)])
    snap_b = np.array([mech.release(b, SeededRandom(i), box) for i in range(runs)])
    raw_a = np.array([mech.release(a, SeededRandom(i), box, snap=False) for i in range(runs)])
    raw_b = np.array([mech.release(b, SeededRandom(i), box, snap=False) for i in range(runs)])
    assert np.mean(np.any(snap_a != snap_b, axis=1)) <= 0.001
    assert np.mean(np.any(raw_a != raw_b, axis=1)) >= 0.99


class _ScriptedSource(SeededRandom):
    """Returns scripted uniforms first, then seeded ones."""

    def __init__(self, script):
        super().__init__(0)
        self.script = list(script)

    def uniform(self, size):
        n = int(np.prod(size))
        out = [self.script.pop(0) if self.script else float(super().uniform(1)[0]) for _ in range(n)]
        return np.array(out).reshape(size)


def test_secure_uniforms_exclude_zero_and_one(monkeypatch):
    """The extreme 53-bit integers map inside (0, 1); an all-zero draw is redrawn."""
    import secrets

    words = [np.array([0], dtype=np.uint64), np.array([2**64 - 1], dtype=np.uint64),
             np.array([2**11], dtype=np.uint64)]
    calls = iter(words)
    monkeypatch.setattr(secrets, "token_bytes", lambda n: next(calls).tobytes())
    u = SecureRandom().uniform(1)   # raw 0 → redrawn as 2⁵³ − 1
    assert 0.0 < u[0] < 1.0 and u[0] == 1.0 - 2.0**-53
    v = SecureRandom().uniform(1)   # raw 1
    assert v[0] == 2.0**-53


def test_the_radius_tail_is_not_truncated_at_53_bits():
    """A plain 53-bit uniform caps the Gamma(1, 1) radius near 36.7; the lowest cell is zoomed into."""
    lowest = 2.0**-53
    src = _ScriptedSource([lowest, lowest, 0.5])
    t = src.tail_uniform(1)[0]
    assert t == 0.5 * lowest * lowest
    r = _ScriptedSource([lowest, lowest, 0.5]).gamma(1.0, 1.0, 1)[0]
    assert abs(r - (-np.log(t))) < 1e-9 * r and r > 70.0
    assert SeededRandom(0).tail_uniform(1000).min() > 0.0


def test_non_secure_sources_warn(recwarn):
    noise_source(SeededRandom(0))
    assert any(issubclass(w.category, PrivacyLeakWarning) for w in recwarn.list)
