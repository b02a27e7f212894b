"""``cvxdp.evaluation``: batched evaluation, and the coefficients of an affine expression (forward mode)."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from cvxdp.evaluation import UnsupportedAtom, affine_jacobian, evaluate

D, M = 5, 40


@pytest.fixture
def leaves():
    rng = np.random.default_rng(11)
    x, y, mat = cp.Parameter(D, name="x"), cp.Parameter(name="y"), cp.Parameter((3, D), name="M")
    # small integers: every product and sum below is exact, so the coefficients must be exactly right
    data = {x: rng.integers(-9, 10, size=(M, D)).astype(float), y: rng.integers(-9, 10, size=M).astype(float),
            mat: rng.integers(-9, 10, size=(M, 3, D)).astype(float)}
    return x, y, mat, data


def _affine(w, x, y, mat):
    return {
        "hinge": 1 - cp.multiply(y, x @ w),
        "residual": y - x @ w,
        "scaled": 0.5 * (y - x @ w),
        "divided": (x @ w) / 2.0 + w[1] - 3 * w[0],
        "matrix": cp.sum(mat @ w) + y,
        "indexed": (mat @ w)[1] * 2 - cp.sum(w),
        "w_first": w @ x,
        "negated": -(x @ w),
        "elementwise": cp.sum(cp.multiply(x, w)),
        "constant": y + 3.0,
    }


@pytest.mark.parametrize("name", ["hinge", "residual", "scaled", "divided", "matrix", "indexed", "w_first",
                                  "negated", "elementwise", "constant"])
def test_the_coefficients_are_the_differences_of_the_expression(leaves, name):
    """``expr(e_k) − expr(0)`` for every unit vector, exactly (integer data: no rounding anywhere)."""
    x, y, mat, data = leaves
    w = cp.Variable(D)
    expr = _affine(w, x, y, mat)[name]
    J = np.broadcast_to(affine_jacobian(expr, w, data).reshape(-1, D), (M, D))

    def at(point):
        return np.broadcast_to(evaluate(expr, {**data, w: point[None]}).reshape(-1), (M,))

    base = at(np.zeros(D))
    want = np.stack([at(np.eye(D)[k]) - base for k in range(D)], axis=1)
    np.testing.assert_array_equal(J, want)


def test_a_coefficient_beside_a_huge_constant_is_kept():
    """``y − <x, w>`` with ``y = 10¹⁷`` and ``x = 1``: a difference quotient at ``t = 1`` rounds the
    coefficient to 0; the forward rule reads it off the product."""
    w = cp.Variable(2)
    x, y = cp.Parameter(2, name="x"), cp.Parameter(name="y")
    J = affine_jacobian(y - x @ w, w, {x: np.array([[1.0, 3e-300]]), y: np.array([1e17])})
    np.testing.assert_array_equal(J.reshape(-1), [-1.0, -3e-300])


def test_one_rows_data_moves_no_other_rows_coefficients(leaves):
    """Every operation is within a row: changing one example changes no other example's bits."""
    x, y, mat, data = leaves
    w = cp.Variable(D)
    for expr in _affine(w, x, y, mat).values():
        before = np.broadcast_to(affine_jacobian(expr, w, data), (M,) + tuple(expr.shape) + (D,)).copy()
        changed = {k: v.copy() for k, v in data.items()}
        changed[x][7] = 1e300
        changed[y][7] = -1e-300
        changed[mat][7] = 1e150
        after = np.broadcast_to(affine_jacobian(expr, w, changed), before.shape)
        others = np.arange(M) != 7
        assert after[others].tobytes() == before[others].tobytes()


@pytest.mark.parametrize("make", [
    lambda w, x: cp.abs(x @ w),  # not affine
    lambda w, x: cp.reshape(w, (D, 1), order="F")[0, 0] + x[0],  # no rule for reshape
    lambda w, x: cp.multiply(w, w)[0],  # a product of two factors in w
])
def test_atoms_without_a_rule_raise_unsupported(leaves, make):
    x, _, _, data = leaves
    w = cp.Variable(D)
    with pytest.raises(UnsupportedAtom):
        affine_jacobian(make(w, x), w, data)


def test_a_matrix_variable_is_not_read():
    W = cp.Variable((2, 2))
    with pytest.raises(UnsupportedAtom):
        affine_jacobian(cp.sum(W), W, {})
