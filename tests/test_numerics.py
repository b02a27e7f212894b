"""Certified sums (``cvxdp.numerics``): the error bound holds in exact arithmetic and is tight."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvxdp.numerics as numerics
from cvxdp.numerics import EPS, accurate_sum, row_combine, row_dot, row_norm, row_scales, weighted_row_sum


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


def _wide_rows(rng, m: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((m, d)) * np.exp(3.0 * rng.standard_normal((m, d)))  # magnitudes spread
    return x, rng.standard_normal((m, d))


@pytest.mark.parametrize("d", [1, 3, 20, 8192, 8193, 10_000, 30_001])
def test_row_products_give_a_row_the_same_bits_alone_in_any_batch_and_any_layout(d):
    """Per example means per example: a row's dot, norm and combination are the same bits whether it
    is alone (1-D or a one-row batch), in a subset, in the whole batch or in a Fortran-ordered array.
    (A bare ``np.einsum`` fails this beyond 8192 terms and for Fortran order at any length.)"""
    rng = np.random.default_rng(d)
    m = 6
    x, y = _wide_rows(rng, m, d)
    v = rng.standard_normal(d)
    stack = np.stack([x, y, x - y], axis=1)  # (m, 3, d)
    coef = rng.standard_normal((m, 3))
    cases = {
        "dot": lambda x, y, s, c: row_dot(x, y),
        "dot with a shared vector": lambda x, y, s, c: row_dot(x, v),
        "norm": lambda x, y, s, c: row_norm(x),
        "dots of a row's block": lambda x, y, s, c: row_dot(s, y[..., None, :]),
        "combination": lambda x, y, s, c: row_combine(c, s),
    }
    for name, fn in cases.items():
        whole = fn(x, y, stack, coef)
        fortran = fn(np.asfortranarray(x), np.asfortranarray(y), np.asfortranarray(stack),
                     np.asfortranarray(coef))
        for i in range(m):
            pair = [i, (i + 3) % m]
            one = slice(i, i + 1)
            seen = [fn(x[i], y[i], stack[i], coef[i]), fn(x[one], y[one], stack[one], coef[one])[0],
                    fn(x[pair], y[pair], stack[pair], coef[pair])[0], fortran[i]]
            for got in seen:
                assert np.array_equal(got, whole[i]), (name, d, i)


@pytest.mark.parametrize("K", [4, 8193, 20_000])
def test_row_combine_with_a_shared_matrix_keeps_each_rows_bits(K):
    rng = np.random.default_rng(K)
    c = rng.standard_normal((5, K)) * np.exp(3.0 * rng.standard_normal((5, K)))
    M = rng.standard_normal((K, 7))
    whole = row_combine(c, M)
    for i in range(5):
        assert np.array_equal(row_combine(c[i], M), whole[i])
        assert np.array_equal(row_combine(c[i:i + 1], M)[0], whole[i])
    np.testing.assert_allclose(whole, c @ M, rtol=1e-9, atol=1e-9 * float(np.max(np.abs(c) @ np.abs(M))))


@pytest.mark.parametrize("d", [5, 10_000])
def test_row_dot_is_within_the_dot_products_error_bound(d):
    """``|fl(<x, y>) − <x, y>| ≤ γ_d Σ|x_j y_j|`` (Higham, Theorem 3.1), against the exact rational sum."""
    rng = np.random.default_rng(3)
    x, y = _wide_rows(rng, 3, d)
    got = row_dot(x, y)
    gamma = d * EPS / (1.0 - d * EPS)
    for i in range(3):
        exact = sum((Fraction(float(p)) * Fraction(float(q)) for p, q in zip(x[i], y[i], strict=True)),
                    Fraction(0))
        size = math.fsum(abs(float(p) * float(q)) for p, q in zip(x[i], y[i], strict=True))
        assert abs(Fraction(float(got[i])) - exact) <= Fraction(gamma * size * (1.0 + 4.0 * EPS))


def test_row_dot_blocks_long_rows_without_changing_their_bits(monkeypatch):
    """Beyond 8192 terms the products are formed a block of rows at a time (to bound the temporary);
    the blocking cannot move a row's bits."""
    rng = np.random.default_rng(9)
    x, y = _wide_rows(rng, 7, 10_000)
    whole = row_dot(x, y)
    monkeypatch.setattr(numerics, "_PRODUCT_BLOCK", 20_000)  # two rows per block
    assert np.array_equal(row_dot(x, y), whole)
    assert np.array_equal(row_dot(x[:, None, :], np.stack([y, x], axis=1)),
                          np.stack([whole, row_dot(x, x)], axis=1))


def test_row_dot_handles_empty_and_single_leading_axes_past_the_buffer(monkeypatch):
    """Zero-size middle axes give empty results (not a division by zero, found by review), and a
    leading axis of 1 is blocked along the next one — the same bits as row by row."""
    assert row_dot(np.ones((5, 0, 9000)), np.ones(9000)).shape == (5, 0)
    assert row_combine(np.ones((2, 9000)), np.ones((9000, 0))).shape == (2, 0)
    rng = np.random.default_rng(4)
    x, y = _wide_rows(rng, 6, 9000)
    monkeypatch.setattr(numerics, "_PRODUCT_BLOCK", 20_000)
    got = row_dot(x[None], y)
    assert got.shape == (1, 6)
    assert np.array_equal(got[0], np.array([row_dot(x[i], y[i]) for i in range(6)]))


@pytest.mark.parametrize("columns", [1, 2, 3, numerics.SHORT_ROW, numerics.SHORT_ROW + 1, 40])
def test_row_max_min_all_are_numpys_reductions(rng, columns):
    """``row_max``/``row_min``/``row_all`` give numpy's values over the last axis — NaN propagating,
    ±inf, broadcast views, 3-d stacks — on either side of ``SHORT_ROW`` (column by column below it)."""
    special = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, -1.0, 5e-324, -1e308])
    x = np.where(rng.random((500, columns)) < 0.3, rng.choice(special, (500, columns)),
                 rng.normal(size=(500, columns)))
    for arr in (x, x.reshape(5, 100, columns), np.broadcast_to(x[:1], (300, columns)), np.asfortranarray(x)):
        for mine, ref in ((numerics.row_max, np.max), (numerics.row_min, np.min)):
            np.testing.assert_array_equal(mine(arr), ref(arr, axis=-1))
        np.testing.assert_array_equal(numerics.row_all(np.isfinite(arr)), np.all(np.isfinite(arr), axis=-1))
        np.testing.assert_array_equal(numerics.row_all(arr > 0), np.all(arr > 0, axis=-1))
    assert np.isnan(numerics.row_max(np.array([[1.0, np.nan], [np.nan, 1.0]]))).all()
    with pytest.raises(ValueError):
        numerics.row_max(np.zeros((3, 0)))  # an empty row has no maximum, as in numpy
