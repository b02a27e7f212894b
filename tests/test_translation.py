"""The regularized ERM solved in coordinates centred near a far-away ``U`` (cvxdp.erm.translation)."""

from __future__ import annotations

from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest

from cvxdp import Loss, Model, PrivateProblem, losses
from cvxdp.erm import RegularizedERM, solve_certified
from cvxdp.erm.translation import (
    LEVEL_CAP,
    TranslatedERM,
    accuracy_equivalent_gap,
    public_origin,
    regularized_erm,
    rounding_of_return,
    translate_examples,
    translated_accuracy,
)
from cvxdp.geometry import Ball, Box, Ellipsoid, Intersection, Polytope, localize
from cvxdp.geometry.lens import Lens
from cvxdp.run.executor import PartitionedExecutor

LO = 1e6


def _remote_box(d=3):
    return Box(np.full(d, LO), np.full(d, LO + 1.0))


def _square_model(W, d=3):
    w = cp.Variable(d)
    return Model(losses.squared(w), W)


def _data(n=150, d=3, seed=0, outlier=True):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = X @ np.full(d, LO + 0.5) + 0.3 * rng.standard_normal(n)
    if outlier:
        X[-1], y[-1] = 1.0, 1e7
    return {"x": X, "y": y}


# -- the public origin -----------------------------------------------------------------------------

def test_the_origin_is_a_public_grid_point_near_the_far_coordinates_only():
    U = Box(np.array([LO, -0.5, 2.0]), np.array([LO + 1.0, 0.5, 2.5]))
    o = public_origin(U, _square_model(U))
    c, r = U.bounding_ball()
    q = 2.0 ** np.ceil(np.log2(r))
    assert o[1] == 0.0 and o[2] == 0.0          # |c_j| ≤ 4r: left alone
    assert o[0] != 0.0 and o[0] % q == 0.0 and abs(o[0] - c[0]) <= q / 2 <= r
    # a set around the origin, or one whose centre is within 4 radii of it, is not translated
    assert public_origin(Box(-np.ones(3), np.ones(3)), _square_model(Box(-np.ones(3), np.ones(3)))) is None
    assert public_origin(Ball(np.full(3, 0.5), 1.0), _square_model(Ball(np.full(3, 0.5), 1.0))) is None


def test_a_generic_loss_is_not_translated():
    U = _remote_box()
    w = cp.Variable(3)
    x = cp.Parameter(3, name="x")
    model = Model(Loss(cp.exp(x @ w - 3e6) + cp.sum_squares(w - LO), w, data=[x]), U)
    assert public_origin(U, model) is None


def test_near_origin_problems_are_the_plain_problem():
    model = _square_model(Ball(np.zeros(3), 1.0))
    ex = model.bind(_data(outlier=False))
    p = regularized_erm(model, ex, model.domain, 2.0, 0.1, np.zeros(3))
    assert type(p) is RegularizedERM


# -- translated sets ---------------------------------------------------------------------------------

def _sets():
    c = np.array([LO, -3e5, 2e5])
    ball = Ball(c, 0.7)
    yield "ball", ball
    yield "box", Box(c - 0.5, c + np.array([0.5, 0.25, 1.0]))
    yield "ellipsoid", Ellipsoid(c, np.diag([4.0, 1.0, 9.0]))
    A = np.vstack([np.eye(3), -np.eye(3), np.ones((1, 3))])
    b = np.concatenate([c + 1.0, -(c - 1.0), [c.sum() + 2.0]])
    yield "polytope", Polytope(A, b)
    yield "intersection", Intersection([Box(c - 1.0, c + 1.0), Ball(c + 0.5, 1.2)])
    yield "lens", Lens(Ball(c, 1.0), Ball(c + np.array([0.6, 0.0, 0.0]), 0.8))
    yield "localized", localize(Box(c - 1.0, c + 1.0), c + 0.3, 0.2)


@pytest.mark.parametrize("name,U", list(_sets()))
def test_a_translated_set_is_the_set_moved(name, U):
    o = public_origin(U, _square_model(U))
    assert o is not None
    V = U.translate(o)
    assert type(V) is type(U)
    rng = np.random.default_rng(1)
    vc, vr = V.bounding_ball()
    c, r = vc + o, vr   # a solver's bounding box of a far polytope is loose: take the translated one's
    pts = c + 1.5 * r * rng.uniform(-1, 1, (400, 3))
    inside = U.contains(pts)
    assert 0 < inside.sum() < len(pts)
    # points of the set, moved (float differences near o are exact by Sterbenz's lemma)
    np.testing.assert_array_equal(V.contains(pts - o), inside)
    dirs = rng.standard_normal((50, 3))
    shifted = U.support_upper(dirs) - dirs @ o
    tol = 1e-6 * (1 + np.abs(dirs @ o)).max()
    np.testing.assert_allclose(V.support_upper(dirs), shifted, rtol=0, atol=tol)
    assert np.linalg.norm(vc) + vr <= 10.0 * max(r, 1.0)   # the reach is now of the set's own size


def test_a_box_and_a_ball_translate_exactly():
    U = _remote_box()
    o = public_origin(U, _square_model(U))
    V = U.translate(o)
    np.testing.assert_array_equal(V.lower + o, U.lower)
    np.testing.assert_array_equal(V.upper + o, U.upper)
    B = Ball(np.array([LO + 0.3, -7e5 + 0.1, 0.0]), 0.5)
    Bo = B.translate(public_origin(B, _square_model(B)))
    np.testing.assert_array_equal(Bo.center + public_origin(B, _square_model(B)), B.center)


# -- translated records -------------------------------------------------------------------------------

@pytest.mark.parametrize("loss", ["squared", "absolute", "hinge", "pinball"])
def test_a_translated_record_is_the_record_at_w_equals_o_plus_v(loss):
    d = 3
    w = cp.Variable(d)
    f = {"squared": losses.squared, "absolute": losses.absolute, "hinge": losses.hinge,
         "pinball": lambda v: losses.pinball(v, quantile=0.8)}[loss](w)
    U = _remote_box()
    model = Model(f, U)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, d))
    y = np.sign(rng.standard_normal(40)) if loss == "hinge" else X @ np.full(d, LO) + rng.standard_normal(40)
    ex = model.bind({"x": X, "y": y})
    o = public_origin(U, model)
    tex = translate_examples(ex, o)
    v = rng.uniform(0.0, 1.0, (40, d))
    # the translated structure evaluated at v is the loss at v + o, up to the level's rounding
    if loss == "squared":
        a, b, link = tex.glm()
        got = link.value(np.einsum("md,md->m", a, v) + b)
    else:
        A, b = tex.pieces()
        got = np.max(np.einsum("mjd,md->mj", A, v) + b, axis=1)
    want = model.loss.values(v + o, ex)
    scale = np.abs(X).sum(axis=1) * LO * 1e-15 * (1 + np.abs(want)) if loss == "squared" else \
        np.abs(X).sum(axis=1) * LO * 1e-15 + 1e-12
    assert np.all(np.abs(got - want) <= scale + 1e-9 * np.abs(want))


def test_each_translated_record_depends_on_itself_only():
    U = _remote_box()
    model = Model(losses.absolute(cp.Variable(3)), U)
    base = _data(outlier=False)
    o = public_origin(U, model)
    t0 = translate_examples(model.bind(base), o).pieces()
    changed = {k: v.copy() for k, v in base.items()}
    changed["x"][7] = [3e40, -1e38, 7.0]
    changed["y"][7] = -1e99
    t1 = translate_examples(model.bind(changed), o).pieces()
    keep = np.arange(150) != 7
    for a, b in zip(t0, t1, strict=True):
        np.testing.assert_array_equal(a[keep], b[keep])
    # and a subset's rows keep their bits (row-local products)
    sub = translate_examples(model.bind(base).subset(np.arange(3, 40)), o).pieces()
    np.testing.assert_array_equal(sub[1], t0[1][3:40])


def test_a_level_beyond_the_float_range_is_capped_per_record():
    """Defensive: data and domains are bounded by 1e100, so ``b + <a, o>`` stays finite for every
    shipped loss; a level that would not is still mapped to a finite one, record by record."""
    from cvxdp.erm.translation import _finite_level

    got = _finite_level(np.array([np.inf, -np.inf, np.nan, 1e300, -3.0]))
    np.testing.assert_array_equal(got, [LEVEL_CAP, -LEVEL_CAP, 0.0, 1e300, -3.0])


# -- the accuracy that leaves room for the return's rounding --------------------------------------------

def _within(alpha_inner, alpha, lam, delta) -> bool:
    """``sqrt(2α'/λ) + δ ≤ sqrt(2α/λ)`` decided in exact rational arithmetic."""
    A = 2 * Fraction(alpha_inner) / Fraction(lam)
    B = 2 * Fraction(alpha) / Fraction(lam)
    dl = Fraction(delta)
    rhs = B - A - dl * dl
    return rhs >= 0 and 4 * dl * dl * A <= rhs * rhs


@pytest.mark.parametrize("seed", range(30))
def test_the_translated_accuracy_keeps_the_distance_within_its_budget(seed):
    rng = np.random.default_rng(seed)
    alpha = float(10.0 ** rng.uniform(-14, 0))
    lam = float(10.0 ** rng.uniform(-6, 2))
    s = np.sqrt(2 * alpha / lam)
    delta = float(s * 10.0 ** rng.uniform(-12, np.log10(0.49)))
    inner = translated_accuracy(alpha, lam, delta)
    assert inner is not None and 0 < inner < alpha
    assert _within(inner, alpha, lam, delta)
    # nearly tight: a slightly larger accuracy breaks the budget (the test has power)
    assert not _within(inner * (1 + 1e-9) + 1e-300, alpha, lam, delta * (1 + 1e-6) + s * 1e-8)
    # the reported gap of a point certified to α' bounds its distance and stays within α
    for gap in (inner, inner * 0.3, 0.0):
        eq = accuracy_equivalent_gap(gap, lam, delta, alpha)
        assert eq <= alpha
        assert _within(gap, eq, lam, delta) or eq == alpha


def test_no_translation_when_the_rounding_eats_half_the_distance():
    assert translated_accuracy(1e-20, 1.0, 1e-10) is None
    assert translated_accuracy(1e-20, 1.0, 1e-11) is not None


def test_the_return_rounding_bound_holds_for_points_of_the_translated_set():
    U = Box(np.array([LO, 3e7, -5e8]), np.array([LO + 1.0, 3e7 + 2.0, -5e8 + 0.5]))
    o = public_origin(U, _square_model(U))
    V = U.translate(o)
    delta = Fraction(rounding_of_return(o, V))
    rng = np.random.default_rng(3)
    for v in V.lower + rng.uniform(0, 1, (200, 3)) * (V.upper - V.lower):
        err = sum((Fraction(float(vi + oi)) - Fraction(float(vi)) - Fraction(float(oi))) ** 2
                  for vi, oi in zip(v, o, strict=True))
        assert err <= delta * delta


# -- solves and releases -------------------------------------------------------------------------------

def test_a_far_problem_is_solved_translated_and_agrees_with_the_users_own_translation():
    U = _remote_box()
    model = _square_model(U)
    data = _data()
    ex = model.bind(data)
    C, lam, alpha = 30.0, 0.05, 1e-6
    w0 = U.interior_point()
    p = regularized_erm(model, ex, U, C, lam, w0, alpha=alpha)
    assert isinstance(p, TranslatedERM)
    w, cert = solve_certified(p, alpha)
    assert cert.gap <= alpha and cert.method.startswith("translated(") and U.contains(w, tol=1e-9)
    # the same problem translated by hand: labels y − <x, o> on [0, 1]^3
    o = p.origin
    V = Box(U.lower - o, U.upper - o)
    hand = Model(losses.squared(cp.Variable(3)), V)
    ref = RegularizedERM(hand, hand.bind({"x": data["x"], "y": data["y"] - data["x"] @ o}), V, C, lam, w0 - o)
    v, _ = solve_certified(ref, alpha)
    assert np.linalg.norm(w - (v + o)) <= 2 * np.sqrt(2 * alpha / lam)


@pytest.mark.parametrize("algorithm", ["output-perturbation", "recursive", "population"])
def test_one_steep_record_on_a_far_box_no_longer_refuses(algorithm):
    """Found by review: x = (1, 1, 1), y = 1e7 on [1e6, 1e6 + 1]^3 made every algorithm refuse."""
    model = _square_model(_remote_box())
    for outlier in (True, False):
        res = PrivateProblem(model).solve(_data(outlier=outlier), epsilon=1.0, moment_k=4.0, G_k=1000.0,
                                          algorithm=algorithm, random_state=0)
        assert model.domain.contains(res.w, tol=1e-9) and res.ledger.spent <= 1.0


def test_the_partitioned_path_translates_too():
    U = _remote_box()
    model = Model(losses.absolute(cp.Variable(3)), U)
    data = _data()
    ex = model.bind(data)
    C, lam, alpha = 5.0, 0.05, 1e-5
    w0 = U.interior_point()
    serial = regularized_erm(model, ex, U, C, lam, w0, alpha=alpha)
    parted = regularized_erm(model, ex, U, C, lam, w0, alpha=alpha, executor=PartitionedExecutor(3),
                             partitions=3)
    assert isinstance(parted, TranslatedERM) and not isinstance(parted.inner, RegularizedERM)
    from cvxdp.erm import ERMSettings

    w1, c1 = solve_certified(serial, alpha)
    w2, c2 = solve_certified(parted, alpha, ERMSettings(method="bundle"))
    assert c1.gap <= alpha and c2.gap <= alpha
    assert np.linalg.norm(w1 - w2) <= 2 * np.sqrt(2 * alpha / lam)


def test_a_ball_cut_by_a_half_space_translates_when_localized_deep():
    """Found by review: the unbounded half-space part had no translated form of its own, so a deep
    localization of ``{||w|| ≤ 1, Σ w ≤ 0.5}`` (every population fit reaches one) raised."""
    w = cp.Variable(3)
    model = Model(losses.squared(w), [cp.norm(w) <= 1.0, cp.sum(w) <= 0.5])
    U = localize(model.domain, np.array([0.3, -0.2, 0.4]), 0.005)
    o = public_origin(U, model)
    assert o is not None
    V = U.translate(o)
    pts = np.array([0.3, -0.2, 0.4]) + 0.004 * np.random.default_rng(0).uniform(-1, 1, (200, 3))
    np.testing.assert_array_equal(V.contains(pts - o), U.contains(pts))
    data = _data(outlier=False)
    p = regularized_erm(model, model.bind({"x": data["x"], "y": data["x"] @ np.array([0.3, -0.2, 0.4])}), U,
                        2.0, 0.5, U.make_feasible(U.interior_point()), alpha=1e-8)
    assert isinstance(p, TranslatedERM)
    w_, cert = solve_certified(p, 1e-8)
    assert cert.gap <= 1e-8 and U.contains(w_, tol=1e-9)


def test_a_set_whose_translation_cannot_be_built_is_solved_as_given():
    class Stubborn(Box):
        def translate(self, shift):
            raise RuntimeError("no translated form")

    U = Stubborn(np.full(3, LO), np.full(3, LO + 1.0))
    assert public_origin(U, _square_model(U)) is None


@pytest.mark.parametrize("alpha,lam", [(1.0, 1e-310), (1e-16, 1e300), (5e-324, 5e-324), (1e300, 1e-300)])
def test_the_translated_accuracy_declines_outside_the_float_range(alpha, lam):
    assert translated_accuracy(alpha, lam, 0.0) is None
