"""cvxdp.conic.exact_dual: multipliers exactly dual feasible on unbounded columns, tested as math."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvxdp.conic.cones import Cone, cone_offsets
from cvxdp.conic.exact_dual import exact_aux_repair, exact_member, exp_dual_member, float_with_error


def _exact_residual(z, A, c) -> list[Fraction]:
    return [Fraction(float(c[j])) + sum((Fraction(float(A[i, j])) * z[i] for i in range(A.shape[0])),
                                        Fraction(0)) for j in range(A.shape[1])]


def _exp_dual_exact(u: Fraction, v: Fraction, w: Fraction) -> bool:
    """The dual exponential cone's inequality in 60-digit decimals (a reference, far from ties)."""
    if u == 0:
        return v >= 0 and w >= 0
    if u > 0:
        return False
    with localcontext() as ctx:
        ctx.prec = 60
        U, V, W = (Decimal(x.numerator) / Decimal(x.denominator) for x in (u, v, w))
        return -U * (V / U).exp() <= Decimal(1).exp() * W


def test_review_case_needs_a_second_order_coordinate_to_move():
    """Found by review: huber(r) + |r| with the inactive side of |r| at a multiplier of exactly 0.
    Scaling the huber block couples two auxiliary columns, and the unique solution by scaling needed
    that zero multiplier at −3.6e-16; moving the interior block's coordinates one by one solves it."""
    cones = (Cone("zero", 1), Cone("nonneg", 4), Cone("soc", 3), Cone("soc", 3))
    A = np.zeros((11, 5))
    A[0, [3, 4]] = -1
    A[1, 1], A[1, 4] = -1, 1
    A[2, 1], A[2, 4] = -1, -1
    A[3, 2] = A[4, 2] = -1
    A[5, 0] = A[6, 0] = -1
    A[7, 3] = -2
    c = np.array([1.0, 2.0, 1.0, 0.0, 0.0])
    z = np.array([-2.0000000000004148, 0.0, 2.0000000000002074, 2.1245204611210921e-12,
                  0.99999999999787559, 1.0000000000087321, -8.732304912223766e-12, 1.0000000000002074,
                  22.866550684148596, -22.316158433229724, -4.9868038835257904])
    zq = exact_aux_repair(z, A, c, cones)
    assert zq is not None
    assert all(r == 0 for r in _exact_residual(zq, A, c))
    assert exact_member(zq, cones)
    assert max(abs(float(a) - b) for a, b in zip(zq, z, strict=True)) < 1e-9


def _random_cones(rng, draw_kinds):
    cones = []
    for kind in draw_kinds:
        cones.append(Cone(kind, {"zero": 1, "nonneg": int(rng.integers(1, 4)), "soc": int(rng.integers(2, 5)),
                                 "exp": 3}[kind]))
    return tuple(cones)


def _interior_point(rng, cones) -> np.ndarray:
    parts = []
    for cone in cones:
        if cone.kind == "zero":
            parts.append(rng.normal(size=cone.dim))
        elif cone.kind == "nonneg":
            parts.append(rng.uniform(0.1, 2.0, size=cone.dim))
        elif cone.kind == "soc":
            tail = rng.normal(size=cone.dim - 1)
            parts.append(np.concatenate([[np.linalg.norm(tail) * rng.uniform(1.01, 2.0)], tail]))
        else:
            u = -rng.uniform(0.1, 2.0)
            v = rng.normal()
            parts.append(np.array([u, v, -u * np.exp(v / u) / np.e * rng.uniform(1.01, 2.0)]))
    return np.concatenate(parts)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1),
       kinds=st.lists(st.sampled_from(["zero", "nonneg", "soc", "exp"]), min_size=1, max_size=4),
       n_aux=st.integers(1, 4), scale=st.sampled_from([1e-3, 1.0, 1e4]))
def test_repair_is_exact_and_stays_in_the_cone(seed, kinds, n_aux, scale):
    """For multipliers inside K* whose residual on the auxiliary columns is at rounding level, the
    repair returns z' with A_auxᵀz' + c_aux = 0 *exactly*, z' ∈ K* decided exactly, and z' close to z."""
    rng = np.random.default_rng(seed)
    cones = _random_cones(rng, kinds)
    k = int(cone_offsets(cones)[-1])
    z = _interior_point(rng, cones) * scale
    A = rng.normal(size=(k, n_aux)) * (rng.random((k, n_aux)) < 0.7)
    c = -(A.T @ z) * (1.0 + 1e-13 * rng.normal(size=n_aux))  # the float repair's rounding-level residual
    zq = exact_aux_repair(z, A, c, cones)
    if zq is None:  # only where A has no room to absorb the residual (rank or range), never silently
        assert np.linalg.matrix_rank(A) < n_aux or k < n_aux
        return
    assert all(r == 0 for r in _exact_residual(zq, A, c))
    assert exact_member(zq, cones)
    assert max(abs(float(a) - b) for a, b in zip(zq, z, strict=True)) <= 1e-9 * scale * (1 + np.abs(z).max())


def test_repair_refuses_when_no_exact_correction_exists():
    """A column no multiplier touches with a nonzero cost: no z makes its residual 0 (fail closed)."""
    cones = (Cone("nonneg", 2),)
    A = np.array([[1.0, 0.0], [1.0, 0.0]])
    assert exact_aux_repair(np.array([0.5, 0.5]), A, np.array([-1.0, 1e-3]), cones) is None
    # and where the correction would need a nonnegative multiplier below 0
    assert exact_aux_repair(np.array([1e-20, 0.0]), np.array([[1.0], [1.0]]), np.array([1.0]), cones) is None


def test_exact_member_decides_the_boundary():
    soc = (Cone("soc", 3),)
    assert exact_member([Fraction(5), Fraction(3), Fraction(4)], soc)  # on the boundary: 5² = 3² + 4²
    assert not exact_member([Fraction(5), Fraction(3), Fraction(4) + Fraction(1, 2**80)], soc)
    assert not exact_member([Fraction(-1, 2**60)], (Cone("nonneg", 1),))


@settings(max_examples=300, deadline=None)
@given(u=st.floats(-1e3, -1e-3), v=st.floats(-50, 50), rel=st.floats(-1e-6, 1e-6))
def test_exp_dual_membership_is_sound_near_the_boundary(u, v, rel):
    """The float test never accepts a point outside the cone (checked in 60 digits), and accepts
    points a relative 1e-12 inside it (power)."""
    uq, vq = Fraction(u), Fraction(v)
    with localcontext() as ctx:
        ctx.prec = 60
        edge = -Decimal(u) * (Decimal(v) / Decimal(u)).exp() / Decimal(1).exp()
    if not 0 < float(edge) < math.inf:  # e^{v/u} beyond the float range: refused (v/u > 700) below
        assert not exp_dual_member(uq, vq, Fraction(1))
        return
    w = Fraction(float(edge)) * (1 + Fraction(rel))
    if exp_dual_member(uq, vq, w):
        assert _exp_dual_exact(uq, vq, w)
    if rel > 1e-12:
        assert exp_dual_member(uq, vq, w)


def test_exp_dual_membership_refuses_underflow():
    """Found by review: with v/u below −708, exp underflows and the float test accepted a point
    far outside the cone; such points are refused."""
    u, v, w = Fraction(-10**10), Fraction(75 * 10**11), Fraction(1e-320)
    assert not _exp_dual_exact(u, v, w)
    assert not exp_dual_member(u, v, w)


@pytest.mark.parametrize("values", [[Fraction(1, 3), Fraction(-2, 7)], [Fraction(10**20, 3)], [Fraction(0)]])
def test_float_with_error_bounds_the_rounding(values):
    f, err = float_with_error(values)
    assert Fraction(err) >= sum((abs(q - Fraction(float(x))) for q, x in zip(values, f, strict=True)),
                                Fraction(0))
