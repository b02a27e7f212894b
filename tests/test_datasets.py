"""Synthetic tasks: closed-form moments and quadrature population risks against Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from cvxdp.datasets import (
    REAL,
    high_leverage_tail,
    linear_lower_bound,
    student_t_hinge,
    student_t_lad,
    student_t_norm_moment,
)


@pytest.mark.parametrize("d, nu, k", [(1, 5.0, 2.0), (5, 5.0, 2.0), (10, 9.0, 4.0), (3, 12.0, 6.0)])
def test_student_t_norm_moments(d, nu, k):
    from cvxdp.datasets import multivariate_t

    X = multivariate_t(np.random.default_rng(1), 2_000_000, d, nu)
    mc = np.mean(np.linalg.norm(X, axis=1) ** k)
    assert mc == pytest.approx(student_t_norm_moment(d, nu, k), rel=0.03)
    if k == 2.0:
        assert student_t_norm_moment(d, nu, 2.0) == pytest.approx(d * nu / (nu - 2))
    assert student_t_norm_moment(d, 4.0, 4.0) == np.inf


def _mc_risk(task, w, loss):
    r = task.y_test - task.X_test @ w if loss != "hinge" else None
    if loss == "absolute":
        vals = np.abs(r)
    else:
        vals = np.maximum(0.0, 1.0 - task.y_test * (task.X_test @ w))
    return vals.mean(), vals.std() / np.sqrt(vals.size)


@pytest.mark.parametrize("maker, loss", [(student_t_lad, "absolute"), (student_t_hinge, "hinge"),
                                         (high_leverage_tail, "absolute")])
def test_population_risk_matches_monte_carlo(maker, loss):
    task = maker(n=10, d=5, n_test=3_000_000, seed=7)
    rng = np.random.default_rng(2)
    for w in (task.w_star, task.w_star + 0.3 * rng.normal(size=5), np.zeros(5)):
        mean, se = _mc_risk(task, w, loss)
        assert abs(task.population_risk(w) - mean) <= 5 * se + 1e-4


def test_minimizers_are_minimal():
    rng = np.random.default_rng(3)
    for task in (student_t_lad(n=10, d=4, seed=1), student_t_hinge(n=10, d=4, seed=1),
                 high_leverage_tail(n=10, d=4, seed=1)):
        f_star = task.population_risk(task.w_star)
        for _ in range(20):
            w = task.w_star + 0.2 * rng.normal(size=4)
            if np.linalg.norm(w) <= task.radius:
                assert task.population_risk(w) >= f_star - 1e-9
        assert task.excess_risk(task.w_star) == pytest.approx(0.0, abs=1e-12)


def test_high_leverage_clipping_bias_reproduces_the_design():
    """The high-leverage instance (cvxdp.datasets.synthetic): the clipped minimizer's excess is
    2.9e-2 at C ≤ 2, 6.2e-3 at C = 16, ~1e-4 at C = 32."""
    task = high_leverage_tail(n=10, d=10, seed=0)
    bias = {C: task.excess_risk(task.meta["clipped_minimizer"](C)) for C in (2.0, 16.0, 32.0, 128.0)}
    assert bias[2.0] == pytest.approx(2.9e-2, rel=0.1)
    assert bias[16.0] == pytest.approx(6.2e-3, rel=0.1)
    assert 5e-5 < bias[32.0] < 3e-4
    assert bias[128.0] < 1e-6


def test_high_leverage_moments_are_exact():
    task = high_leverage_tail(n=10, n_test=4_000_000, d=10, seed=4)
    A = np.linalg.norm(task.X_test, axis=1)
    assert np.mean(A**2) ** 0.5 == pytest.approx(task.G(2.0), rel=0.02)


def test_linear_lower_bound_instance():
    task = linear_lower_bound(n=10, d=6, p=0.02, magnitude=5.0, n_test=10, seed=1)
    v = task.meta["v"]
    assert task.excess_risk(task.w_star) == 0.0
    assert task.excess_risk(np.zeros(6)) == pytest.approx(0.02 * 5.0 * 1.0)
    assert task.G(4.0) == pytest.approx(5.0 * 0.02**0.25)
    assert np.isclose(np.linalg.norm(v), 1.0)


def test_crossed_linear_lower_bound_instance():
    """The crossed variant: a rare atom a·v (rate p) and light gradients b·u ⊥ v (rate q, q b = share·p a).
    Its mean, moments and minimizer are the law's (checked on a large sample), and the default is the
    plain instance, bit for bit."""
    p, a, q, share = 0.01, 10.0, 0.3, 3.0
    task = linear_lower_bound(n=400_000, d=5, p=p, magnitude=a, n_test=1, seed=2, cross_rate=q,
                              cross_share=share)
    v, u, b = task.meta["v"], task.meta["u"], task.meta["b"]
    assert b == pytest.approx(share * p * a / q) and abs(u @ v) < 1e-15 and np.isclose(np.linalg.norm(u), 1.0)
    Z = -task.X_train
    mean = p * a * v + q * b * u
    assert np.linalg.norm(Z.mean(axis=0) - mean) < 5 * np.sqrt((p * a**2 + q * b**2) / 400_000)
    norms = np.linalg.norm(Z, axis=1)
    for k in (2.0, 4.0):
        assert task.G(k) == pytest.approx((p * a**k + q * b**k) ** (1 / k), rel=1e-12)
        assert np.mean(norms**k) ** (1 / k) == pytest.approx(task.G(k), rel=0.03)
    assert task.excess_risk(task.w_star) == pytest.approx(0.0, abs=1e-15)
    assert task.excess_risk(np.zeros(5)) == pytest.approx(np.linalg.norm(mean))
    assert task.excess_risk(v) > 0.1 * np.linalg.norm(mean)  # the rare atom's direction alone is off
    plain = linear_lower_bound(n=50, d=5, p=p, magnitude=a, seed=3)
    same = linear_lower_bound(n=50, d=5, p=p, magnitude=a, seed=3, cross_rate=0.0)
    assert np.array_equal(plain.X_train, same.X_train) and plain.moments == same.moments
    with pytest.raises(ValueError, match="p \\+ cross_rate"):
        linear_lower_bound(n=50, d=5, p=0.8, cross_rate=0.3, cross_share=1.0)


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_loaders(name):
    task = REAL[name]()
    assert task.X_train.shape[1] == task.X_test.shape[1]
    assert np.all(np.isfinite(task.X_train)) and np.all(np.isfinite(task.y_train))
    assert np.allclose(task.X_train[:, -1], 1.0)  # the intercept column
    assert task.moments == {}  # no moment bound is read off real data
    again = REAL[name]()
    assert np.array_equal(again.X_train, task.X_train)  # the split is a fixed public permutation


@pytest.mark.parametrize("loader", ["diamonds", "cpssw8", "fertility"])
def test_large_real_loaders_subsample_by_a_public_rule(loader):
    full = REAL[loader]()
    sub = REAL[loader](n=1000)
    assert sub.X_train.shape == (1000, full.X_train.shape[1])
    assert np.array_equal(sub.X_test, full.X_test)   # the same held-out split
    # the subsample's rows are training rows, chosen by the seed alone
    rows = {r.tobytes() for r in full.X_train}
    assert all(r.tobytes() in rows for r in sub.X_train[:50])
    assert np.array_equal(REAL[loader](n=1000).X_train, sub.X_train)
    assert full.X_train.shape[0] + full.X_test.shape[0] in (53_940, 61_395, 254_654)
    assert np.abs(full.X_train).max() <= 10.0 and np.abs(full.y_train).max() <= 10.0


def test_cpssw8_centred_is_the_same_model_moved_to_a_public_reference_worker():
    """``centred=True`` subtracts the public reference (age 40, 12 years) in decades and nothing else:
    the same rows in the same split, so a linear model on one design is a linear model on the other
    with the intercept moved by ``<reference, coefficients>``."""
    from cvxdp.datasets.real import CPSSW8_REFERENCE

    plain = REAL["cpssw8"](seed=1, quantile=0.9, n=2000)
    centred = REAL["cpssw8"](seed=1, quantile=0.9, n=2000, centred=True)
    shift = np.zeros(plain.X_train.shape[1])
    shift[:2] = np.asarray(CPSSW8_REFERENCE) / 10.0
    assert np.allclose(centred.X_train, plain.X_train - shift)
    assert np.allclose(centred.X_test, plain.X_test - shift)
    assert np.array_equal(centred.y_train, plain.y_train) and centred.meta == plain.meta
    w = np.random.default_rng(0).normal(size=plain.X_train.shape[1])
    moved = w.copy()
    moved[-1] += shift @ w  # the centred model with the same predictions
    assert np.allclose(centred.X_test @ moved, plain.X_test @ w)
    assert "centred" in centred.name and "centred" not in plain.name
