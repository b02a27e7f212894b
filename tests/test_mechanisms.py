"""The ℓ2-Laplace sampler and the noise sources: distribution tests that also have power."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from cvxdp.error import ParameterError, PrivacyLeakWarning
from cvxdp.privacy.mechanisms import L2LaplaceMechanism
from cvxdp.privacy.random import NoiseSource, SecureRandom, SeededRandom, noise_source


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
    from cvxdp.privacy.mechanisms import snap_granularity

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


# ---- exact integer noise: the discrete Laplace (two-sided geometric) sampler -------------------------

class _Branch(Exception):
    """Raised by :class:`_ProbabilityTree` at the first draw past its path, carrying that draw's options."""


class _ProbabilityTree(NoiseSource):
    """Replays a path of outcomes; the next draw reports its options and their exact probabilities.

    Exploring every path turns a sampler into its exact law (up to the mass of the paths cut off).
    ``exp_trials`` replaces the ``Bernoulli(e^{−γ})`` subroutine by one branch of probability
    ``e^{−γ}`` (a float), to explore the composition above it; the subroutine has its own exact test.
    """

    def __init__(self, path, exp_trials=False):
        self.path, self.pos, self.exp_trials = path, 0, exp_trials

    def _draw(self, options):
        if self.pos < len(self.path):
            self.pos += 1
            return options[self.path[self.pos - 1]][0]
        raise _Branch(options)

    def uniform(self, size):
        raise AssertionError("an exact integer sampler drew a float uniform")

    def randbelow(self, n):
        return self._draw([(i, Fraction(1, n)) for i in range(n)])

    def bernoulli(self, num, den):
        return self._draw([(True, Fraction(num, den)), (False, 1 - Fraction(num, den))])

    def _bernoulli_exp_unit(self, num, den):
        if not self.exp_trials:
            return super()._bernoulli_exp_unit(num, den)
        p = math.exp(-num / den)
        return self._draw([(True, p), (False, 1.0 - p)])


def _exact_law(draw, cut_below, **tree):
    """``{value: mass}`` over the explored paths and the total mass of the paths cut off."""
    law, cut = {}, 0
    stack = [((), Fraction(1))]
    while stack:
        path, p = stack.pop()
        try:
            value = draw(_ProbabilityTree(path, **tree))
        except _Branch as branch:
            for i, (_, q) in enumerate(branch.args[0]):
                if q == 0:
                    continue
                if p * q < cut_below:
                    cut += p * q
                else:
                    stack.append((path + (i,), p * q))
            continue
        law[value] = law.get(value, 0) + p
    return law, cut


@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 3)])
def test_bernoulli_exp_has_exactly_the_law_exp_minus_gamma(gamma):
    """The Bernoulli(e^{−γ}) sampler's law, in rational arithmetic over all its paths: e^{−γ} ± 1e-15."""
    law, cut = _exact_law(lambda src: src.bernoulli_exp(gamma), Fraction(1, 10**17))
    assert sum(law.values()) + cut == 1  # the tree accounts for every path exactly
    lower = law.get(True, Fraction(0))
    assert cut < Fraction(1, 10**15)
    target = math.exp(-gamma)  # within 1e-16 relative of e^{−γ}
    assert lower <= Fraction(target * (1 + 1e-15)) and Fraction(target * (1 - 1e-15)) <= lower + cut
    if 0 < gamma <= 1:  # power: the same computation rejects trials of γ/(K+1) instead of γ/K

        def wrong(src):
            k = 1
            while src.bernoulli(gamma.numerator, gamma.denominator * (k + 1)):
                k += 1
            return k % 2 == 1

        law, cut = _exact_law(wrong, Fraction(1, 10**17))
        assert abs(float(law.get(True, 0)) - target) > 1e-3


def _attempt_without_zero_rejection(src, t, s):
    """A wrong sampler: the attempt of Algorithm 2 without rejecting the negative zero."""
    u = src.randbelow(t)
    if not src._bernoulli_exp_unit(u, t):
        return None
    v = 0
    while src._bernoulli_exp_unit(1, 1):
        v += 1
    y = (u + t * v) // s
    return -y if src.bernoulli(1, 2) else y


def _attempt_ratios(attempt):
    """``P(z)/P(z + 1)`` for z = 0..3 and ``P(−z)/P(z)`` for z = 1..3 in the exact law of one attempt."""
    law, cut = _exact_law(attempt, 1e-16, exp_trials=True)
    assert cut < 1e-13
    mass = {z: float(p) for z, p in law.items() if z is not None}
    up = np.array([mass[z] / mass[z + 1] for z in range(4)])
    return up, np.array([mass[-z] / mass[z] for z in range(1, 4)])


@pytest.mark.parametrize("scale", [Fraction(2), Fraction(3, 2), Fraction(5, 2)])
def test_discrete_laplace_ratio_is_exactly_exp_of_one_over_scale(scale):
    """In the sampler's law, P(z)/P(z+1) = e^{1/b} for z ≥ 0 and P(−z) = P(z), to 1e-12.

    One attempt of the rejection loop is explored over all its paths (attempts are independent, so
    the accepted value's law is the attempt's, renormalized, and ratios are unchanged); the
    Bernoulli(e^{−γ}) subroutine is one exact branch here and is tested on its own above.  The same
    computation catches a sampler that forgets to reject the negative zero and one whose scale is 10%
    off.
    """
    t, s = scale.numerator, scale.denominator
    up, sym = _attempt_ratios(lambda src: src._discrete_laplace_attempt(t, s))
    assert np.allclose(up, math.exp(1 / scale), rtol=1e-12, atol=0)
    assert np.allclose(sym, 1.0, rtol=1e-12, atol=0)
    wrong_zero, _ = _attempt_ratios(lambda src: _attempt_without_zero_rejection(src, t, s))
    assert not np.isclose(wrong_zero[0], math.exp(1 / scale), rtol=0.1)
    wrong_scale, _ = _attempt_ratios(lambda src: src._discrete_laplace_attempt(11 * t, 10 * s))
    assert not np.allclose(wrong_scale, math.exp(1 / scale), rtol=0.01)


def _dlap_pmf(b: float, K: int) -> np.ndarray:
    """P(Z < −K), P(Z = −K), …, P(Z = K), P(Z > K) for the discrete Laplace law of scale b."""
    q = math.exp(-1.0 / b)
    z = np.arange(-K, K + 1)
    tail = q ** (K + 1) / (1 + q)
    return np.concatenate([[tail], (1 - q) / (1 + q) * q ** np.abs(z), [tail]])


def _dlap_chi2(draws: np.ndarray, b: float, K: int = 8) -> float:
    obs = np.concatenate([[np.sum(draws < -K)], [np.sum(draws == v) for v in range(-K, K + 1)],
                          [np.sum(draws > K)]])
    return stats.chisquare(obs, _dlap_pmf(b, K) * draws.size).pvalue


def test_discrete_laplace_pmf_chi_square_with_power_against_a_10_percent_scale_error():
    """20 000 seeded draws at scale 2 (ε = 1, Δ = 2) fit the pmf and reject scales 1.8 and 2.2."""
    z = SeededRandom(11).discrete_laplace(Fraction(2), 20_000)
    assert z.dtype == np.int64
    assert _dlap_chi2(z, 2.0) > 1e-4
    for wrong in (1.8, 2.2):
        assert _dlap_chi2(z, wrong) < 1e-8


def test_discrete_laplace_is_secure_by_default_and_uses_no_float(monkeypatch):
    """The default source draws its integers from ``secrets``, never a float uniform; the law is right."""
    import secrets

    calls = []
    real = secrets.randbelow
    monkeypatch.setattr(secrets, "randbelow", lambda n: calls.append(n) or real(n))
    src = noise_source(None)
    monkeypatch.setattr(src, "uniform", lambda size: pytest.fail("a float uniform was drawn"))
    z = src.discrete_laplace(Fraction(2), 20_000)
    assert isinstance(src, SecureRandom) and len(calls) > 20_000
    assert _dlap_chi2(z, 2.0) > 1e-6 and _dlap_chi2(z, 2.2) < 1e-6


def test_seeded_integer_noise_is_reproducible_from_the_generator():
    with pytest.warns(PrivacyLeakWarning):
        a = noise_source(5)
    b = SeededRandom(np.random.default_rng(5))
    scale = Fraction(2) / Fraction(0.1)
    za, zb = a.discrete_laplace(scale, 300), b.discrete_laplace(scale, 300)
    assert np.array_equal(za, zb) and not np.array_equal(za, SeededRandom(6).discrete_laplace(scale, 300))
    # the integers come from the Generator: advancing it changes the draws
    gen = np.random.default_rng(5)
    gen.random()
    assert not np.array_equal(za, SeededRandom(gen).discrete_laplace(scale, 300))
    assert a.discrete_laplace(1, (2, 3)).shape == (2, 3)


def test_discrete_laplace_is_fast_enough_and_handles_tiny_epsilon():
    import time

    for src in (SecureRandom(), SeededRandom(0)):
        start = time.perf_counter()
        z = src.discrete_laplace(Fraction(2) / Fraction(0.1), 300)
        assert time.perf_counter() - start < 1.0 and z.size == 300
    # ε = 1e-10 gives a scale whose numerator needs more than 64 bits: still exact, still int64
    huge = SeededRandom(1).discrete_laplace(Fraction(2) / Fraction(1e-10), 200)
    assert huge.dtype == np.int64 and 5e9 < np.mean(np.abs(huge)) < 5e10


@pytest.mark.parametrize("n", [1, 7, 2**64 - 3, 2**64 + 5, 3 * 2**70])
def test_randbelow_is_uniform_and_in_range(n):
    for src in (SecureRandom(), SeededRandom(n % 1000)):
        draws = [src.randbelow(n) for _ in range(3000)]
        assert all(0 <= v < n for v in draws)
        if n == 1:
            continue
        # the residues mod 7 (or the values, for n = 7) are uniform up to a bias of n mod 7 / n
        obs = np.bincount([v % 7 for v in draws], minlength=7)
        assert stats.chisquare(obs).pvalue > 1e-6
    biased = [int(v) for v in np.random.default_rng(0).integers(0, 7, 3000) if v != 6]
    assert stats.chisquare(np.bincount(biased, minlength=7)).pvalue < 1e-6  # the test has power


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "4"])
def test_randbelow_and_discrete_laplace_reject_bad_arguments(bad):
    with pytest.raises(ParameterError):
        SeededRandom(0).randbelow(bad)
    with pytest.raises(ParameterError):
        SecureRandom().randbelow(bad)
    for scale in (0, -1.0, float("nan"), float("inf"), "2", True):
        with pytest.raises(ParameterError):
            SeededRandom(0).discrete_laplace(scale, 3)
    with pytest.raises(ParameterError):
        SeededRandom(0).bernoulli_exp(Fraction(-1, 2))


def test_both_mechanisms_implement_the_protocol():
    from cvxdp.privacy.mechanisms import DiscreteLaplaceCounts, Mechanism

    l2 = L2LaplaceMechanism(0.5, 1.0, 3)
    counts = DiscreteLaplaceCounts(2.0, 0.5, 7)
    assert isinstance(l2, Mechanism) and isinstance(counts, Mechanism)
    assert l2.snap_radius == math.sqrt(3) * l2.snap_granularity / 2 and counts.snap_radius == 0.0
    assert counts.scale == Fraction(4)  # Δ/ε exactly
    assert counts.radius_quantile(0.01) >= 4.0 * math.log(100.0)


def test_count_release_is_the_exact_discrete_laplace_draw():
    from cvxdp.privacy.mechanisms import DiscreteLaplaceCounts

    c = np.array([3, 0, 11, 5])
    out = DiscreteLaplaceCounts(2.0, 0.3, 4).release(c, SeededRandom(2))
    z = SeededRandom(2).discrete_laplace(Fraction(2) / Fraction(0.3), 4)
    assert out.tolist() == (c + z).astype(float).tolist()
    with pytest.raises(ParameterError):
        DiscreteLaplaceCounts(2.0, 0.3, 4).release(np.array([0.5, 1, 2, 3]), SeededRandom(2))


def test_a_noise_scale_below_sensitivity_over_epsilon_is_refused():
    assert L2LaplaceMechanism(1.0, 0.5, 2, scale=4.0).scale == 4.0  # a larger public scale is fine
    with pytest.raises(ParameterError, match="below sensitivity"):
        L2LaplaceMechanism(1.0, 0.5, 2, scale=1.0)


@given(st.floats(1e-12, 1e12), st.floats(1e-10, 1e3))
def test_laplace_scale_covers_the_sensitivity_exactly_and_is_tight(delta, eps):
    from cvxdp.privacy.mechanisms import laplace_scale

    s = laplace_scale(delta, eps)
    assert Fraction(s) * Fraction(eps) >= Fraction(delta)
    below = math.nextafter(s, 0.0)
    assert Fraction(below) * Fraction(eps) < Fraction(delta)  # the smallest such float
    assert laplace_scale(np.array([delta, 2.0]), np.array([eps, 0.5])).tolist() == [s, 4.0]


def test_grid_fits_is_exact_at_its_threshold_and_fails_closed():
    """``grid_fits(s, e)``: ``e + Λ < 2⁵² Λ`` with ``Λ`` the power of two ≥ ``s``; NaN and infinities: no."""
    from cvxdp.privacy.mechanisms import GRID_BITS, grid_fits

    lam = 2.0 ** -30
    edge_ok = math.ldexp(lam, GRID_BITS) - 2 * lam  # e + Λ just below 2⁵² Λ
    assert grid_fits(lam, edge_ok)
    assert not grid_fits(lam, math.ldexp(lam, GRID_BITS))
    assert grid_fits(lam * 0.75, edge_ok)  # Λ(0.75·2⁻³⁰) = 2⁻³⁰
    for bad in ((math.nan, 1.0), (1.0, math.nan), (math.inf, 1.0), (1.0, math.inf), (0.0, 1.0), (1.0, -1.0),
                (5e-324, 1.0)):
        assert not grid_fits(*bad)
    assert grid_fits(5e-324, 0.0)  # the subnormal grid of a box at 0 is still exact


def test_a_grid_too_fine_for_the_box_is_refused_before_any_noise():
    """Review helper-41: with ``Λ`` far below the box's float spacing, ``clamped/Λ`` overflowed for a point
    far out and not for one near 0 — a data-dependent refusal.  The release now refuses on the box and the
    scale alone, drawing nothing; within the threshold every snapped release is finite and on the grid."""
    from cvxdp.privacy.mechanisms import GRID_TOO_FINE

    class NoDraw:
        def gamma(self, *a):
            raise AssertionError("noise was drawn")

        unit_vectors = gamma

    mech = L2LaplaceMechanism(1.0, 1e300, 2)  # s = 1e-300
    for point in (np.zeros(2), np.array([8.0, -8.0])):
        with pytest.raises(ParameterError, match="floating-point-safe") as info:
            mech.release(point, NoDraw(), (np.full(2, -10.0), np.full(2, 10.0)))
        assert str(info.value) == GRID_TOO_FINE
    fine = L2LaplaceMechanism(1.0, 1e10, 2)  # Λ = 2⁻³³: 10/Λ ≈ 2³⁶ — fits
    out = fine.release(np.array([8.0, -8.0]), noise_source(0), (np.full(2, -10.0), np.full(2, 10.0)))
    steps = out / fine.snap_granularity
    assert np.all(np.isfinite(out)) and np.all(steps == np.round(steps))


@given(st.integers(-300, 300), st.floats(1e-3, 1e3), st.floats(0.0, 1.0), st.integers(1, 4))
def test_the_release_frame_is_exact_and_keeps_the_box_within_nine_half_widths(exp10, width, where, dim):
    """``release_frame``: on a far coordinate ``x − o`` is exact (Sterbenz) for every ``x`` of the box, so the
    frame changes nothing a neighbour could see; the reach is at most 9 half-widths; near 0 ``o = 0``."""
    from cvxdp.privacy.mechanisms import release_frame

    centre = np.array([10.0**exp10 * (1 + 0.1 * j) for j in range(dim)])
    half = width * 10.0**min(exp10, 300) * 1e-3 if exp10 > 0 else width
    lo, hi = centre - half, centre + half
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        return
    origin, reach = release_frame(lo, hi)
    r = float(np.max(hi / 2 - lo / 2))
    assert reach <= 9 * r * (1 + 1e-12)
    near = np.abs(lo / 2 + hi / 2) <= 8 * r
    assert np.all(origin[near] == 0.0)
    x = lo + where * (hi - lo)
    x = np.clip(x, lo, hi)
    for xs in (x, lo, hi):
        exact = [Fraction(float(a)) - Fraction(float(b)) for a, b in zip(xs, origin, strict=True)]
        assert [Fraction(float(v)) for v in xs - origin] == exact


def test_a_box_far_from_zero_is_released_in_its_frame():
    """Review helper-42: snapping in absolute coordinates needs a grid coarser than the box's own float
    spacing, so a far box (a ball of radius 1 at 10¹², noise scale 10⁻⁶) was refused at any ε — and before
    the refusal it would have lost the noise below the box's ulp (the released point a function of the
    data's rounding).  In the frame at ``o`` the sum ``(x − o) + b`` has the resolution of a box near 0:
    the release goes through, lands within 1.5Λ of the box, and two points within the sensitivity give
    identical outputs under the same noise except near a rounding boundary."""
    from cvxdp.privacy.mechanisms import grid_fits, release_frame

    mech = L2LaplaceMechanism(sensitivity=1e-6, epsilon=1.0, dim=2)
    lam = mech.snap_granularity
    lo, hi = np.array([1e12 - 1.0, -1.0]), np.array([1e12 + 1.0, 1.0])
    origin, reach = release_frame(lo, hi)
    assert origin[0] == 1e12 and origin[1] == 0.0 and reach == 1.0
    assert not grid_fits(mech.scale, 1e12 + 1.0) and grid_fits(mech.scale, reach)
    point = np.array([1e12 + 0.25, 0.5])
    out = np.array([mech.release(point, SeededRandom(i), (lo, hi)) for i in range(200)])
    assert np.all(np.isfinite(out))
    assert np.all(out >= lo - 1.5 * lam - 2**-12) and np.all(out <= hi + 1.5 * lam + 2**-12)
    inner = out[:, 1]
    assert np.all(np.mod(inner, lam) == 0.0)  # the near coordinate is on the grid Λ Z itself
    # the channel stays closed in the frame: inputs 2⁻⁴⁰Λ apart (representable at 1e3), same noise
    mech = L2LaplaceMechanism(sensitivity=0.3, epsilon=1.0, dim=2)
    lam = mech.snap_granularity
    lo, hi = np.full(2, 1e3 - 1.0), np.full(2, 1e3 + 1.0)
    a = np.full(2, 1e3 + 0.1)
    b = a + lam * 2.0**-40
    assert np.all(b != a)
    snap_a = np.array([mech.release(a, SeededRandom(i), (lo, hi)) for i in range(1000)])
    snap_b = np.array([mech.release(b, SeededRandom(i), (lo, hi)) for i in range(1000)])
    assert np.mean(np.any(snap_a != snap_b, axis=1)) <= 0.002


@pytest.mark.parametrize("centre,radius", [
    ([1e12, 1e12, 1e12], 5e-5),  # the box collapses onto its centre (r below half its float spacing)
    ([1e300, 0.0], 1e-10),  # c/q beyond the float range on the far coordinate
    ([1e12, 9.77e-4], 6.1066e-5),  # rounding doubles the computed half-width
    ([0.0, 0.0], 2.0), ([-3e6, 5.0], 0.5), ([1e-300, -2e-300], 1e-310),
])
def test_the_planner_checks_the_very_box_the_release_will(centre, radius):
    """Review helper-43: a bound ``min(||c||_∞ + 2r, 9r)`` fell below the reach the release computes at
    the float edges (a collapsed box, an overflowing ``c/q``, a rounded half-width), so a plan could pass
    and its release refuse after the charge.  The planner now computes the release's own frame; a
    coordinate too far out to round to a multiple of ``q`` (or a collapsed box) is its own origin."""
    from cvxdp.privacy.mechanisms import grid_fits, release_box_edge, release_frame

    c = np.array(centre)
    origin, _ = release_frame(c - radius, c + radius)
    edge = release_box_edge(c, radius)
    assert np.isfinite(edge) and np.all(np.isfinite(origin))
    # what the planner passes, the release passes: the finest scale the plan accepts at this edge (and one
    # far coarser) releases on the box (c − r, c + r) release_point uses, finite and within 1.5Λ of it
    finest = max(edge, 2.0**-1000) * 2.0**-48
    assert grid_fits(finest, edge)
    if edge > 2.0**-1000:  # a scale 2⁸ finer is refused (below that the subnormal grid bottoms out)
        assert not grid_fits(finest * 2.0**-8, edge)
    for scale in (finest, 1.0):
        mech = L2LaplaceMechanism(scale, 1.0, c.size, scale=scale)
        out = mech.release(c, SeededRandom(0), (c - radius, c + radius))
        lam = mech.snap_granularity
        assert np.all(np.isfinite(out))
        assert np.all(out >= (c - radius) - 1.5 * lam - np.spacing(np.abs(c)))
        assert np.all(out <= (c + radius) + 1.5 * lam + np.spacing(np.abs(c)))
    for x in (c - radius, c + radius, c):
        inside = np.clip(x, c - radius, c + radius)
        exact = [Fraction(float(a)) - Fraction(float(b)) for a, b in zip(inside, origin, strict=True)]
        assert [Fraction(float(v)) for v in inside - origin] == exact


def test_the_release_refuses_a_bad_point_before_clamping_and_a_box_at_the_float_range_end():
    """Review helper-43: the clamp mapped ±inf into the box (released instead of refused) and broadcast a
    point of another shape; both are refused before any noise again.  A box whose released point could
    overflow (the top of the float range, a coarse grid) is refused on the box and the scale alone."""
    from cvxdp.error import CertificationError

    mech, box = L2LaplaceMechanism(1.0, 1.0, 2), (np.full(2, -1.0), np.full(2, 1.0))
    with pytest.raises(CertificationError):
        mech.release(np.array([np.inf, 0.0]), SeededRandom(0), box)
    with pytest.raises(ValueError):
        mech.release(np.array([0.0]), SeededRandom(0), box)
    top = np.finfo(float).max
    coarse = L2LaplaceMechanism(1.0, 1.0, 2, scale=2.0**970)
    with pytest.raises(ParameterError, match="end of the float range"):
        coarse.release(np.full(2, top - 1e300), SeededRandom(0), (np.full(2, top - 1e300), np.full(2, top)))
