"""Certified sums (``cvxdp.numerics``): the error bound holds in exact arithmetic and is tight."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvxdp.numerics import EPS, accurate_sum, row_scales, weighted_row_sum


def _exact(col) -> Fraction:
    return sum((Fraction(float(v)) for v in col), Fraction(0))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 700), spread=st.floats(0.0, 300.0), seed=st.integers(0, 2**31 - 1))
def test_accurate_sum_bound_holds_exactly_and_is_tight(m, spread, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, 3)) * np.exp2(rng.uniform(-spread, spread, size=(m, 3)).round())
    x[:, 2] = np.clip(x[:, 2], -1e300, 1e300)
    s, err = accurate_sum(x)
    for j in range(3):
        exact = _exact(x[:, j])
        assert abs(Fraction(float(s[j])) - exact) <= Fraction(float(err[j]))
        # as accurate as an exactly rounded sum, up to the remainder far below it
        remainder = 4 * (m + 1) * EPS * 2.0**-50 * np.abs(x[:, j]).max()
        assert err[j] <= 2 * EPS * abs(float(exact)) + 1e-300 + remainder


def test_accurate_sum_survives_cancellation_that_defeats_a_float_sum():
    x = np.array([1e16, 1.0, -1e16, 1.0, 1e-8] * 50)
    s, err = accurate_sum(x)
    assert s == math.fsum(x) and abs(Fraction(float(s)) - _exact(x)) <= Fraction(float(err))
    assert float(np.sum(x)) != s  # a plain float sum gets it wrong: the test has power


def test_accurate_sum_does_not_depend_on_row_order_and_fails_closed():
    rng = np.random.default_rng(1)
    x = rng.standard_t(1.5, size=(5000, 2)) * 1e5
    s1, _ = accurate_sum(x)
    s2, _ = accurate_sum(x[rng.permutation(5000)])
    assert np.array_equal(s1, s2)
    y = x.copy()
    y[3, 1] = np.nan
    s, err = accurate_sum(y)
    assert np.isfinite(s[0]) and np.isnan(s[1]) and err[1] == np.inf
    assert accurate_sum(np.zeros((0, 2)))[0].tolist() == [0.0, 0.0]
    assert accurate_sum(np.array([np.inf, 1.0]))[1] == np.inf


@pytest.mark.parametrize("m", [1, 15, 16, 17, 333])
def test_weighted_row_sum_bound_holds_exactly(m):
    rng = np.random.default_rng(m)
    a = rng.standard_t(2.0, size=(m, 4)) * np.exp(rng.uniform(-30, 30, size=(m, 1)))
    c = rng.standard_normal(m) * (rng.random(m) < 0.6)
    s, err = weighted_row_sum(a, c, row_scales(a))
    for j in range(4):
        exact = sum((Fraction(float(ci)) * Fraction(float(aj)) for ci, aj in zip(c, a[:, j], strict=True)),
                    Fraction(0))
        assert abs(Fraction(float(s[j])) - exact) <= Fraction(float(err[j]))
        scale = float(np.abs(c) @ np.abs(a).max(axis=1))
        assert err[j] <= 2 * 16 * EPS * scale + 2 * EPS * abs(float(exact)) + 1e-290


def test_weighted_row_sum_bound_is_infinite_for_non_finite_input():
    a = np.ones((40, 2))
    c = np.ones(40)
    c[5] = np.inf
    _, err = weighted_row_sum(a, c, row_scales(a))
    assert np.all(err == np.inf)


def test_accurate_sum_near_the_top_of_the_float_range():
    x = np.array([1e308, -1e308, 3.0, 1e307])
    s, err = accurate_sum(x)
    assert s == math.fsum(x) and abs(Fraction(float(s)) - _exact(x)) <= Fraction(float(err))
    s, err = accurate_sum(np.array([1e308, 1e308]))
    assert s == np.inf and err == np.inf


def test_weighted_row_sum_charges_each_row_on_its_own_product():
    """A row with huge features and a tiny weight beside rows with ordinary features and weights: the bound
    is the size of the products, not of the largest feature times the largest weight (found as a stalled
    certificate: a Huber row of 10¹¹ clipped to slope C has a weight of 10⁻¹¹)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 2))
    a[5] = [-1e11, -1e11]
    c = rng.standard_normal(64)
    c[5] = 1.7e-11
    _, err = weighted_row_sum(a, c, row_scales(a))
    assert np.all(err < 1e-12)


def test_weighted_row_sum_charges_products_that_underflow():
    """Found by review: every product below the subnormal range made the bound 0 while the exact sum was
    2·10⁻⁴⁰⁰."""
    a = np.full((2, 1), 1e-200)
    c = np.full(2, 1e-200)
    s, err = weighted_row_sum(a, c, row_scales(a))
    assert abs(Fraction(float(s[0])) - 2 * Fraction(1e-200) ** 2) <= Fraction(float(err[0]))
