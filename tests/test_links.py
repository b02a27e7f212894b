"""Scalar links: conjugates satisfy Fenchel–Young, derivatives bracket finite differences."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from cvxdp.links import HuberLink, LogisticLink, PiecewiseLinearLink, ShiftedSquareLink, SquareLink

LINKS = {
    "hinge": PiecewiseLinearLink(np.array([[0.0, 1.0]]), np.array([[0.0, 0.0]])),
    "absolute": PiecewiseLinearLink(np.array([[-1.0, 1.0]]), np.array([[0.0, 0.0]])),
    "pinball": PiecewiseLinearLink(np.array([[0.3, -0.7]]), np.array([[0.1, -0.2]])),
    "three-piece": PiecewiseLinearLink(np.array([[-2.0, 0.5, 3.0]]), np.array([[1.0, 0.0, -4.0]])),
    "huber": HuberLink(0.8, 1.5),
    "square": SquareLink(0.7),
    "shifted-square": ShiftedSquareLink(0.7, -2.5),
    "logistic": LogisticLink(2.0),
}


@pytest.mark.parametrize("name", sorted(LINKS))
def test_fenchel_young(name, rng):
    """φ(u) + φ*(π) ≥ π u for all (u, π), with equality at π ∈ ∂φ(u)."""
    link = LINKS[name]
    lo, hi = link.dual_domain()
    lo = float(np.max(lo)) if np.isfinite(np.max(lo)) else -5.0
    hi = float(np.min(hi)) if np.isfinite(np.min(hi)) else 5.0
    u = rng.normal(size=500) * 3
    pi = rng.uniform(lo, hi, size=500)
    assert np.all(link.value(u) + link.conjugate(pi) >= pi * u - 1e-12 * (1 + np.abs(pi * u)))
    dl, dr = link.derivative_bounds(u)
    for p in (dl, dr, 0.5 * (dl + dr)):
        assert np.allclose(link.value(u) + link.conjugate(p), p * u, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("name", sorted(LINKS))
def test_conjugate_is_infinite_outside_domain(name):
    link = LINKS[name]
    lo, hi = link.dual_domain()
    if np.isfinite(np.max(hi)):
        assert np.isinf(link.conjugate(np.array([float(np.max(hi)) + 0.1]))).all()
    if np.isfinite(np.min(lo)):
        assert np.isinf(link.conjugate(np.array([float(np.min(lo)) - 0.1]))).all()


@pytest.mark.parametrize("name", sorted(LINKS))
def test_derivatives_bracket_finite_differences(name, rng):
    link = LINKS[name]
    u = rng.normal(size=200) * 3
    h = 1e-6
    fd_right = (link.value(u + h) - link.value(u)) / h
    fd_left = (link.value(u) - link.value(u - h)) / h
    dl, dr = link.derivative_bounds(u)
    assert np.all(fd_left >= dl - 1e-4) and np.all(fd_right <= dr + 1e-4)


def test_lipschitz_bound_on_interval(rng):
    for link in LINKS.values():
        lo = rng.normal(size=50)
        hi = lo + rng.uniform(0, 3, size=50)
        L = link.lipschitz_on(lo, hi)
        t = rng.uniform(size=(50, 20))
        pts = lo[:, None] + t * (hi - lo)[:, None]
        vals = link.value(pts.ravel()).reshape(pts.shape) if not isinstance(
            link, PiecewiseLinearLink) else np.stack([link.value(pts[:, j]) for j in range(20)], 1)
        slopes = np.abs(np.diff(vals, axis=1)) / np.maximum(np.abs(np.diff(pts, axis=1)), 1e-12)
        assert np.all(slopes <= L[:, None] + 1e-6)


def test_piecewise_kinks_are_breakpoints():
    link = LINKS["three-piece"]
    kinks = link.kinks()[0]
    vals = link._pieces(kinks)[0] if kinks.ndim == 1 else None
    assert vals is None or vals.shape[0] == kinks.shape[0]
    # at each true kink two pieces tie at the maximum
    for k in kinks[np.isfinite(kinks)]:
        pieces = LINKS["three-piece"].slopes[0] * k + LINKS["three-piece"].intercepts[0]
        top = np.sort(pieces)[-2:]
        if np.isclose(link.value(np.array([k]))[0], top[-1]):
            continue
        raise AssertionError("kink not on the envelope")


def test_shifted_square_is_the_square_minus_its_level(rng):
    """``c u (u + 2T) = c (u + T)² − c T²`` in exact arithmetic; its value errs by a few ulps of itself."""
    T = rng.normal(size=200) * 10.0 ** rng.integers(-3, 30, size=200)
    u = rng.normal(size=200) * 10.0 ** rng.integers(-5, 3, size=200)
    link = ShiftedSquareLink(0.7, T)
    got = link.value(u)
    for i in range(200):
        c, ui, Ti = Fraction(0.7), Fraction(float(u[i])), Fraction(float(T[i]))
        exact = c * (ui + Ti) ** 2 - c * Ti**2
        assert exact == c * ui * (ui + 2 * Ti)
        assert abs(Fraction(float(got[i])) - exact) <= 4 * Fraction(np.finfo(float).eps) * abs(exact)


def test_shifted_square_conjugate_rounding_bounds_the_exact_error(rng):
    """The charged margin covers the float conjugate's distance to ``c (π/(2c) − T)²`` computed in exact
    arithmetic, at the multipliers that arise (``π = φ'(u)``, huge shifts, small arguments) and random ones;
    and it is not vacuous: well below the conjugate's size where no cancellation happens."""
    c = 0.3
    T = rng.choice([-1.0, 1.0], 300) * 10.0 ** rng.uniform(-2, 9, 300)
    link = ShiftedSquareLink(c, T)
    u = rng.normal(size=300) * 10.0 ** rng.uniform(-6, 2, 300)
    at_u = link.derivative(u)
    for pi in (at_u, rng.normal(size=300) * np.abs(T), np.nextafter(at_u, np.inf)):
        got, margin = link.conjugate(pi), link.conjugate_rounding(pi)
        for i in range(300):
            exact = Fraction(c) * (Fraction(float(pi[i])) / (2 * Fraction(c)) - Fraction(float(T[i]))) ** 2
            assert abs(Fraction(float(got[i])) - exact) <= Fraction(float(margin[i]))
    far = ShiftedSquareLink(c, np.zeros(5)).conjugate_rounding(np.linspace(1, 5, 5))
    assert np.all(far <= 1e-14 * ShiftedSquareLink(c, np.zeros(5)).conjugate(np.linspace(1, 5, 5)))


def test_shifted_square_subsets_its_shifts():
    link = ShiftedSquareLink(1.0, np.array([1.0, 2.0, 3.0]))
    assert np.array_equal(link.subset(np.array([2, 0])).shift, [3.0, 1.0])
    with pytest.raises(ValueError):
        ShiftedSquareLink(1.0, np.array([1e308]))  # 2T overflows


@pytest.mark.parametrize("scale", [1.0, 3.5])
def test_logistic_conjugate_rounding_bounds_the_exact_error(scale, rng):
    """``φ*(π) = c[p log p + (1 − p) log(1 − p)]`` in 60-digit decimals against the float formula, across
    ``p`` from 10⁻¹⁸ to 1 − 10⁻⁹: the charge covers the absolute error of ``fl(1 − p)`` that a relative
    bound misses at small ``p`` (found by review: a certified lower bound 5·10⁻¹⁷ above the minimum)."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    link = LogisticLink(scale)
    p = np.concatenate([10.0 ** rng.uniform(-18, -1, 300), 1.0 - 10.0 ** rng.uniform(-9, -1, 100)])
    pi = p * scale
    got, charge = link.conjugate(pi), link.conjugate_rounding(pi)
    worst = 0.0
    for v, g, c in zip(pi, got, charge, strict=True):
        q = Decimal(float(v)) / Decimal(scale)
        exact = Decimal(scale) * (q * q.ln() + (1 - q) * (1 - q).ln())
        err = abs(Decimal(float(g)) - exact)
        assert err <= Decimal(float(c))
        worst = max(worst, float(err / Decimal(float(c))))
    assert worst > 0.01  # the charge is not vacuous: the error reaches a fair share of it


def test_two_piece_order_is_argsorts_bit_for_bit(rng):
    """The two-piece link orders each row's pieces by slope as ``np.argsort`` does (NaN last, ties and
    ``±0`` kept in place) without sorting: its conjugate's data, compared bit for bit with the sorted
    reference, on rows of NaN, ±inf, ±0, subnormal and ordinary slopes."""
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 5e-324, 1e308])
    slopes = np.vstack([rng.choice(special, (4000, 2)), rng.normal(size=(1000, 2))])
    levels = rng.normal(size=slopes.shape)
    link = PiecewiseLinearLink(slopes, levels)
    order = np.argsort(link.slopes, axis=-1)
    ks = np.take_along_axis(link.slopes, order, axis=-1)
    es = np.take_along_axis(link.intercepts, order, axis=-1)
    with np.errstate(all="ignore"):
        span = ks[:, 1] - ks[:, 0]
        want = (ks[:, 0], ks[:, 1], -es[:, 0],
                np.where(span > 0, (es[:, 0] - es[:, 1]) / np.where(span > 0, span, 1.0), 0.0))
    assert np.any(order[:, 0] == 1)  # some rows are swapped
    for mine, ref in zip(link._two, want, strict=True):
        np.testing.assert_array_equal(mine.view(np.int64), ref.view(np.int64))
