"""Exact-arithmetic brackets: bounds as math, tightness on the records float64 cannot resolve."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvxdp
from cvxdp import losses
from cvxdp.extension.exact import exact_bracket, exact_brackets, round_down, round_up, sqrt_upper
from cvxdp.extension.reduced import evaluate_on_balls
from cvxdp.geometry import localize

_ENTRY = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(Fraction),  # dyadic: every finite float
    st.fractions(max_denominator=10**6),  # any rational (thirds, tenths, …)
    st.integers(min_value=-10**20, max_value=10**20),
)


@given(st.integers(min_value=0, max_value=8).flatmap(
    lambda d: st.tuples(st.lists(_ENTRY, min_size=d, max_size=d), st.lists(_ENTRY, min_size=d, max_size=d))))
@settings(max_examples=400, deadline=None)
def test_exact_dot_is_the_rational_sum_of_products(uv):
    """``_dot``'s integer paths (a common power of two; the vectors' common denominators) give the same
    rational as the plain sum of Fraction products — floats from subnormal to the largest, ±0, any
    rationals and integers mixed."""
    from cvxdp.extension.exact import _dot

    u, v = uv
    got = _dot(u, v)
    assert isinstance(got, Fraction)
    assert got == sum((Fraction(a) * Fraction(b) for a, b in zip(u, v, strict=True)), Fraction(0))
    tiny, big = Fraction(5e-324), Fraction(sys.float_info.max)
    assert _dot([tiny, big, -big], [big, tiny, Fraction(1)]) == 2 * tiny * big - big
    # an entry without a denominator (a float) takes the general sum, as before the fast path
    assert _dot([Fraction(1, 2), 0.25], [Fraction(2), Fraction(4)]) == 2.0
    # numpy's 64-bit integers take the plain sum too (the integer paths would wrap them)
    assert _dot([np.int64(2**62)] * 2, [1, 1]) == 2**63
    assert _dot([Fraction(1, 2**70), np.int64(3)], [1, 1]) == 3 + Fraction(1, 2**70)


@given(st.fractions(min_value=0, max_value=10**30), st.integers(min_value=8, max_value=300))
@settings(max_examples=200, deadline=None)
def test_sqrt_upper_is_an_upper_bound_within_its_precision(q, bits):
    s = sqrt_upper(q, bits)
    assert s * s >= q
    lower = s / (1 + Fraction(1, 1 << bits))
    assert lower * lower <= q


@given(st.fractions(min_value=-10**300, max_value=10**300))
@settings(max_examples=200, deadline=None)
def test_directed_rounding_brackets_the_rational(q):
    up, down = round_up(q), round_down(q)
    assert Fraction(down) <= q <= Fraction(up)
    assert math.nextafter(down, math.inf) >= up or Fraction(down) == q


def _exact(W, ex, C, region, offsets, tolerance=1e-12):
    """The exact path on every row of a batch, with the closed form's pass as the oracle gives it."""
    a, b, link = ex.glm()
    float_pass = evaluate_on_balls(W, a, b, link, C, region)
    return exact_brackets(W, a, b, link, C, region, np.arange(W.shape[0]), offsets, tolerance, 80,
                          float_pass)


def _lad(d: int = 3):
    w = cp.Variable(d)
    return cvxdp.Model(losses.absolute(w), [cp.norm(w, 2) <= 1])


def _extreme_data(d: int = 3):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, d))
    Y = rng.normal(size=8)
    X[0], Y[0] = 0.0, 1e10                       # a label 10¹⁰ with zero features: a huge level
    X[1], Y[1] = 0.0, 0.0
    X[1, 0], Y[1] = 1e12, 0.3e12                 # huge slope, kink inside the ball
    X[2, :2], Y[2] = (1e12, 1e11), 2e12          # huge slope, affine on the ball
    X[3, :2], Y[3] = (3.0, 1.0), 1e10            # ordinary slope, huge label
    X[4], Y[4] = 1e100 / math.sqrt(d), 1e100     # at the data guard
    return X, Y


@pytest.mark.parametrize("localized", [False, True])
def test_exact_bracket_is_tight_where_float64_is_not(localized):
    model = _lad()
    X, Y = _extreme_data()
    ex = model.bind({"x": X, "y": Y})
    a, b, link = ex.glm()
    region = localize(model.domain, np.array([0.5, 0.2, 0.1]), 0.7) if localized else model.domain
    ext = cvxdp.LipschitzExtension(model, 2.0, region)
    offsets = ext.level_offsets(ex)
    assert np.all(offsets[:5] != 0) and np.all(offsets[5:] == 0)
    for q in (np.array([0.3, -0.2, 0.4]), np.array([0.9, 0.3, 0.1])):
        q = region.make_feasible(q)
        W = np.broadcast_to(q, (8, 3)).copy()
        flt = evaluate_on_balls(W, a, b, link, 2.0, region)
        assert np.all(flt.upper[:4] - flt.lower[:4] > 1e-7)   # float64 alone cannot certify these
        r = _exact(W, ex, 2.0, region, offsets)
        width = r.upper - r.lower
        assert np.all(width >= 0)
        # the pole of a sphere under a slope of 10¹² leaves ~C² r / slope ≈ 1e-12: see the module
        assert np.all(width <= 5e-12), width
        # offsets make the values small: at most C·||w − point|| plus the bracket
        assert np.all(np.abs(r.upper) <= 2.0 * 2.0 + 1e-9)
        # each (g, β) touches its bracket at w and is C-Lipschitz
        assert np.all(np.linalg.norm(r.g, axis=1) <= 2.0)
        assert np.allclose(np.einsum("md,md->m", r.g, W) + r.beta, r.lower, atol=1e-12, rtol=0)


@pytest.mark.parametrize("block", [1, 3])
def test_level_offsets_are_the_same_in_any_row_block(monkeypatch, block):
    """The offsets are computed ``OFFSET_BLOCK`` rows at a time (a block's query points, minorants and
    inner points are its own arrays); each row's exact midpoint is the one the whole batch gives, with
    the rows that need the exact path in different blocks and at a block's edge."""
    import cvxdp.extension.oracle as oracle_module

    model, ex, _, ext = _localized_extreme()
    whole = ext.level_offsets(ex)
    assert oracle_module.OFFSET_BLOCK > ex.m and np.any(whole != 0) and np.any(whole == 0)
    monkeypatch.setattr(oracle_module, "OFFSET_BLOCK", block)
    X, Y = _extreme_data()
    blocked = ext.level_offsets(model.bind({"x": X, "y": Y}))  # a fresh batch: no form or cache reused
    assert list(blocked) == list(whole)


def test_level_offsets_take_one_point_for_every_row():
    """The offsets are taken at one public point (the blocks broadcast it): a point per row is refused
    by its shape, not half-used (found by review: it broke once m exceeded a block)."""
    from cvxdp.error import ParameterError

    _, ex, region, ext = _localized_extreme()
    point = region.make_feasible(np.array([0.4, 0.2, 0.1]))
    assert list(ext.level_offsets(ex, point)) == list(ext.level_offsets(ex, list(point)))
    with pytest.raises(ParameterError, match="one point of shape"):
        ext.level_offsets(ex, np.broadcast_to(point, (ex.m, 3)))


def _localized_extreme():
    """The extreme rows bound to LAD, a localized ball and the extension with ``C = 2`` on it."""
    model = _lad()
    X, Y = _extreme_data()
    region = localize(model.domain, np.array([0.5, 0.2, 0.1]), 0.7)
    return model, model.bind({"x": X, "y": Y}), region, cvxdp.LipschitzExtension(model, 2.0, region)


def test_exact_minorants_stay_below_the_extension_everywhere():
    """``<g, u> + β ≤ f_{C,U}(u) − κ`` at other points ``u``: compared with the exact upper bound there."""
    _, ex, region, ext = _localized_extreme()
    offsets = ext.level_offsets(ex)
    rng = np.random.default_rng(1)
    w = region.make_feasible(np.array([0.3, -0.2, 0.4]))
    def at(p):
        return _exact(np.broadcast_to(p, (8, 3)).copy(), ex, 2.0, region, offsets)

    at_w = at(w)
    for _ in range(6):
        u = rng.normal(size=3) * 0.8
        at_u = at(u)
        minorant = at_w.g @ u + at_w.beta
        assert np.all(minorant <= at_u.upper)


def test_exact_bracket_agrees_with_float_on_ordinary_examples():
    model = _lad()
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(20, 3)), rng.normal(size=20)
    ex = model.bind({"x": X, "y": Y})
    a, b, link = ex.glm()
    region = localize(model.domain, np.array([0.2, 0.1, -0.3]), 0.6)
    W = region.make_feasible(rng.normal(size=(20, 3)) * 0.3)
    flt = evaluate_on_balls(W, a, b, link, 1.5, region)
    r = _exact(W, ex, 1.5, region, np.zeros(20))
    # both are certified brackets of the same number: they must overlap, and the exact one is tight
    assert np.all(r.lower <= flt.upper) and np.all(flt.lower <= r.upper)
    assert np.all(r.upper - r.lower <= 1e-13)


def test_exact_bracket_of_one_example_ignores_the_others():
    model = _lad()
    X, Y = _extreme_data()
    region = localize(model.domain, np.array([0.5, 0.2, 0.1]), 0.7)
    w = region.make_feasible(np.array([0.3, -0.2, 0.4]))
    outs = []
    for other in (1.0, -1e40):
        Y2 = Y.copy()
        Y2[7] = other
        ex = model.bind({"x": X, "y": Y2})
        outs.append(_exact(np.broadcast_to(w, (8, 3)).copy(), ex, 2.0, region, np.zeros(8)))
    for field in ("upper", "lower", "g", "beta", "y"):
        assert np.array_equal(getattr(outs[0], field)[:7], getattr(outs[1], field)[:7])


def test_single_bracket_reports_no_bound_rather_than_a_wrong_one():
    """A point that is not exactly in ``U`` is never used: the candidates are all tested exactly."""
    model = _lad(2)
    region = model.domain
    e = exact_bracket(np.array([0.6, 0.8]), np.array([1.0, 0.0]), 0.0, np.array([1e12, -1e12]),
                      np.array([-0.5e12, 0.5e12]), 1.0, region, np.array([0.6, 0.8]) * (1 + 1e-15),
                      np.zeros(2), np.array([0.5, 0.5]), 0.0, 1e-12)
    up, lo, _ = e.rounded()
    assert lo <= up and up - lo <= 5e-12  # the sphere-pole limit of a 10¹² slope, see the module


def test_offsets_where_the_exact_path_cannot_apply_them_are_refused():
    """An offset is a constant the exact path subtracts; silently dropping one would mix two functions."""
    w = cp.Variable(3)
    model = cvxdp.Model(losses.absolute(w), [w <= 1, w >= -1])
    rng = np.random.default_rng(0)
    ex = model.bind({"x": rng.normal(size=(5, 3)), "y": rng.normal(size=5)})
    ext = cvxdp.LipschitzExtension(model, 1.0)
    assert np.all(ext.level_offsets(ex) == 0)  # a box: no exact path, ordinary labels: no reduction
    with pytest.raises(cvxdp.error.ParameterError):
        ext.evaluate(np.zeros(3), ex, offsets=np.array([0.0, 1.0, 0.0, 0.0, 0.0]))
    lad = _lad()
    X, Y = _extreme_data()
    ok = cvxdp.LipschitzExtension(lad, 2.0)
    exl = lad.bind({"x": X, "y": Y})
    ev = ok.evaluate(np.zeros(3), exl, offsets=ok.level_offsets(exl))
    assert np.all(ev.method[:5] == "exact")


def _pinball_record(s: float, tau: float, d: int = 4, seed: int = 1):
    w = cp.Variable(d)
    model = cvxdp.Model(losses.pinball(w, tau), [cp.norm(w, 2) <= 1])
    rng = np.random.default_rng(seed)
    X, y = s * rng.uniform(0.5, 2, size=(1, d)), np.array([s * rng.uniform(-1, 1)])
    return model, model.bind({"x": X, "y": y})


@pytest.mark.parametrize("s", [1e10, 1e14, 1e20, 1e50])
def test_pinball_records_far_out_get_tight_exact_brackets(s):
    """Pinball's pieces ``fl(−τx)``, ``fl((1 − τ)x)`` are not exactly parallel; certifying them instead
    of the GLM form left a minorant loose by ~10⁻¹⁶ ||x|| (8.8e-5 at 10¹², 5.7e3 at 10²⁰: a refusal)."""
    from cvxdp.structure import affine_coefficients

    model, ex = _pinball_record(s, 0.1)
    # the pieces as recovered from the expression (ex.pieces() reads a GLM row's off its GLM form)
    A, _ = affine_coefficients(model.loss.structure.pieces, model.loss.variable, ex.arrays, ex.m)
    glm = ex.glm()
    assert glm.is_glm[0] and not np.array_equal(A[0, 0] / np.linalg.norm(A[0, 0]),
                                                -A[0, 1] / np.linalg.norm(A[0, 1]))
    ext = cvxdp.LipschitzExtension(model, 1.1585)
    off = ext.level_offsets(ex)
    rng = np.random.default_rng(2)
    for q in (np.zeros(4), rng.normal(size=4) * 0.3, rng.normal(size=4) * 0.6):
        ev = ext.evaluate(q, ex, tolerance=1e-12, offsets=off)
        assert ev.method[0] == "exact"
        assert 0 <= ev.gap[0] <= 5e-12, ev.gap
        assert abs(ev.upper[0]) <= 1.1585 * 2 + 1e-9  # the offset is exact: values of size C·diam U


def test_float_and_exact_brackets_certify_the_same_function():
    """The closed form and the exact path bracket one function per example (its GLM form), so their
    brackets always overlap — with the pieces certified by the exact path they were disjoint in 3 of
    40 pinball trials."""
    for seed in range(40):
        model, ex = _pinball_record(1e6, 0.3, seed=seed)
        a, b, link = ex.glm()
        rng = np.random.default_rng(seed)
        W = rng.normal(size=(1, 4)) * 0.5
        flt = evaluate_on_balls(W, a, b, link, 1.0, model.domain)
        ex_r = exact_brackets(W, a, b, link, 1.0, model.domain, np.arange(1), np.zeros(1, dtype=object),
                              1e-12, 80, flt)
        assert ex_r.lower[0] <= flt.upper[0] and flt.lower[0] <= ex_r.upper[0]


def test_joint_cut_is_charged_the_distance_from_pieces_to_the_glm_form():
    _, ex = _pinball_record(1e12, 0.1)
    gap = ex.glm_pieces_gap(1.0)
    A, _ = ex.pieces()
    assert 0 < gap[0] < 1e-3 * np.linalg.norm(A[0], axis=1).max()
    # the bound dominates the difference of the two functions at many points of the unit ball
    a, _, link = ex.glm()
    rng = np.random.default_rng(0)
    for _ in range(50):
        u = rng.normal(size=4)
        u /= max(1.0, np.linalg.norm(u))
        f_pieces = max(_dot_exact(A[0, j], u) + Fraction(float(ex.pieces()[1][0, j])) for j in range(2))
        f_glm = max(Fraction(float(k)) * _dot_exact(a[0], u) + Fraction(float(e))
                    for k, e in zip(link.slopes[0], link.intercepts[0], strict=True))
        assert abs(f_pieces - f_glm) <= Fraction(float(gap[0]))


def _dot_exact(x, y) -> Fraction:
    return sum((Fraction(float(p)) * Fraction(float(q)) for p, q in zip(x, y, strict=True)), Fraction(0))


def test_directed_rounding_beyond_the_float_range():
    huge = Fraction(10) ** 400
    assert round_down(huge) == sys.float_info.max and round_up(huge) == math.inf
    assert round_up(-huge) == -sys.float_info.max and round_down(-huge) == -math.inf


@pytest.mark.parametrize("quantile", [0.1, 0.9])
def test_quantile_regressor_releases_beside_a_far_record(quantile):
    """The reviewer's pair: one record of ~10¹⁴ made every fit on its side refuse for τ ≠ 0.5."""
    import warnings

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)) / 2
    y = X @ np.array([0.5, -0.3, 0.2, 0.1]) + rng.normal(size=200) * 0.3
    X2, y2 = X.copy(), y.copy()
    X2[0] = 1e14 * rng.uniform(0.5, 2, size=4)
    y2[0] = 1e14 * rng.uniform(-1, 1)
    coefs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cvxdp.error.PrivacyLeakWarning)
        for data in ((X, y), (X2, y2)):
            est = cvxdp.PrivateQuantileRegressor(quantile=quantile, epsilon=1.0, G_k=2.0,
                                                 algorithm="output-perturbation", random_state=0)
            coefs.append(est.fit(*data).coef_)
    assert all(np.all(np.isfinite(c)) for c in coefs)


def _smooth_record(loss: str, x: np.ndarray, y: float, d: int = 2):
    w = cp.Variable(d)
    model = cvxdp.Model(getattr(losses, loss)(w), [cp.norm(w, 2) <= 1])
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, d))
    Y = np.sign(rng.standard_normal(4)) if loss == "logistic" else rng.standard_normal(4)
    X[-1], Y[-1] = x, y
    return model, model.bind({"x": X, "y": Y})


@pytest.mark.parametrize("loss,x,y", [
    ("squared", [0.7, 1.3], 1e30),  # a steep quadratic: the optimum next to a pole
    ("squared", [1e14, -1e14], 1e14),  # a valley through U
    ("squared", [-1e14, 0.0], -1e14),  # a valley tangent to the sphere at a pole (found by hypothesis)
    ("squared", [1e30, 1e30], 0.0),
    ("huber", [1e30, -1e30], 1e30),  # Huber's flat middle crossing U
    ("huber", [1e20, 0.0], 3.0),
    # a valley tangent to the sphere at 1e80 (found by a review: Newton onto plane ∩ sphere fails)
    ("squared", [-4.161468365471424e79, 9.092974268256817e79], 1e80),
    ("huber", [6e99, 8.000000000000001e99], 1e100),
    ("logistic", [-1e17, 0.0], 1.0),  # a steep softplus (found by hypothesis)
    ("logistic", [-1e18, -1e18], 1.0),
    ("logistic", [1e30, 3e29], -1.0),
])
def test_smooth_rational_links_are_bracketed_exactly(loss, x, y):
    """Square and Huber links are rational, the logistic one bounded rigorously in decimals: an
    extreme record's bracket is evaluated exactly.

    Checked as math: the bracket is tight; its lower end is below ``f(y) + C||w − y||`` at points
    ``y`` of ``U`` (evaluated in rationals, so a too-high lower bound is caught); its minorant is
    below the loss at points of ``U``."""
    from fractions import Fraction

    model, ex = _smooth_record(loss, np.array(x, float), y)
    ext = cvxdp.LipschitzExtension(model, 1.0)
    off = ext.level_offsets(ex)
    glm = ex.glm()
    a, b, link = glm.a[-1], glm.b[-1], glm.link
    rng = np.random.default_rng(1)

    def f_exact(yv: np.ndarray) -> Fraction:
        u = sum((Fraction(float(ai)) * Fraction(float(t)) for ai, t in zip(a, yv, strict=True)),
                Fraction(float(b)))
        c, M = Fraction(link.scale), Fraction(getattr(link, "M", math.inf)) if loss == "huber" else None
        if loss == "logistic":  # a rigorous lower bound of c·log(1 + e^u): max(u, 0) + e^{-|u|}/2 if small
            from decimal import Decimal, localcontext

            with localcontext() as ctx:
                ctx.prec = 80
                ctx.Emin = -999999999
                ud = Decimal(u.numerator) / Decimal(u.denominator)
                tail = (-abs(ud)).exp()
                val = max(ud, Decimal(0)) + tail * (1 - tail / 2)  # log(1 + t) ≥ t − t²/2
            # val > 0 carries a relative error below 1e-78 (80 digits): a relative margin keeps it a lower
            # bound even where the loss itself is below 1e-70 (u far below 0)
            return c * Fraction(val) * (1 - Fraction(1, 10**70))
        if loss == "squared" or abs(u) <= M:
            return c * u * u
        return c * (2 * M * abs(u) - M * M)

    pts = model.domain.project(rng.standard_normal((60, 2)) * 2.0)
    pts = pts[model.domain.certainly_contains(pts)]
    for wq in [np.zeros(2), np.array([0.3, -0.2]), np.array([0.6, 0.8]) * 0.999, np.array([0.99, 0.1])]:
        ev = ext.evaluate(wq, ex, offsets=off)
        assert ev.method[-1] == "exact" or ev.upper[-1] - ev.lower[-1] <= 1e-9
        assert ev.upper[-1] - ev.lower[-1] <= 1e-8
        lower = Fraction(float(ev.lower[-1])) + Fraction(off[-1])
        for yv in pts[:20]:
            dist = math.sqrt(float(np.sum((wq - yv) ** 2))) * (1 + 1e-15)
            assert lower <= f_exact(yv) + Fraction(dist)
            g, beta = ev.subgradient[-1], Fraction(float(ev.intercept[-1])) + Fraction(off[-1])
            minorant = sum((Fraction(float(gi)) * Fraction(float(t)) for gi, t in zip(g, yv, strict=True)),
                           beta)
            assert minorant <= f_exact(yv)


@pytest.mark.parametrize("link_name", ["square", "huber"])
@pytest.mark.parametrize("s", [1e12, 1e30, 1e100])
def test_smooth_links_on_a_lens_rim(link_name, s):
    """A steep valley whose optimum sits on a lens's rim (the localization ball cutting the domain's
    sphere; found by a review): the rim point and the split of σ_lens over the rim's normals are
    computed in high precision, so the bracket is tight at every magnitude, and valid."""
    from fractions import Fraction

    from cvxdp.extension.exact import exact_bracket_smooth
    from cvxdp.extension.reduced import evaluate_on_balls
    from cvxdp.geometry import Ball, localize
    from cvxdp.links import HuberLink, SquareLink

    U = localize(Ball(np.zeros(2), 1.0), np.array([0.999, 0.0]), 0.3)
    link = SquareLink(1.0) if link_name == "square" else HuberLink(1.0, 1.0)
    a, b = -np.array([0.0, s]), s
    rng = np.random.default_rng(0)
    pts = U.project(rng.standard_normal((40, 2)))
    pts = pts[U.certainly_contains(pts)]
    for w in (U.interior_point(), np.array([0.95, 0.0])):
        r = evaluate_on_balls(w[None], a[None], np.array([b]), link, 1.0, U, 80)
        e = exact_bracket_smooth(w, a, b, link, 1.0, U, [r.y[0]], [r.g[0]], [float(r.pi[0])], Fraction(0),
                                 1e-9)
        assert e.upper - e.lower <= Fraction(1, 10**8)
        for y in pts:
            u = sum((Fraction(float(ai)) * Fraction(float(t)) for ai, t in zip(a, y, strict=True)),
                    Fraction(b))
            f = u * u if link_name == "square" or abs(u) <= 1 else 2 * abs(u) - 1
            assert e.lower <= f + Fraction(math.sqrt(float(np.sum((w - y) ** 2))) * (1 + 1e-15))


def test_logistic_conjugate_bound_at_the_ends_of_its_domain():
    """``φ*(π) = c[p ln p + (1 − p) ln(1 − p)]`` bounded above for every ``p ∈ [0, 1]``, including
    ``p`` within ``10⁻²⁰⁰`` of 1, where ``1 − p`` formed in decimals rounded to 0 and ``0·ln 0``
    raised ``decimal.InvalidOperation`` (an exception one extreme record could trigger)."""
    from decimal import Decimal, localcontext
    from fractions import Fraction

    from cvxdp.extension.exact import _link_conjugate

    c = Fraction(3, 2)
    for p in (Fraction(0), Fraction(1), 1 - Fraction(1, 10**200), Fraction(1, 10**200), Fraction(1, 3)):
        up = _link_conjugate("logistic", c, Fraction(0), c * p, 60)
        assert up is not None and up <= Fraction(1, 10**50)  # φ* ≤ 0 on its domain, plus the margin
        with localcontext() as ctx:
            ctx.prec = 120
            ctx.Emin = -999999999
            true = Decimal(0)
            for x in (p, 1 - p):
                if x > 0:
                    xd = Decimal(x.numerator) / Decimal(x.denominator)
                    true += xd * xd.ln()
            assert Fraction(true) * c <= up
    assert _link_conjugate("logistic", c, Fraction(0), -Fraction(1, 10**9), 60) is None
    assert _link_conjugate("logistic", c, Fraction(0), c + Fraction(1, 10**9), 60) is None


@pytest.mark.parametrize("x, y", [((1e40, 3e39), -1e50), ((1e60, 3e59), -1e90), ((3e59, 1e60), 1e61)])
def test_an_oblique_steep_record_is_bracketed_at_its_pole(x, y):
    """A record that is one affine piece of slope ``||x||`` on the ball is minimized next to the pole
    ``−r·x/||x||``; a float point there is off by a rounding δ along the sphere, which cost
    ``||x||·r·δ²`` (10⁶ at 10⁴⁰) and made every fit refuse (found by review).  The poles are
    candidates in high precision now: the bracket meets the tolerance at every query."""
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])
    ex = model.bind({"x": np.array([x]), "y": np.array([y])})
    ext = cvxdp.LipschitzExtension(model, 9.0)
    off = ext.level_offsets(ex)
    for q in (np.zeros(2), np.array([1.0, -0.5]), np.array([-1.2, 1.5])):
        ev = ext.evaluate(q, ex, tolerance=1e-9, offsets=off)
        assert ev.certified[0] and ev.upper[0] - ev.lower[0] <= 1e-9


S100 = 2.0**100


@pytest.mark.parametrize("x, y", [((3 * S100, 4 * S100), 10 * S100), ((3 * S100, 4 * S100), -10 * S100),
                                  ((7.5e29, 1e30), -2.5e30),
                                  ((S100, 2 * S100, 2 * S100, 4 * S100), 10 * S100)])
def test_a_kink_plane_grazing_the_ball_is_bracketed(x, y):
    """A label of ±r·||x|| puts the absolute loss's kink plane tangent to the ball (in the float
    form certified, ``a = fl(x/||x||)``, it cuts a cap of radius ~10⁻⁸); the optimum sits on that
    cap's rim.  The kink planes are met in closed form now, and the multipliers use exact normals
    (the float ones were parallel to ``a`` at the pole): it refused every fit before (found by
    review)."""
    d = len(x)
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])
    ex = model.bind({"x": np.array([x]), "y": np.array([y])})
    ext = cvxdp.LipschitzExtension(model, 9.0)
    off = ext.level_offsets(ex)
    rng = np.random.default_rng(3)
    queries = [np.r_[0.0236, 0.9009, np.zeros(d - 2)], np.zeros(d)]
    queries += [model.domain.project(rng.normal(size=d)) for _ in range(3)]
    for q in queries:
        ev = ext.evaluate(q, ex, tolerance=1e-9, offsets=off)
        assert ev.certified[0] and ev.upper[0] - ev.lower[0] <= 1e-9


@pytest.mark.parametrize("localized", [False, True])
@pytest.mark.parametrize("C", [0.5, 2.0, 50.0])
def test_a_shared_query_point_gives_the_brackets_of_the_repeated_point(localized, C):
    """``evaluate_on_balls`` at one point shared by every row (the level offsets' public point): the
    brackets, minorants, inner points and weights of that point repeated per row, bit for bit — extreme
    rows (labels of 10¹⁰, features at the data guard) and clipped and searched rows included."""
    model = _lad()
    X, Y = _extreme_data()
    ex = model.bind({"x": X, "y": Y})
    a, b, link = ex.glm()
    region = localize(model.domain, np.array([0.5, 0.2, 0.1]), 0.7) if localized else model.domain
    for point in (np.array([0.3, -0.2, 0.4]), np.array([0.9, 0.3, 0.1]), np.zeros(3)):
        point = region.make_feasible(point)
        shared = evaluate_on_balls(point, a, b, link, C, region)
        repeated = evaluate_on_balls(np.broadcast_to(point, (ex.m, 3)).copy(), a, b, link, C, region)
        for field in ("upper", "lower", "g", "beta", "y", "pi"):
            assert getattr(shared, field).tobytes() == getattr(repeated, field).tobytes(), field


@pytest.mark.parametrize("loss", ["hinge", "absolute", "pinball"])
def test_rows_settled_by_their_size_have_brackets_well_inside_the_tolerance(loss):
    """``_small_levels`` gives a row offset 0 without the exact path when its size keeps its float bracket
    inside ``tol``: at the offsets' point, every settled row's closed-form (tight or clipped) bracket is
    within ``tol/8``, over balls and lenses and a wide range of ``C``; rows with a label of 10¹⁰ or
    features of 10¹² are not settled."""
    from cvxdp.extension import LipschitzExtension
    from cvxdp.extension.tight import closed_form_rows

    rng = np.random.default_rng(31)
    settled_any = 0
    for trial in range(12):
        d, m = int(rng.integers(2, 12)), 400
        w = cp.Variable(d)
        model = cvxdp.Model(getattr(losses, loss)(w), [cp.norm(w, 2) <= float(rng.uniform(0.5, 4.0))])
        X = rng.standard_t(2, size=(m, d)) * 10.0 ** rng.uniform(-2, 2)
        y = X @ rng.normal(size=d) + rng.standard_t(2, size=m) * 10.0 ** rng.uniform(-1, 3)
        if loss == "hinge":
            y = np.where(y > 0, 1.0, -1.0)
        else:
            y[0] = 1e10
        X[1] = 1e12
        ex = model.bind({"x": X, "y": y})
        a, b, link = ex.glm()
        C = float(10.0 ** rng.uniform(-1, 3))
        centre = model.domain.make_feasible(0.3 * rng.normal(size=d))
        radius = float(10.0 ** rng.uniform(-2, 0))
        region = model.domain if trial % 2 else localize(model.domain, centre, radius)
        ext = LipschitzExtension(model, C, region)
        tol = 2.0**-40 * (1.0 + C * region.diameter)
        small = ext._small_levels(a, b, link, tol)
        point = region.make_feasible(region.interior_point())
        r = evaluate_on_balls(point, a, b, link, C, region)
        solved = np.zeros(ex.m, dtype=bool)
        solved[closed_form_rows(point, a, b, link, C, region, np.linalg.norm(a, axis=1)).rows] = True
        # the closed form's brackets (a searched row's may be wider: its offset is 0 all the same)
        assert np.all((r.upper - r.lower)[small & solved] <= tol / 8)
        assert not small[1] and (loss == "hinge" or not small[0])
        settled_any += int(small.sum())
        # the offsets of a few settled rows and the two extreme ones (the exact path is slow)
        pick = np.concatenate([[0, 1], np.flatnonzero(small)[:6]])
        offsets = ext.level_offsets(ex.subset(pick))
        assert np.all(offsets[2:] == 0)
    assert settled_any > 0


def test_precision_bits_of_a_finite_magnitude_whose_ratio_overflows():
    from cvxdp.extension.exact import precision_bits

    assert precision_bits(1e300, 1e-10) == 8000  # 1e310 overflows: the most bits, not an OverflowError
    assert precision_bits(1e300, 0.0) == 8000
    assert precision_bits(1.0, 1.0) == 64
    assert 64 < precision_bits(1e10, 1e-10) < 8000
