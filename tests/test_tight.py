"""Rows with a closed form at the query point (``cvxdp.extension.tight``), tested as mathematics.

Tight rows (``||π a|| ≤ C`` at ``w``) have ``f_{C,U}(w) = f(w)``; clipped rows have
``f_{C,U}(w) = φ(u*) + (C/||a||)|u_w − u*|`` with the foot point in ``U``.  Both brackets must contain a
high-accuracy reference, be tight, come with minorants below the extension everywhere (inside and outside
``U``), certify in exact arithmetic, and be the same bits for a row whatever the other rows are.  The
sums-only pass of the ERM must agree with the oracle's per-row pass.
"""

from __future__ import annotations

from fractions import Fraction as Q

import cvxpy as cp
import numpy as np
import pytest
from conftest import reference_extension

import cvxdp
from cvxdp.erm.problem import RegularizedERM
from cvxdp.extension import LipschitzExtension
from cvxdp.extension.tight import closed_form_rows, slope_point
from cvxdp.geometry import localize
from cvxdp.links import HuberLink, LogisticLink, PiecewiseLinearLink, SquareLink

LOSSES = {
    "hinge": lambda w: cvxdp.losses.hinge(w),
    "absolute": lambda w: cvxdp.losses.absolute(w),
    "pinball": lambda w: cvxdp.losses.pinball(w, 0.8),
    "huber": lambda w: cvxdp.losses.huber(w, 0.5),
    "logistic": lambda w: cvxdp.losses.logistic(w),
    "squared": lambda w: cvxdp.losses.squared(w),
}


def _instance(loss_name: str, rng: np.random.Generator, m: int = 60, d: int = 3, lens: bool = False):
    w = cp.Variable(d)
    model = cvxdp.Model(LOSSES[loss_name](w), [cp.norm(w, 2) <= 1.0])
    X = rng.standard_t(3.0, size=(m, d)) * rng.choice([0.2, 1.0, 4.0], size=(m, 1))
    if loss_name in ("hinge", "logistic"):
        y = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    else:
        y = X @ np.array([0.3, -0.2, 0.1][:d]) + 0.5 * rng.standard_t(3.0, size=m)
    data = {"x": X, "y": y}
    region = localize(model.domain, np.full(d, 0.2), 0.8) if lens else model.domain
    return model, data, model.bind(data), region


def _queries(region, rng, m):
    return region.make_feasible(region.interior_point() + 0.6 * rng.normal(size=(m, region.dim)))


def _classes(ex, region, C, Q):
    a, b, link = ex.glm()
    return closed_form_rows(Q, a, b, link, C, region, np.linalg.norm(a, axis=1))


@pytest.mark.parametrize("lens", [False, True])
@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_closed_form_rows_bracket_the_reference_tightly(loss_name, lens, rng):
    model, data, ex, region = _instance(loss_name, rng, lens=lens)
    C = 0.9
    Q = _queries(region, rng, ex.m)
    solved = _classes(ex, region, C, Q)
    rows = solved.rows
    assert rows.size >= 10
    ref = reference_extension(model, region, C, Q[rows], {k: np.asarray(v)[rows] for k, v in data.items()})
    slack = 1e-7 * (1 + np.abs(ref))
    assert np.all(solved.lower <= ref + slack) and np.all(solved.upper >= ref - slack)
    assert np.all(solved.upper - solved.lower <= 1e-12 * (1 + np.abs(ref)))
    # the oracle returns the same bounds for those rows
    ev = LipschitzExtension(model, C, region).evaluate(Q, ex)
    assert np.array_equal(ev.upper[rows], solved.upper) and np.array_equal(ev.lower[rows], solved.lower)


@pytest.mark.parametrize("loss_name", ["absolute", "hinge", "pinball", "huber", "logistic"])
def test_both_classes_occur_and_clipped_rows_equal_the_clipped_loss(loss_name, rng):
    """Power: the instance has tight and clipped rows; a clipped row's value is the loss clipped to slope C
    (``min(1, C/||a||)·f`` for hinge and absolute value, whose kink value is 0)."""
    model, data, ex, region = _instance(loss_name, rng, m=200)
    C = 0.9
    Q = _queries(region, rng, ex.m)
    solved = _classes(ex, region, C, Q)
    assert solved.clipped.sum() >= 5 and (~solved.clipped).sum() >= 5
    if loss_name in ("absolute", "hinge"):
        rows = solved.rows[solved.clipped]
        f = model.loss.values(Q[rows], ex.subset(rows))
        scale = C / np.linalg.norm(data["x"][rows], axis=1)
        assert np.allclose(solved.upper[solved.clipped], scale * f, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_minorants_lie_below_the_extension_inside_and_outside_U(loss_name, rng):
    model, data, ex, region = _instance(loss_name, rng, lens=True)
    C = 0.9
    Q = _queries(region, rng, ex.m)
    ext = LipschitzExtension(model, C, region)
    ev = ext.evaluate(Q, ex)
    solved = _classes(ex, region, C, Q)
    rows = solved.rows
    for scale in (0.3, 3.0):
        P = region.interior_point() + scale * rng.normal(size=(ex.m, model.dim))
        assert np.all(ev.minorant(P)[rows] <= ext.evaluate(P, ex).upper[rows] + 1e-12)
    P = rng.normal(size=(rows.size, model.dim)) * 2
    ref = reference_extension(model, region, C, P, {k: np.asarray(v)[rows] for k, v in data.items()})
    slopes = solved.pi[:, None] * ex.glm().a[rows]
    assert np.all(np.einsum("md,md->m", slopes, P) + solved.beta <= ref + 1e-8 * (1 + np.abs(ref)))
    assert np.all(np.linalg.norm(slopes, axis=1) <= C)


def test_clipped_lad_upper_bounds_hold_in_exact_arithmetic(rng):
    """``|<x, y> − label| + C||w − y|| ≤ upper`` and ``y ∈ U`` in rationals, at the float foot point;
    the minorant ``<π a, w> + β ≤ lower`` side is checked against the exact clipped value."""
    _model, data, ex, region = _instance("absolute", rng, m=300)
    C = 0.9
    Q = _queries(region, rng, ex.m)
    solved = _classes(ex, region, C, Q)
    rows = solved.rows[solved.clipped]
    assert rows.size >= 20
    for k, i in enumerate(rows):
        x, label, w, y = data["x"][i], data["y"][i], Q[i], solved.foot[k]
        u = sum(Q_(a) * Q_(v) for a, v in zip(x, y, strict=True)) - Q_(label)
        dist2 = sum((Q_(a) - Q_(v)) ** 2 for a, v in zip(w, y, strict=True))
        rest = Q_(solved.upper[solved.clipped][k]) - abs(u)
        assert rest >= 0 and (rest / Q_(C)) ** 2 >= dist2
        assert sum(Q_(v) ** 2 for v in y) <= 1  # y in the unit ball, exactly
        # the exact extension value is C |<x, w> − label| / ||x||, at least the lower bound
        uw = abs(sum(Q_(a) * Q_(v) for a, v in zip(x, w, strict=True)) - Q_(label))
        lower = Q_(solved.lower[solved.clipped][k])
        assert lower <= 0 or (lower / (Q_(C) * uw)) ** 2 <= 1 / sum(Q_(a) ** 2 for a in x)


def Q_(v) -> Q:
    return Q(float(v))


def test_a_rows_path_and_bits_do_not_depend_on_other_rows(rng):
    """Change one row: every other row's class, slope and bounds stay bit for bit; and a row gives the same
    bits in any batch (subset)."""
    model, data, ex, region = _instance("absolute", rng, m=120, lens=True)
    C = 0.9
    q = region.make_feasible(region.interior_point()[None, :] + 0.3)[0]
    base = _classes(ex, region, C, np.broadcast_to(q, (ex.m, model.dim)).copy())
    other = {k: np.array(v, copy=True) for k, v in data.items()}
    other["x"][7] = [1e6, -3e5, 2.0]
    other["y"][7] = 1e8
    changed = _classes(model.bind(other), region, C, np.broadcast_to(q, (ex.m, model.dim)).copy())
    for s in (base, changed):
        keep = s.rows != 7
        s.rows, s.pi, s.upper, s.lower = s.rows[keep], s.pi[keep], s.upper[keep], s.lower[keep]
    assert np.array_equal(base.rows, changed.rows)
    for field in ("pi", "upper", "lower"):
        assert np.array_equal(getattr(base, field), getattr(changed, field))
    sub = np.arange(30, 90)
    part = _classes(ex.subset(sub), region, C, np.broadcast_to(q, (sub.size, model.dim)).copy())
    inside = (base.rows >= 30) & (base.rows < 90)
    assert np.array_equal(part.rows + 30, base.rows[inside])
    assert np.array_equal(part.upper, base.upper[inside]) and np.array_equal(part.pi, base.pi[inside])
    shared = _classes(ex, region, C, q)  # one shared query point: the same rows and bits
    assert np.array_equal(shared.rows, _classes(ex, region, C, np.tile(q, (ex.m, 1))).rows)


def test_a_query_point_outside_U_has_no_closed_form_rows(rng):
    _model, _, ex, region = _instance("hinge", rng)
    far = np.array([5.0, 0.0, 0.0])
    assert _classes(ex, region, 0.9, far).rows.size == 0


def test_slope_points():
    pl = PiecewiseLinearLink(np.array([[-2.0, 3.0]]), np.array([[1.0, -4.0]]))  # kink at u = 1
    assert slope_point(pl, np.array([0.5]))[0] == pytest.approx(1.0)
    assert np.isnan(slope_point(pl, np.array([3.5]))[0])
    assert slope_point(SquareLink(2.0), np.array([1.0]))[0] == pytest.approx(0.25)
    assert slope_point(HuberLink(0.5, 1.0), np.array([0.4]))[0] == pytest.approx(0.2)
    assert np.isnan(slope_point(HuberLink(0.5, 1.0), np.array([1.0]))[0])  # the linear part's slope
    u = slope_point(LogisticLink(1.0), np.array([0.25]))[0]
    assert 1 / (1 + np.exp(-u)) == pytest.approx(0.25)


@pytest.mark.parametrize("loss_name", ["absolute", "hinge", "logistic", "huber"])
def test_sums_only_pass_agrees_with_the_per_row_pass(loss_name, rng):
    """The ERM's pass over closed-form rows as sums gives the upper bound and cut of the per-row pass (same
    row bounds; sums within their certified rounding), and the cut lies below F on U."""
    model, _data, ex, region = _instance(loss_name, rng, m=400, lens=True)
    problem = RegularizedERM(model, ex, region, 0.9, 0.5, np.zeros(model.dim))
    assert problem._tight_pass_data() is not None
    w = _queries(region, rng, 1)[0]
    fast_upper, fast_cut = problem.upper_and_cut(w, 1e-9)
    ev = problem.extension.evaluate(w, problem.examples, tolerance=1e-9, offsets=problem.offsets)
    slow_upper = float(np.mean(ev.upper)) + problem.regularizer(w)
    assert fast_upper >= slow_upper - 1e-12 and fast_upper - slow_upper <= 1e-11
    assert np.allclose(fast_cut.g, ev.subgradient.mean(axis=0), atol=1e-12)
    assert abs(fast_cut.beta - ev.intercept.mean()) <= 1e-11
    for _ in range(5):
        p = _queries(region, rng, 1)[0]
        value, _ = problem.upper_and_cut(p, 1e-9)
        assert fast_cut.g @ p + fast_cut.beta + problem.regularizer(p) <= value


def test_the_minorant_holds_with_the_float_slope_the_oracle_returns(rng):
    """Found by review: a tight row's minorant is returned as ``(fl(π a), β)``; ``β`` must pay
    ``σ_U(fl(π a) − π a)``, or ``<g, u> + β`` rose above ``f_{C,U}(u) = 0`` by 10⁻¹⁷ where ``<a, u> = 0``
    (LAD, label 0).  Checked in exact rationals on both sides of ``a``."""
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 1.0])
    ext = LipschitzExtension(model, 1.0, model.domain)
    for _ in range(300):
        x = rng.normal(size=2)
        x /= np.linalg.norm(x) * 1.0001  # ||x|| < C: tight at every w
        ex = model.bind({"x": x[None, :], "y": np.array([0.0])})
        ev = ext.evaluate(np.array([0.3, 0.2]), ex, tolerance=1e-9)
        assert ev.method[0] == "closed-form"
        a, b, _ = ex.glm()
        g, beta = ev.subgradient[0], ev.intercept[0]
        for t in (Q(1, 2), Q(-1, 2)):
            u = (t * Q_(a[0, 1]), -t * Q_(a[0, 0]))  # <a, u> = 0 exactly: f_{C,U}(u) = 0
            assert Q_(a[0, 0]) * u[0] + Q_(a[0, 1]) * u[1] + Q_(b[0]) == 0
            assert Q_(g[0]) * u[0] + Q_(g[1]) * u[1] + Q_(beta) <= 0
