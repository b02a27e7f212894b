"""The public per-record scaling of steep records on regions without an exact path.

Tested: the map (slopes above S scaled to S, ordinary records untouched, balls untouched for
generalized linear records); per record (one record changed, every other row bit for bit); the
claim that a steep record's extension keeps its shape (differences of f_{C,U} between query points
move by about C² diam U / S); and the refusals it removes (features of 1e12 on a box).
"""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from cvxdp import Model, PrivateProblem, losses
from cvxdp.extension import LipschitzExtension
from cvxdp.extension.record_scaling import scale_steep_records, slope_limit
from cvxdp.geometry import Ball, Box, Simplex, localize


def _lad(d: int = 2, box: bool = True) -> Model:
    w = cp.Variable(d)
    return Model(losses.absolute(w), [w <= 1, w >= -1] if box else [cp.norm(w, 2) <= 1])


def _data(n: int = 30, d: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(3.0, (n, d))
    y = X @ np.linspace(0.5, -0.5, d) + rng.standard_normal(n)
    X[:5] *= 10.0 ** rng.uniform(5, 60, (5, 1))
    return X, y


@pytest.mark.parametrize("region", [Box(-np.ones(2), np.ones(2)), Simplex(2),
                                    localize(Box(-np.ones(2), np.ones(2)), np.zeros(2), 0.8)],
                         ids=["box", "simplex", "box-localized"])
def test_steep_records_are_scaled_to_the_limit(region) -> None:
    X, y = _data()
    model = _lad()
    ex = model.bind({"x": X, "y": y})
    C = 1.5
    sc = scale_steep_records(ex, region, C)
    A, b = ex.pieces()
    A2, b2 = sc.examples.pieces()
    S = slope_limit(C)
    slope2 = np.linalg.norm(A2, axis=2).max(axis=1)
    assert sc.mask[:5].all() and not sc.mask[5:].any()
    assert np.all(slope2[:5] <= S * (1 + 1e-12)) and np.all(slope2[:5] >= S * (1 - 1e-12))
    assert np.array_equal(A2[5:], A[5:]) and np.array_equal(b2[5:], b[5:])  # ordinary rows untouched
    t = sc.factors[:5]
    assert np.allclose(A2[:5], t[:, None, None] * A[:5], rtol=1e-15, atol=0)
    assert np.allclose(b2[:5], t[:, None] * b[:5], rtol=1e-15, atol=0)


def test_balls_keep_generalized_linear_records() -> None:
    """On a ball the exact path certifies every generalized-linear record as it is."""
    X, y = _data()
    model = _lad(box=False)
    ex = model.bind({"x": X, "y": y})
    sc = scale_steep_records(ex, Ball(np.zeros(2), 1.0), 1.0)
    assert not sc.mask.any() and sc.examples is ex


def test_per_record() -> None:
    X, y = _data()
    model = _lad()
    region = Box(-np.ones(2), np.ones(2))
    X2 = X.copy()
    X2[9] = [1e40, -3e39]
    s1 = scale_steep_records(model.bind({"x": X, "y": y}), region, 1.0)
    s2 = scale_steep_records(model.bind({"x": X2, "y": y}), region, 1.0)
    others = np.arange(X.shape[0]) != 9
    assert not s1.mask[9] and s2.mask[9]
    assert np.array_equal(s1.factors[others], s2.factors[others])
    for p1, p2 in zip(s1.examples.pieces(), s2.examples.pieces(), strict=True):
        assert np.array_equal(p1[others], p2[others])


def test_a_steep_records_extension_keeps_its_shape() -> None:
    """A record of slope 10⁶ C and its scaled copy (slope S = 2⁸ C): the differences of their
    extensions between query points agree to about C² diam U / S (both certified in float)."""
    rng = np.random.default_rng(2)
    model = _lad()
    region = Box(-np.ones(2), np.ones(2))
    C = 1.0
    X = rng.standard_normal((6, 2))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X *= 1e6
    y = rng.uniform(-5e5, 5e5, 6)
    ex = model.bind({"x": X, "y": y})
    sc = scale_steep_records(ex, region, C)
    assert sc.mask.all()
    ext = LipschitzExtension(model, C, region)
    W = rng.uniform(-1, 1, (8, 2))
    v1 = np.stack([ext.evaluate(w, ex).upper for w in W])
    v2 = np.stack([ext.evaluate(w, sc.examples).upper for w in W])
    d1, d2 = v1 - v1[0], v2 - v2[0]
    bound = 8.0 * C * C * region.diameter / slope_limit(C)
    assert np.max(np.abs(d1 - d2)) <= bound
    assert np.max(np.abs(d1)) > 10 * bound  # the differences themselves are not small (power)


@pytest.mark.parametrize("algorithm", ["output-perturbation", "recursive", "population"])
def test_huge_features_on_a_box_release(algorithm: str) -> None:
    """One row of 1e12 (and 1e100) features on a box refused on that side; it now releases."""
    rng = np.random.default_rng(0)
    X = rng.standard_t(5.0, (40, 2))
    y = X @ np.array([0.5, -0.5]) + 0.3 * rng.standard_normal(40)
    for big in (1e12, 1e100):
        X2 = X.copy()
        X2[-1] = [big, -big]
        res = PrivateProblem(_lad()).solve({"x": X2, "y": y}, epsilon=1.0, moment_k=4.0, G_k=2.0,
                                           algorithm=algorithm, random_state=3)
        assert np.all(np.isfinite(res.w))


# -- a squared loss, carried with its shifted link ---------------------------------------------------

def _square_rows(region, labels: np.ndarray, X: np.ndarray, C: float = 1.5):
    from cvxdp.extension.affine_reduction import affine_reduction

    w = cp.Variable(X.shape[1])
    model = Model(losses.squared(w), [w <= 1, w >= -1])
    ex = model.bind({"x": X, "y": labels})
    red = affine_reduction(ex, region, C)
    return red, scale_steep_records(red.apply(ex), region, C)


def test_shifted_square_rows_are_scaled_to_the_limit() -> None:
    """After the level is dropped, a row's slope on U is ``2c|u + T| ||a||``: rows above S come down to at
    most S; a shift above the public limit is brought to ±T_max (numbers the certificate can carry),
    keeping the slope at the argument's near side where it is below S; ordinary rows are untouched."""
    from cvxdp.extension.affine_reduction import argument_range
    from cvxdp.extension.record_scaling import shift_limit

    region = Box(-np.ones(2), np.ones(2))
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, 2))
    X[10] = [1e-12, 2e-12]  # a tiny feature with a huge label: not steep, but its shift is above T_max
    y = np.concatenate([[1e4, -1e10, 1e100, 3e5], rng.standard_normal(6) * 0.1, [2e11, 0.05]])
    C = 1.5
    _, sc = _square_rows(region, y, X, C)
    S = slope_limit(C)
    glm = sc.examples.glm()
    lo, hi = argument_range(region, glm.a, glm.b)
    slope = np.linalg.norm(glm.a, axis=1) * glm.link.lipschitz_on(lo, hi)
    assert np.all(slope <= S * (1 + 1e-9))
    T_max = shift_limit(1.0)
    assert np.all(np.abs(glm.link.shift) <= T_max)
    assert sc.mask[[1, 2, 3]].all() and not sc.mask[4:10].any() and sc.mask[10]
    # the tiny-feature row: its slope at u = 0 is the original's 2c|T| ||a|| (below S)
    kept = abs(glm.link.shift[10]) * np.linalg.norm(glm.a[10])
    assert abs(glm.link.shift[10]) == T_max and np.isclose(kept, 2e11 * np.linalg.norm(X[10]), rtol=1e-9)


def test_a_remapped_shift_changes_a_gentle_row_by_almost_nothing() -> None:
    """A row with a shift above T_max but a gentle slope keeps its slope at the near side; only its
    curvature grows, by at most about ``S² diam(U)² / (4c T_max²)`` on U."""
    from cvxdp.extension.affine_reduction import affine_reduction

    region = Box(-np.ones(2), np.ones(2))
    w = cp.Variable(2)
    model = Model(losses.squared(w), [w <= 1, w >= -1])
    X = np.array([[3e-11, -1e-11]])
    ex = model.bind({"x": X, "y": np.array([4e10])})
    red = affine_reduction(ex, region, 1.5)
    before = red.apply(ex).glm()
    after = scale_steep_records(red.apply(ex), region, 1.5).examples.glm()
    pts = np.random.default_rng(0).uniform(-1, 1, (200, 2))
    f0 = before.link.value(pts @ before.a[0] + before.b[0])
    f1 = after.link.value(pts @ after.a[0] + after.b[0])
    bound = slope_limit(1.5) ** 2 * 8.0 / (4.0 * 2.0**60)
    assert np.max(np.abs(f1 - f0)) <= bound + 1e-12 * np.max(np.abs(f0))


def test_shifted_square_scaling_is_per_record() -> None:
    region = Box(-np.ones(2), np.ones(2))
    rng = np.random.default_rng(4)
    X = rng.standard_normal((30, 2))
    y = X @ np.array([0.5, -0.5]) + rng.standard_normal(30)
    y[:6] *= 10.0 ** rng.uniform(3, 50, 6)
    for record in (1e10, -1e100, 1e5, 0.1):
        y2 = y.copy()
        y2[9] = record
        (_, s1), (_, s2) = _square_rows(region, y, X), _square_rows(region, y2, X)
        others = np.arange(30) != 9
        g1, g2 = s1.examples.glm(), s2.examples.glm()
        assert np.array_equal(s1.factors[others], s2.factors[others])
        assert np.array_equal(s1.mask[others], s2.mask[others])
        assert np.array_equal(g1.a[others], g2.a[others]) and np.array_equal(g1.b[others], g2.b[others])
        assert np.array_equal(g1.link.shift[others], g2.link.shift[others])
