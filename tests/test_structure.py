"""``cvxdp.structure``: the per-example affine data recovered from the loss expression."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.structure import affine_coefficients


def _bound(loss_of, X, y):
    w = cp.Variable(X.shape[1])
    model = cvxdp.Model(loss_of(w), [cp.norm(w, 2) <= 2.0])
    return model, model.bind({"x": X, "y": y})


@pytest.mark.parametrize("scale", [1.0, 1e90, 1e-40])
def test_a_negated_piece_and_a_piece_without_w_cost_no_evaluations_and_keep_their_values(scale):
    """``|r| = max(r, −r)``: the second piece is the first with its signs flipped, the same values as the
    full evaluation finds (``(−1)·r`` is evaluated in full); hinge's constant piece is ``b − b``.  Rows of
    every size, including ones whose coefficients need the refining steps (a huge label beside small
    features) and zero coefficients."""
    rng = np.random.default_rng(3)
    X = scale * rng.standard_t(3.0, size=(300, 4))
    y = X @ rng.normal(size=4) + rng.standard_t(3.0, size=300)
    y[:5] = 1e17 * np.array([1, -1, 1, -1, 1])  # a label dwarfing its features: the refining steps run
    X[5:40, 2] = 0.0  # zero coefficients: the same values (a zero's sign may differ; nothing reads it)
    model, ex = _bound(cvxdp.losses.absolute, X, y)
    r = model.loss.structure.pieces[0]
    fast = affine_coefficients(model.loss.structure.pieces, model.loss.variable, ex.arrays, ex.m)
    assert type(model.loss.structure.pieces[1]).__name__ == "NegExpression"
    full = affine_coefficients((r, -1.0 * r), model.loss.variable, ex.arrays, ex.m)
    for got, want in zip(fast, full, strict=True):
        np.testing.assert_array_equal(got, want)
    assert np.any(fast[0][:, 1] != 0)
    hinge_model, hinge_ex = _bound(cvxdp.losses.hinge, X, np.where(y > 0, 1.0, -1.0))
    pieces = hinge_model.loss.structure.pieces
    A, b = affine_coefficients(pieces, hinge_model.loss.variable, hinge_ex.arrays, hinge_ex.m)
    constant = [j for j, p in enumerate(pieces) if not p.variables()]
    assert constant
    for j in constant:
        np.testing.assert_array_equal(A[:, j], 0.0)
        np.testing.assert_array_equal(b[:, j], float(pieces[j].value))


def test_fortran_ordered_data_has_the_bits_of_c_ordered_data():
    """Binding makes the data C-contiguous: a row's bits are the same whatever the input's memory layout
    (einsum rounded by layout, and a row subset is a C-ordered copy, so a Fortran-ordered input gave a row
    other bits in a subset than in its batch — found by review, with a data-only piece at d ≥ 4)."""
    rng = np.random.default_rng(5)
    X = rng.standard_t(3.0, size=(500, 8))
    y = X @ rng.normal(size=8) + rng.standard_t(3.0, size=500)
    c = rng.normal(size=8)

    def loss(w):
        x = cp.Parameter((8,), name="x")
        t = cp.Parameter(name="y")
        return cvxdp.Loss(cp.maximum(t - x @ w, x @ c), w, data={"x": x, "y": t})

    outs = []
    for data in ({"x": X, "y": y}, {"x": np.asfortranarray(X), "y": y}):
        w = cp.Variable(8)
        model = cvxdp.Model(loss(w), [cp.norm(w, 2) <= 2.0])
        ex = model.bind(data)
        assert all(v.flags.c_contiguous for v in ex.arrays.values())
        outs.append(affine_coefficients(model.loss.structure.pieces, model.loss.variable, ex.arrays, ex.m))
    for got, want in zip(*outs, strict=True):
        assert got.tobytes() == want.tobytes()
