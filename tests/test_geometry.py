"""Geometry: recognition, projections (optimality conditions), support functions, Lemma 2.7."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cvxdp.error import DomainError, EmptyDomainError, UnboundedDomainError
from cvxdp.geometry import (
    Ball,
    Box,
    ConvexSet,
    Ellipsoid,
    Intersection,
    Lens,
    LocalizedDomain,
    Polytope,
    Simplex,
    domain_from_constraints,
    inexact_projection,
    intersect_balls,
    localize,
)

D = 4


def _w() -> cp.Variable:
    return cp.Variable(D)


CASES = {
    "ball": lambda w: [cp.norm(w - 0.5, 2) <= 1.5],
    "box": lambda w: [w >= -1, w <= np.arange(1, D + 1)],
    "inf-norm": lambda w: [cp.norm(w, "inf") <= 2],
    "ellipsoid": lambda w: [cp.quad_form(w, np.diag([1.0, 2.0, 3.0, 4.0])) <= 1],
    "simplex": lambda w: [w >= 0, cp.sum(w) == 2],
    "full-simplex": lambda w: [w >= 0, cp.sum(w) <= 2],
    "polytope": lambda w: [np.ones((1, D)) @ w <= 1, w >= -0.5, w <= 0.8],
    "lens": lambda w: [cp.norm(w) <= 1, cp.norm(w - 0.8) <= 1],
    "ball-and-halfspace": lambda w: [cp.norm(w) <= 1, w[0] >= 0.2],
    "generic": lambda w: [cp.norm(w, 1) <= 2],
}
KINDS = {
    "ball": Ball, "box": Box, "inf-norm": Box, "ellipsoid": Ellipsoid, "simplex": Simplex,
    "full-simplex": Simplex, "polytope": Polytope, "lens": Lens,
    "ball-and-halfspace": Intersection, "generic": ConvexSet,
}


def _reference_projection(cons_fn, y: np.ndarray) -> np.ndarray:
    x = cp.Variable(y.shape[0])
    prob = cp.Problem(cp.Minimize(cp.norm(x - y, 2)), cons_fn(x))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return x.value


def _reference_support(cons_fn, v: np.ndarray) -> float:
    x = cp.Variable(D)
    prob = cp.Problem(cp.Maximize(v @ x), cons_fn(x))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return float(prob.value)


@pytest.mark.parametrize("name", sorted(CASES))
def test_recognized_kind(name):
    w = _w()
    assert isinstance(domain_from_constraints(CASES[name](w), w), KINDS[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_projection_matches_reference_and_is_feasible(name, rng):
    w = _w()
    dom = domain_from_constraints(CASES[name](w), w)
    Y = rng.normal(size=(6, D)) * 2.5
    P = dom.project(Y)
    F = dom.make_feasible(Y)
    assert np.all(dom.contains(F, tol=dom.feasibility_tolerance()))
    for y, p in zip(Y, P, strict=True):
        ref = _reference_projection(dom.constraints, y)
        # the CVXPY reference itself is only accurate to ~1e-6 on curved sets; exactness of
        # the closed forms is checked by test_projection_optimality_condition
        tol = 2e-5 if dom.support_is_exact else 1e-4
        assert np.linalg.norm(p - ref) <= tol


@pytest.mark.parametrize("name", ["ball", "box", "ellipsoid", "simplex", "full-simplex", "lens"])
def test_projection_optimality_condition(name, rng):
    """p = Π_K(y) iff p ∈ K and <y − p, p> = σ_K(y − p) (p maximizes <y − p, ·> over K)."""
    w = _w()
    dom = domain_from_constraints(CASES[name](w), w)
    Y = rng.normal(size=(50, D)) * 3
    P = dom.project(Y)
    assert np.all(dom.contains(P, tol=1e-12))
    lhs = np.einsum("nd,nd->n", Y - P, P)
    rhs = dom.support(Y - P)
    assert np.all(np.abs(lhs - rhs) <= 1e-9 * (1 + np.abs(rhs)))


@pytest.mark.parametrize("name", ["ball", "ellipsoid", "simplex", "full-simplex", "lens"])
def test_projection_of_points_whose_offsets_overflow(name, rng):
    """A point of 10³⁰⁰ (its squared norm overflows) projects onto the boundary point that maximizes
    its direction, ``<u, p> = σ_K(u)`` for ``u = y/|y|_max`` (the rest of ``y − p`` is below rounding),
    not onto NaN, the centre or a point outside; rows beside it project as they do alone."""
    import warnings

    w = _w()
    dom = domain_from_constraints(CASES[name](w), w)
    # rows of 10³⁰⁰ and 10¹⁵⁵ overflow the squared norm; rows of 10³⁶ and 10⁵⁰ do not, but Newton's
    # method from μ = 0 would not reach the ellipsoid's multiplier in its 200 steps
    far = np.array([[1e300, 1e300, 0.0, 0.0], [-1e308, 1e308, 1e308, 3.0], [1e200, -2e200, 5e199, 1.0],
                    [1e155, 0.0, -1e155, 0.0], [1e36, 1e36, 0.0, 0.0], [0.0, 3e50, 0.0, -1e50]])
    ordinary = rng.normal(size=(3, D)) * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or invalid-value warning reaches the caller
        P = dom.project(np.vstack([far, ordinary]))
    assert np.all(np.isfinite(P)) and np.all(dom.contains(P, tol=1e-9))
    u = far / np.abs(far).max(axis=1, keepdims=True)
    assert np.all(np.abs(np.einsum("nd,nd->n", u, P[:6]) - dom.support(u)) <= 1e-9)
    assert np.array_equal(P[6:], dom.project(ordinary))
    assert all(np.array_equal(P[6 + i], dom.project(ordinary[i])) for i in range(3))


def test_simplex_projection_at_scales_near_the_float_range():
    """The sorted partial sums reach −2·scale·d; a simplex of scale 10³⁰⁷ is projected in a scale
    divided by a power of two (exact) instead of overflowing to inf."""
    e1 = np.zeros(10)
    e1[0] = 1e308
    assert np.array_equal(Simplex(10, scale=1e307).project(e1), np.eye(10)[0] * 1e307)
    assert np.array_equal(Simplex(4, scale=1e308).project(np.array([1e308, -1e308, 0.0, 0.0])),
                          np.array([1e308, 0.0, 0.0, 0.0]))
    y = np.array([0.2, 0.3, 0.1, -0.4])
    assert np.allclose(Simplex(4, scale=2.0**1000).project(y * 2.0**1000) / 2.0**1000,
                       Simplex(4).project(y), rtol=0, atol=1e-15)


def test_localized_projection_is_per_row_and_refuses_what_it_cannot_project():
    """Lemma 2.7's bisection runs each row for its own number of steps: a row's point is the same
    alone and beside a far row (bit for bit); a point whose distance overflows is measured in a
    scaled offset; one more than 10³⁰⁸ radii out is refused with a DomainError, not NaN or a crash."""
    region = localize(Simplex(3), np.ones(3) / 3, 0.2)
    row = np.array([[2.0, 0.1, -1.0]])
    beside = np.vstack([row, [[1e6, 0.0, 0.0]]])
    assert np.array_equal(region.project(row)[0], region.project(beside)[0])
    assert np.array_equal(region.make_feasible(row)[0], region.make_feasible(beside)[0])
    ellipse = localize(Ellipsoid(np.zeros(3), np.diag([1.0, 2.0, 3.0])), np.zeros(3), 0.5)
    far = ellipse.project(np.array([[1e200, 1e200, 0.0]]))
    assert np.all(np.isfinite(far)) and ellipse.contains(far, tol=1e-9).all()
    with pytest.raises(DomainError, match="cannot be computed in floating point"):
        ellipse.project(np.array([[1e308, -1e308, 1e308]]))
    # far, and beside a centre far from the origin: λ̄·c would overflow inside the bisection
    c = np.full(3, 1e5)
    boxed = localize(Box(c - 1.0, c + 1.0), c, 0.5)
    with pytest.raises(DomainError, match="cannot be computed in floating point"):
        boxed.project((c + np.array([1e307, 3e306, -2e306]))[None])


@pytest.mark.parametrize("scale", [1e6, 1e16, 1e24])
def test_ellipsoid_projection_with_a_large_eigenvalue(scale, rng):
    """Newton's stopping test is relative to the multiplier: with an eigenvalue of 10¹⁶ the root μ*
    is far below 1, and a test against max(1, μ) stopped after one step, outside the set."""
    E = Ellipsoid(np.zeros(2), np.diag([1.0, 3.0]) * scale)
    Y = rng.normal(size=(20, 2)) * np.array([1.0, 1e-3])
    P = E.project(Y)
    form = np.einsum("nd,de,ne->n", P, E.Q, P)
    assert np.all(form <= 1.0 + 1e-12) and np.all(np.abs(form - 1.0) <= 1e-12)
    # the optimality condition <y − p, p> = σ_E(y − p)
    lhs = np.einsum("nd,nd->n", Y - P, P)
    rhs = E.support(Y - P)
    assert np.all(np.abs(lhs - rhs) <= 1e-9 * (np.abs(rhs) + np.linalg.norm(Y - P, axis=1) / np.sqrt(scale)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_support_function(name, rng):
    w = _w()
    dom = domain_from_constraints(CASES[name](w), w)
    V = rng.normal(size=(5, D))
    for v in V:
        ref = _reference_support(CASES[name], v)
        up = float(dom.support_upper(v))
        assert up >= ref - 1e-7
        if dom.support_is_exact:
            assert abs(float(dom.support(v)) - ref) <= 1e-7 * (1 + abs(ref))
    # σ(v) ≥ <v, z> for points z of the set
    Z = dom.make_feasible(rng.normal(size=(200, D)) * 3)
    S = dom.support_upper(V)
    assert np.all(S[:, None] >= V @ Z.T - 1e-9)


def test_exact_diameters():
    assert Ball(np.zeros(3), 2.0).diameter == 4.0
    assert np.isclose(Box(-np.ones(3), np.ones(3)).diameter, 2 * np.sqrt(3))
    assert np.isclose(Ellipsoid(np.zeros(2), np.diag([1.0, 4.0])).diameter, 2.0)
    assert np.isclose(Simplex(3, 2.0).diameter, 2 * np.sqrt(2))


@pytest.mark.parametrize("name", sorted(CASES))
def test_diameter_upper_bounds_pairwise_distances(name, rng):
    w = _w()
    dom = domain_from_constraints(CASES[name](w), w)
    Z = dom.make_feasible(rng.normal(size=(300, D)) * 5)
    dmax = np.max(np.linalg.norm(Z[:, None] - Z[None], axis=-1))
    assert dom.diameter >= dmax - 1e-9


def test_lens_cases():
    big = Ball(np.zeros(3), 2.0)
    assert isinstance(intersect_balls(big, Ball(np.full(3, 0.1), 0.5)), Ball)
    assert isinstance(intersect_balls(big, Ball(np.array([1.5, 0, 0]), 1.0)), Lens)
    with pytest.raises(EmptyDomainError):
        intersect_balls(big, Ball(np.array([5.0, 0, 0]), 1.0))


@pytest.mark.parametrize("xi", [1e-2, 1e-5])
@pytest.mark.parametrize("base", ["box", "ellipsoid", "simplex"])
def test_lemma_2_7_projection_within_xi(base, xi, rng):
    """Π̃^ξ_{W ∩ B(c, r)}(y) lies in W ∩ B(c, r) and within ξ of the exact projection."""
    w = _w()
    W = domain_from_constraints(CASES[base](w), w)
    c = W.make_feasible(rng.normal(size=D) * 0.3)
    r = 0.4
    Y = rng.normal(size=(5, D)) * 3
    P = inexact_projection(W, c, r, Y, xi)
    assert np.all(W.contains(P, tol=W.feasibility_tolerance()))
    assert np.all(np.linalg.norm(P - c, axis=1) <= r * (1 + 1e-12))

    def cons(x):
        return [*CASES[base](x), cp.norm(x - c, 2) <= r]

    for y, p in zip(Y, P, strict=True):
        assert np.linalg.norm(p - _reference_projection(cons, y)) <= xi + 1e-6


def test_localize_representations(rng):
    W = Ball(np.zeros(D), 1.0)
    assert localize(W, np.zeros(D), np.inf) is W
    assert isinstance(localize(W, np.zeros(D), 0.3), Ball)
    assert isinstance(localize(W, np.array([0.9, 0, 0, 0]), 0.5), Lens)
    B = Box(-np.ones(D), np.ones(D))
    U = localize(B, np.full(D, 0.9), 0.5)
    assert isinstance(U, LocalizedDomain)
    assert U.diameter <= 1.0
    with pytest.raises(DomainError):
        localize(W, np.full(D, 3.0), 0.5)


@pytest.mark.parametrize("cons_fn, error", [
    (lambda w: [w >= 0], UnboundedDomainError),
    (lambda w: [], UnboundedDomainError),
    (lambda w: [w >= 1, w <= 0], EmptyDomainError),
    (lambda w: [cp.norm(w) <= -1], EmptyDomainError),
    (lambda w: [cp.sum(w) >= 5, cp.norm(w) <= 1], EmptyDomainError),
    (lambda w: [cp.norm(w) >= 1, cp.norm(w) <= 2], DomainError),
    (lambda w: [cp.norm(w) <= cp.Parameter(nonneg=True, value=1.0)], DomainError),
    (lambda w: [cp.norm(w - cp.Variable(D)) <= 1], DomainError),
])
def test_bad_domains(cons_fn, error):
    w = _w()
    with pytest.raises(error) as info:
        domain_from_constraints(cons_fn(w), w)
    assert len(str(info.value)) > 20  # the message explains the problem


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 6), r1=st.floats(0.2, 3.0), r2=st.floats(0.2, 3.0),
       gap=st.floats(0.0, 1.0), seed=st.integers(0, 10_000))
def test_lens_projection_property(d, r1, r2, gap, seed):
    """Random lenses: the closed-form projection meets the variational inequality."""
    rng = np.random.default_rng(seed)
    c2 = rng.normal(size=d)
    c2 *= gap * (r1 + r2) / max(np.linalg.norm(c2), 1e-12)
    try:
        U = intersect_balls(Ball(np.zeros(d), r1), Ball(c2, r2))
    except EmptyDomainError:
        return
    Y = rng.normal(size=(20, d)) * 3
    P = U.project(Y)
    assert np.all(U.contains(P, tol=1e-9))
    Z = U.make_feasible(rng.normal(size=(100, d)) * 3)
    # <y − p, z − p> ≤ 0 for every z in U
    assert np.all(np.einsum("nd,nkd->nk", Y - P, Z[None] - P[:, None]) <= 1e-8)


def _solve_exact(Q: np.ndarray, v: np.ndarray) -> list:
    from fractions import Fraction

    n = len(v)
    M = [[Fraction(float(Q[i, j])) for j in range(n)] + [Fraction(float(v[i]))] for i in range(n)]
    for c in range(n):
        p = next(r for r in range(c, n) if M[r][c] != 0)
        M[c], M[p] = M[p], M[c]
        for r in range(n):
            if r != c and M[r][c] != 0:
                f = M[r][c] / M[c][c]
                M[r] = [a - f * b for a, b in zip(M[r], M[c], strict=True)]
    return [M[i][n] / M[i][i] for i in range(n)]


@pytest.mark.parametrize("cond", [1e2, 1e8, 1e11])
def test_ellipsoid_support_upper_bounds_the_exact_support(cond):
    """``σ(v) = <c, v> + sqrt(vᵀQ⁻¹v)`` in rationals (Q's float entries taken exactly): the float
    eigendecomposition underestimates it by a relative ~ε·cond (4e-6 at cond 1e11, d = 4, found by
    a review), so ``support_upper`` must charge that; the plain ``support`` does not (power)."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    d = 4
    R, _ = np.linalg.qr(rng.standard_normal((d, d)))
    Q = R @ np.diag(np.logspace(0, np.log10(cond), d)) @ R.T
    Q = (Q + Q.T) / 2
    c = rng.standard_normal(d)
    E = Ellipsoid(c, Q)
    below = 0
    for _ in range(40):
        v = rng.standard_normal(d)
        x = _solve_exact(Q, v)
        quad = sum((Fraction(float(vi)) * xi for vi, xi in zip(v, x, strict=True)), Fraction(0))
        lin = sum((Fraction(float(ci)) * Fraction(float(vi)) for ci, vi in zip(c, v, strict=True)),
                  Fraction(0))
        up = Fraction(float(E.support_upper(v[None])[0]))
        assert up >= lin and (up - lin) ** 2 >= quad  # σ_upper ≥ σ exactly
        # the float formula's error, against what a well-conditioned closed form is charged
        from cvxdp.geometry.certified import support_rounding

        plain = float(E.support(v[None])[0]) - float(lin)
        error = abs(plain * plain - float(quad)) / (2.0 * max(plain, 1e-300))
        below = max(below, error / float(support_rounding(E, d, np.array([np.linalg.norm(v)]))[0]))
    if cond >= 1e11:
        assert below > 1.0  # power: the eigendecomposition's error exceeds the plain rounding charge


@pytest.mark.parametrize("cond", [1e4, 1e10, 1e11])
def test_ellipsoid_bounding_ball_contains_the_set(cond):
    """The extreme points ``c + Q⁻¹v / sqrt(vᵀQ⁻¹v)`` (Q⁻¹v in rationals, the root in 60-digit decimals)
    lie in the bounding ball: its radius from the float eigenvalues was 1.4e-6 too small at cond 1e10
    (found by a review), which made the certified distance lower bound too high."""
    from decimal import Decimal, localcontext
    from fractions import Fraction

    rng = np.random.default_rng(7)
    d = 3
    R, _ = np.linalg.qr(rng.standard_normal((d, d)))
    Q = R @ np.diag(np.logspace(0, np.log10(cond), d)) @ R.T
    Q = (Q + Q.T) / 2
    E = Ellipsoid(np.zeros(d), Q)
    _, r = E.bounding_ball()
    for k in range(d):
        v = R[:, k] + 1e-3 * rng.standard_normal(d)  # near each axis, the longest included
        x = _solve_exact(Q, v)
        quad = sum((Fraction(float(vi)) * xi for vi, xi in zip(v, x, strict=True)), Fraction(0))
        with localcontext() as ctx:
            ctx.prec = 60
            root = (Decimal(quad.numerator) / Decimal(quad.denominator)).sqrt()
            norm2 = sum((Decimal(xi.numerator) / Decimal(xi.denominator)) ** 2 for xi in x)
            assert norm2 / (root * root) <= Decimal(float(r)) ** 2


@pytest.mark.parametrize("kind", ["generic", "intersection", "per-row"])
def test_bounding_ball_support_of_a_row_does_not_depend_on_its_neighbours(kind):
    """``<v_i, c> + r||v_i||`` of the sets without a closed form is a per-example quantity: each row's
    bits are the same alone, in any batch and at any position (a BLAS product rounded a row by its
    position once ``d ≥ 8``; found by review, 2026-12-02)."""
    from cvxdp.geometry.certified import per_row_support_upper

    d = 12
    w = cp.Variable(d)
    c0 = np.linspace(-3.7, 5.1, d) / 3.0
    if kind == "generic":
        region = domain_from_constraints([cp.norm(w - c0, 1) <= 2], w)
    else:
        region = domain_from_constraints([cp.norm(w - c0) <= 1, w[0] >= c0[0] - 0.5], w)
    assert type(region).__name__ == ("ConvexSet" if kind == "generic" else "Intersection")
    fn = (lambda v: per_row_support_upper(region, v)) if kind == "per-row" else region.support_upper
    rng = np.random.default_rng(0)
    V = rng.normal(size=(257, d)) * np.exp(rng.normal(size=(257, 1)) * 3)
    whole = fn(V)
    alone = np.array([fn(V[i:i + 1])[0] for i in range(V.shape[0])])
    shuffled = rng.permutation(V.shape[0])
    assert np.array_equal(whole, alone)
    assert np.array_equal(fn(V[shuffled]), whole[shuffled])
