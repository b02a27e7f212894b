"""The affine reduction: an example that is one affine piece on U loses its level, exactly.

Tested as math: at points of U the substitute equals the example's loss minus its offset in
exact rationals; an example where another piece becomes active somewhere in U is never
substituted (the test has power); each example's substitute is its own (one record changed,
every other row bit for bit); the extension brackets of the substitute plus the offset contain
the original's; and the label outliers that used to refuse on non-ball regions now release.
"""

from __future__ import annotations

from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest

from cvxdp import Model, PrivateProblem, losses
from cvxdp.extension import LipschitzExtension
from cvxdp.extension.affine_reduction import LEVEL_FACTOR, affine_reduction, argument_range
from cvxdp.geometry import Ball, Box, Simplex, localize


def _regions(d: int) -> dict:
    return {
        "ball": Ball(np.zeros(d), 1.0),
        "box": Box(-np.ones(d), np.ones(d)),
        "simplex": Simplex(d),
        "lens": localize(Ball(np.zeros(d), 1.0), np.full(d, 0.3), 0.9),
        "box-localized": localize(Box(-np.ones(d), np.ones(d)), np.full(d, 0.5), 0.7),
    }


def _points(region, rng: np.random.Generator, k: int = 200) -> np.ndarray:
    """Points of ``region``: projections of a wide cloud, its extreme points in random directions."""
    d = region.dim
    cloud = region.project(3.0 * rng.standard_normal((k, d)))
    return cloud[region.contains(cloud, tol=region.feasibility_tolerance())]


def _q(v) -> list[Fraction]:
    return [Fraction(float(t)) for t in np.ravel(v)]


def _pieces_value(A: np.ndarray, b: np.ndarray, y: np.ndarray) -> Fraction:
    """``max_j <A_j, y> + b_j`` in exact rationals."""
    yq = _q(y)
    return max(sum((a * t for a, t in zip(_q(Aj), yq, strict=True)), Fraction(0)) + Fraction(float(bj))
               for Aj, bj in zip(A, b, strict=True))


def _huber(u: Fraction, M: Fraction) -> Fraction:
    return u * u if abs(u) <= M else 2 * M * abs(u) - M * M


def _lad_examples(d: int, n: int, rng: np.random.Generator, loss=losses.absolute):
    w = cp.Variable(d)
    model = Model(loss(w), [cp.norm(w, 2) <= 1.0])
    X = rng.standard_t(3.0, (n, d))
    y = X @ np.linspace(0.5, -0.5, d) + rng.standard_t(2.0, n)
    y[: n // 3] *= 10.0 ** rng.uniform(4, 30, n // 3)  # heavy labels of both signs
    return model, model.bind({"x": X, "y": y}), X, y


@pytest.mark.parametrize("kind", ["ball", "box", "simplex", "lens", "box-localized"])
@pytest.mark.parametrize("loss", [losses.absolute, lambda w: losses.pinball(w, 0.9)], ids=["lad", "pinball"])
def test_substitute_equals_loss_minus_offset_exactly(kind: str, loss) -> None:
    rng = np.random.default_rng(1)
    d = 3
    _, ex, _, _ = _lad_examples(d, 60, rng, loss)
    region = _regions(d)[kind]
    red = affine_reduction(ex, region, C=2.0)
    assert red.mask.sum() >= 10  # the heavy labels are reduced ...
    assert not red.mask[20:].any()  # ... ordinary ones are not (the level test)
    pts = _points(region, rng)
    assert pts.shape[0] >= 50
    if kind in ("ball", "lens"):
        # on a ball or lens the generalized-linear form is the function certified: the substitute is
        # exact there, and its pieces are read off it
        g, g2 = ex.glm(), red.apply(ex).glm()
        for i in range(ex.m):
            if not red.mask[i]:
                assert np.array_equal(g2.a[i], g.a[i]) and g2.b[i] == g.b[i]
                assert np.array_equal(g2.link.slopes[i], g.link.slopes[i]) and red.offsets[i] == 0
                continue
            for y in pts[:40]:
                assert _glm_value(g, i, y) - red.offsets[i] == _glm_value(g2, i, y)
        # the pieces read off the substitute differ from it by their rounding only, within the bound the
        # joint program charges for that difference (glm_pieces_gap)
        sub = red.apply(ex)
        A2, b2 = sub.pieces()
        gap = sub.glm_pieces_gap(region.norm_bound())
        for i in np.nonzero(red.mask)[0]:
            for y in pts[:5]:
                assert abs(_pieces_value(A2[i], b2[i], y) - _glm_value(g2, i, y)) <= Fraction(float(gap[i]))
        return
    A, b = ex.pieces()
    A2, b2 = red.apply(ex).pieces()
    for i in range(ex.m):
        if not red.mask[i]:
            assert np.array_equal(A2[i], A[i]) and np.array_equal(b2[i], b[i])
            assert red.offsets[i] == 0
            continue
        for y in pts[:40]:
            assert _pieces_value(A[i], b[i], y) - red.offsets[i] == _pieces_value(A2[i], b2[i], y)


def _glm_value(glm, i: int, y: np.ndarray) -> Fraction:
    """``max_j κ_ij (<a_i, y> + b_i) + e_ij`` in exact rationals."""
    u = sum((a * t for a, t in zip(_q(glm.a[i]), _q(y), strict=True)), Fraction(0))
    u += Fraction(float(glm.b[i]))
    return max(Fraction(float(k)) * u + Fraction(float(e))
               for k, e in zip(glm.link.slopes[i], glm.link.intercepts[i], strict=True))


@pytest.mark.parametrize("kind", ["ball", "box", "lens", "box-localized"])
def test_huber_substitute_equals_loss_minus_offset_exactly(kind: str) -> None:
    rng = np.random.default_rng(2)
    d = 2
    w = cp.Variable(d)
    model = Model(losses.huber(w, threshold=1.0), [cp.norm(w, 2) <= 1.0])
    X = rng.standard_normal((50, d))
    y = rng.standard_normal(50)
    y[:20] = np.sign(rng.standard_normal(20)) * 10.0 ** rng.uniform(5, 40, 20)
    ex = model.bind({"x": X, "y": y})
    region = _regions(d)[kind]
    red = affine_reduction(ex, region, C=1.0)
    assert red.mask[:20].all() and not red.mask[20:].any()
    glm, glm2 = ex.glm(), red.apply(ex).glm()
    M = Fraction(1)
    for i in np.nonzero(red.mask)[0]:
        for yv in _points(region, rng, 60):
            u = sum((a * t for a, t in zip(_q(glm.a[i]), _q(yv), strict=True)), Fraction(0))
            f = _huber(u + Fraction(float(glm.b[i])), M)
            f2 = _huber(u + Fraction(float(glm2.b[i])), M)
            assert abs(u + Fraction(float(glm2.b[i]))) >= M  # the substitute stays in the linear part
            assert f - red.offsets[i] == f2
        # the substitute's level is small: of the size of the example's variation on U
        assert abs(glm2.b[i]) <= 4.0 * (1.0 + np.linalg.norm(glm.a[i]) * region.norm_bound())


def test_crossing_piece_is_never_substituted() -> None:
    """Power: a max-affine example whose second piece overtakes the first inside U, however
    large the first piece's level, must keep both pieces; just below the crossing it is reduced."""
    w = cp.Variable(2)
    model = Model(losses.max_affine(w, 2), [cp.norm(w, 2) <= 1.0])
    level = 1e6
    A = np.zeros((3, 2, 2))
    b = np.zeros((3, 2))
    b[:, 0] = level
    A[0, 1] = [1.0001 * level, 0.0]  # exceeds the level near y = e1: crossing inside U
    A[1, 1] = [0.9999 * level, 0.0]  # never reaches the level on the unit ball
    A[2, 1] = [level, 0.0]  # touches it at y = e1 only: ties are fine, but rounding decides: no
    ex = model.bind({"A": A, "b": b})
    U = Ball(np.zeros(2), 1.0)
    red = affine_reduction(ex, U, C=1.0)
    assert red.mask.tolist() == [False, True, False]
    assert red.offsets[1] == Fraction(level)


def test_level_must_dominate() -> None:
    """An ordinary example (level below 2¹² × its variation on U) keeps its path."""
    w = cp.Variable(1)
    model = Model(losses.absolute(w), [cp.norm(w, 2) <= 1.0])
    C = 1.0
    U = Ball(np.zeros(1), 1.0)
    variation = 1.0 + C * U.diameter + 1.0 * U.norm_bound()
    y = np.array([0.5, LEVEL_FACTOR * variation * 0.99, LEVEL_FACTOR * variation * 1.01])
    ex = model.bind({"x": np.ones((3, 1)), "y": y})
    assert affine_reduction(ex, U, C).mask.tolist() == [False, False, True]


@pytest.mark.parametrize("record", [1e10, -1e30, 1e100, 5e3])
def test_per_example(record: float) -> None:
    """Replacing one example leaves every other example's mask, offset and substitute bit for bit."""
    rng = np.random.default_rng(3)
    model, ex, X, y = _lad_examples(2, 40, rng)
    y2 = y.copy()
    y2[7] = record
    ex2 = model.bind({"x": X, "y": y2})
    for region in _regions(2).values():
        r1, r2 = affine_reduction(ex, region, 1.5), affine_reduction(ex2, region, 1.5)
        others = np.arange(40) != 7
        assert np.array_equal(r1.mask[others], r2.mask[others])
        assert list(r1.offsets[others]) == list(r2.offsets[others])
        p1, p2 = r1.apply(ex).pieces(), r2.apply(ex2).pieces()
        assert np.array_equal(p1[0][others], p2[0][others]) and np.array_equal(p1[1][others], p2[1][others])


def _brackets_agree(loss, labels: np.ndarray, kind: str) -> None:
    """``f_{C,U}`` of the substitute plus κ brackets the original's values (labels moderate enough for
    float64 to certify the original too), and the substitute's brackets are at least as tight."""
    rng = np.random.default_rng(4)
    d = 2
    w = cp.Variable(d)
    model = Model(loss(w), [w <= 1, w >= -1])
    X = rng.standard_normal((30, d))
    y = np.concatenate([labels, rng.standard_normal(15)])
    ex = model.bind({"x": X, "y": y})
    region = _regions(d)[kind]
    ext = LipschitzExtension(model, 1.3, region)
    red = affine_reduction(ex, region, 1.3)
    assert red.mask[:15].all()
    sub = red.apply(ex)
    kappa = np.array([float(k) for k in red.offsets])
    for wq in _points(region, rng, 20)[:5]:
        e1, e2 = ext.evaluate(wq, ex), ext.evaluate(wq, sub)
        assert np.all(e1.lower <= e2.upper + kappa + 1e-9 * (1 + np.abs(kappa)))
        assert np.all(e2.lower + kappa <= e1.upper + 1e-9 * (1 + np.abs(kappa)))
        assert np.all(e2.upper - e2.lower <= e1.upper - e1.lower + 2 * e1.tolerance)


@pytest.mark.parametrize("kind", ["box", "ball", "box-localized"])
def test_extension_brackets_agree(kind: str) -> None:
    rng = np.random.default_rng(40)
    _brackets_agree(losses.absolute, rng.uniform(1e5, 5e5, 15) * rng.choice([-1, 1], 15), kind)


def _model(loss: str, dom: str, d: int = 2) -> Model:
    w = cp.Variable(d)
    cons = {"ball": [cp.norm(w, 2) <= 1.0], "box": [w <= 1, w >= -1],
            "simplex": [w >= 0, cp.sum(w) == 1]}[dom]
    f = {"huber": losses.huber, "lad": losses.absolute, "pinball": lambda w: losses.pinball(w, 0.9)}[loss](w)
    return Model(f, cons)


@pytest.mark.parametrize("loss,dom,algorithm", [
    ("lad", "box", "output-perturbation"), ("lad", "box", "recursive"), ("lad", "simplex", "population"),
    ("pinball", "box", "output-perturbation"), ("huber", "ball", "output-perturbation"),
    ("huber", "box", "output-perturbation"), ("huber", "simplex", "output-perturbation"),
])
def test_label_outlier_releases(loss: str, dom: str, algorithm: str) -> None:
    """One label of 1e10 (or 1e100) on a region without the exact path: released, never refused."""
    rng = np.random.default_rng(0)
    X = rng.standard_t(5.0, (60, 2))
    y = X @ np.array([0.5, -0.5]) + 0.3 * rng.standard_normal(60)
    problem = PrivateProblem(_model(loss, dom))
    for big in (1e10, -1e100):
        y2 = y.copy()
        y2[-1] = big
        res = problem.solve({"x": X, "y": y2}, epsilon=1.0, moment_k=4.0, G_k=2.0, algorithm=algorithm,
                            random_state=1)
        assert np.all(np.isfinite(res.w))


@pytest.mark.parametrize("kind", ["polytope", "polytope-localized"])
def test_per_example_on_regions_without_a_closed_form_support(kind: str) -> None:
    """A polytope's σ_U comes from one LP for all rows, whose answer for one row moves with the
    others (found by a review: one record scaled to 1e7 flipped another example's substitution).
    The reduction bounds σ_U row by row (the bounding ball), so no row moves with another."""
    from cvxdp.geometry import Polytope

    w = cp.Variable(2)
    tri = Polytope(np.array([[-1.0, 0.0], [0.0, -1.0], [1.0, 1.0]]), np.array([1.0, 1.0, 1.0]))
    region = tri if kind == "polytope" else localize(tri, np.array([0.1, 0.1]), 0.8)
    model = Model(losses.max_affine(w, 2), [w[0] >= -1, w[1] >= -1, w[0] + w[1] <= 1])
    rng = np.random.default_rng(5)
    A = rng.standard_normal((40, 2, 2))
    b = rng.standard_normal((40, 2))
    b[:20, 0] = 1e10  # dominant first pieces
    A2 = A.copy()
    A2[7] *= 1e7
    r1 = affine_reduction(model.bind({"A": A, "b": b}), region, 1.0)
    r2 = affine_reduction(model.bind({"A": A2, "b": b}), region, 1.0)
    others = np.arange(40) != 7
    assert r1.mask[:20].all()
    assert np.array_equal(r1.mask[others], r2.mask[others])
    assert list(r1.offsets[others]) == list(r2.offsets[others])


# -- the square link's level ------------------------------------------------------------------------

def _square_examples(n: int, rng: np.random.Generator, d: int = 2):
    w = cp.Variable(d)
    model = Model(losses.squared(w), [cp.norm(w, 2) <= 1.0])
    X = rng.standard_t(3.0, (n, d))
    y = X @ np.linspace(0.5, -0.5, d) + rng.standard_t(2.0, n)
    y[: n // 2] *= 10.0 ** rng.uniform(1, 40, n // 2) * rng.choice([-1.0, 1.0], n // 2)
    return model, model.bind({"x": X, "y": y})


@pytest.mark.parametrize("kind", ["box", "simplex", "box-localized"])
def test_square_substitute_equals_loss_minus_level_exactly(kind: str) -> None:
    """``c(<a,y> + b)² = c u'(u' + 2T) + κ`` in exact rationals at every point tried (any y, not only U),
    the shift is taken on the rows whose argument keeps one sign on U, and what is left is small there."""
    from cvxdp.links import ShiftedSquareLink

    rng = np.random.default_rng(11)
    _, ex = _square_examples(60, rng)
    region = _regions(2)[kind]
    red = affine_reduction(ex, region, 1.0)
    sub = red.apply(ex).glm()
    glm = ex.glm()
    assert isinstance(sub.link, ShiftedSquareLink)
    assert red.mask[:30].sum() >= 25 and np.all(sub.link.shift[~red.mask] == 0.0)
    c = Fraction(glm.link.scale)
    pts = np.concatenate([_points(region, rng, 20), 5.0 * rng.standard_normal((5, 2))])
    assert not red.rounded.any()  # regions around the origin: every subtraction b − T is exact here
    for i in range(60):
        T, b1 = Fraction(float(sub.link.shift[i])), Fraction(float(sub.b[i]))
        for y in pts:
            dot = sum((Fraction(float(s)) * Fraction(float(t)) for s, t in zip(glm.a[i], y, strict=True)),
                      Fraction(0))
            u = dot + b1
            assert c * (dot + Fraction(float(glm.b[i]))) ** 2 == c * u * (u + 2 * T) + (red.offsets[i] or 0)
    # on U the substitute is of the size of its slope times U, whatever the label
    inside = _points(region, rng, 50)
    u = inside @ sub.a.T + sub.b
    vals = sub.link.value(u)
    slope = 2.0 * glm.link.scale * (np.abs(sub.link.shift) + 3.0) * np.linalg.norm(glm.a, axis=1)
    assert np.all(np.abs(vals) <= 3.0 * slope)


def test_square_rows_that_change_sign_keep_their_label() -> None:
    """An argument that crosses zero on U has no level to drop: T = 0, the same label (the test has power:
    the same row with its label moved past the region's reach is shifted)."""
    w = cp.Variable(1)
    model = Model(losses.squared(w), [w <= 1, w >= -1])
    region = Box(-np.ones(1), np.ones(1))
    X = np.array([[2.0], [2.0], [2.0]])
    y = np.array([1.9, 2.1, -2.1])  # u = 2w − y: crosses 0 on [−1, 1] for the first only
    red = affine_reduction(model.bind({"x": X, "y": y}), region, 1.0)
    assert list(red.mask) == [False, True, True]
    sub = red.apply(model.bind({"x": X, "y": y})).glm()
    assert sub.b[0] == model.bind({"x": X, "y": y}).glm().b[0] and sub.link.shift[0] == 0.0


def test_square_level_is_per_example() -> None:
    rng = np.random.default_rng(12)
    model, ex = _square_examples(40, rng)
    glm = ex.glm()
    X = glm.a.copy()  # the loss's recovered form: u = <x, w> - y  (a = x, b = -y)
    y = -glm.b.copy()
    region = _regions(2)["box"]
    for record in (1e10, -1e100, 0.3, 1e6):
        y2 = y.copy()
        y2[7] = record
        r1 = affine_reduction(model.bind({"x": X, "y": y}), region, 1.5)
        r2 = affine_reduction(model.bind({"x": X, "y": y2}), region, 1.5)
        others = np.arange(40) != 7
        assert np.array_equal(r1.mask[others], r2.mask[others])
        s1, s2 = r1.apply(model.bind({"x": X, "y": y})).glm(), r2.apply(model.bind({"x": X, "y": y2})).glm()
        assert np.array_equal(s1.b[others], s2.b[others])
        assert np.array_equal(s1.link.shift[others], s2.link.shift[others])


def test_square_balls_keep_the_exact_path() -> None:
    rng = np.random.default_rng(13)
    _, ex = _square_examples(20, rng)
    red = affine_reduction(ex, Ball(np.zeros(2), 1.0), 1.0)
    assert red.link is None and not red.mask.any() and red.apply(ex) is ex


@pytest.mark.parametrize("kind", ["box", "box-localized"])
def test_square_brackets_agree(kind: str) -> None:
    """The shifted square substitute (κ = cT²), with labels of 3 to 20 that keep one sign on U."""
    rng = np.random.default_rng(14)
    _brackets_agree(losses.squared, rng.uniform(3, 20, 15) * rng.choice([-1, 1], 15), kind)


@pytest.mark.parametrize("dom,algorithm", [
    ("box", "output-perturbation"), ("box", "recursive"), ("box", "population"),
    ("simplex", "output-perturbation"), ("polytope", "output-perturbation"),
])
def test_square_label_outlier_releases(dom: str, algorithm: str) -> None:
    """One label of 300, 1e10 or -1e100 with a squared loss off a ball: released, never refused (every
    fit refused before, from a label of about 300 on: the level c·label² swamped the bracket)."""
    rng = np.random.default_rng(0)
    X = rng.standard_t(5.0, (60, 2))
    y = X @ np.array([0.5, -0.5]) + 0.3 * rng.standard_normal(60)
    w = cp.Variable(2)
    cons = {"box": [w <= 1, w >= -1], "simplex": [w >= 0, cp.sum(w) == 1],
            "polytope": [w[0] >= -1, w[1] >= -1, w[0] + w[1] <= 1]}[dom]
    problem = PrivateProblem(Model(losses.squared(w), cons))
    for big in (300.0, 1e10, -1e100):
        y2 = y.copy()
        y2[-1] = big
        res = problem.solve({"x": X, "y": y2}, epsilon=1.0, moment_k=4.0, G_k=2.0, algorithm=algorithm,
                            random_state=1)
        assert np.all(np.isfinite(res.w))


def test_square_rows_far_from_the_origin_are_shifted_with_their_label_rounded() -> None:
    """On a region away from 0, a record with huge features has a level of its features, and b − T is
    inexact: the row is still shifted, its label moved by at most half an ulp of b − T, and its bracket is
    as tight as an ordinary row's (found by review: left unshifted, copies of this record refused)."""
    from cvxdp.extension.record_scaling import scale_steep_records

    d = 3
    w = cp.Variable(d)
    model = Model(losses.squared(w), [w <= 3, w >= 1])
    region = Box(np.ones(d), 3.0 * np.ones(d))
    X = np.array([[-8.07957246e26, 7.16292175e24, 1.61090376e23]] * 2 + [[0.3, -0.2, 0.1]])
    y = np.array([-47445367139.7236, 0.0, 0.5])
    ex = model.bind({"x": X, "y": y})
    red = affine_reduction(ex, region, 3.77)
    assert red.mask[:2].all() and red.rounded[0] and not red.rounded[2]
    glm, sub = ex.glm(), red.apply(ex).glm()
    moved = Fraction(float(sub.b[0])) - (Fraction(float(glm.b[0])) - Fraction(float(sub.link.shift[0])))
    assert abs(moved) <= Fraction(np.finfo(float).eps) / 2 * abs(Fraction(float(sub.b[0])))
    scaled = scale_steep_records(red.apply(ex), region, 3.77).examples
    ev = LipschitzExtension(model, 3.77, region).evaluate(np.full(d, 2.0), scaled)
    # as tight as the same steep row with an exact shift (label 0), the scale of any row at the slope limit
    assert ev.gap[0] <= 2.0 * ev.gap[1] and ev.gap[0] <= 1e-8 and np.all(np.abs(ev.upper) <= 1e3)


def _far_logistic(rows):
    """Logistic records on the far box [1e6, 1e6 + 1]^3 (its translated form is what the ERM sees)."""
    from cvxdp.erm.translation import public_origin, translate_examples

    d = 3
    w = cp.Variable(d)
    model = Model(losses.logistic(w), [w <= 1e6 + 1, w >= 1e6])
    rng = np.random.default_rng(0)
    X = np.vstack([rng.standard_normal((20, d))] + [np.asarray(x, float)[None] for x, _ in rows])
    y = np.concatenate([np.sign(rng.standard_normal(20)), [lab for _, lab in rows]])
    ex = model.bind({"x": X, "y": y})
    o = public_origin(model.domain, model)
    return model, translate_examples(ex, o), model.domain.translate(o)


def test_logistic_rows_beyond_the_tail_are_carried_near_the_region():
    """u ≥ 64 on all of U: the same slope, the label nearest U keeping u ≥ 64, κ = c(b − b') exactly;
    u ≤ −64: the constant row (slope 0, label −64), κ = 0; a row that reaches (−64, 64) or whose level
    does not dominate keeps its data."""
    s = 1e4
    steep = s * np.array([1.0, -1.0, 0.5])
    # the last row's argument <x, w> is near 0 across the far box (x ⊥ the box's centre)
    _, ex, U = _far_logistic([(steep, -1.0), (steep, 1.0), ([0.3, -0.3, 0.0], 1.0)])
    red = affine_reduction(ex, U, 3.0)
    glm, sub = ex.glm(), red.apply(ex).glm()
    assert red.mask[20] and red.mask[21] and red.rounded[20] and red.rounded[21]
    # positive side: same slope, u' ≥ 64 on U, κ exact
    np.testing.assert_array_equal(sub.a[20], glm.a[20])
    lo, _ = argument_range(U, sub.a[20:21], sub.b[20:21])
    assert lo[0] >= 64.0 and sub.b[20] < glm.b[20]
    assert red.offsets[20] == Fraction(float(glm.b[20])) - Fraction(float(sub.b[20]))
    # negative side: the constant row
    assert np.all(sub.a[21] == 0.0) and sub.b[21] == -64.0 and red.offsets[21] == 0
    # a row whose argument reaches (−64, 64) is left alone
    np.testing.assert_array_equal(sub.a[22], glm.a[22])
    assert sub.b[22] == glm.b[22]
    # the substitute's loss minus the row's (less κ) is below c e^{-64} on U: here, the logistic tails
    lo_all, hi_all = argument_range(U, glm.a[20:22], glm.b[20:22])
    assert lo_all[0] >= 64 and hi_all[1] <= -64


def test_logistic_substitutes_depend_on_their_own_row_only():
    base = [(1e4 * np.array([1.0, -1.0, 0.5]), -1.0), (1e12 * np.array([1.0, 1.0, 1.0]), 1.0)]
    _, ex0, U = _far_logistic(base)
    _, ex1, _ = _far_logistic([base[0], (1e90 * np.array([-1.0, 2.0, 0.5]), -1.0)])
    r0, r1 = affine_reduction(ex0, U, 3.0), affine_reduction(ex1, U, 3.0)
    keep = np.arange(22) != 21
    s0, s1 = r0.apply(ex0).glm(), r1.apply(ex1).glm()
    np.testing.assert_array_equal(s0.a[keep], s1.a[keep])
    np.testing.assert_array_equal(s0.b[keep], s1.b[keep])
    np.testing.assert_array_equal(r0.mask[keep], r1.mask[keep])


@pytest.mark.parametrize("scale,label,third", [(1e4, 1.0, 0.5), (1e4, -1.0, 0.5), (1e12, 1.0, 0.5),
                                               (1e100, 1.0, 0.5), (1e100, -1.0, 0.5), (1e12, -1.0, 0.0098)])
def test_one_steep_logistic_record_on_a_far_box_releases(scale, label, third):
    """Found by review: x = s(1, −1, 0.5) on [1e6, 1e6 + 1]^3 made that side refuse while its neighbour
    released (the translated level 5e9 s/1e4 left a bracket far wider than α); and, with the carry's
    level factor at 2¹², so did x = 1e12(1, −1, 0.0098), whose level sat just below it."""
    w = cp.Variable(3)
    model = Model(losses.logistic(w), [w <= 1e6 + 1, w >= 1e6])
    rng = np.random.default_rng(0)
    X = rng.standard_normal((150, 3))
    y = np.sign(X @ np.ones(3) + 0.1 * rng.standard_normal(150))
    X[-1], y[-1] = scale * np.array([1.0, -1.0, third]), label
    res = PrivateProblem(model).solve({"x": X, "y": y}, epsilon=1.0, moment_k=4.0, G_k=1000.0,
                                      algorithm="output-perturbation", random_state=0)
    assert model.domain.contains(res.w, tol=1e-9)


def test_the_argument_range_shares_its_two_support_bounds_bit_for_bit():
    """``argument_range`` bounds ``σ_U(a)`` and ``σ_U(−a)`` in one go (:func:`_support_bound_both`): the same
    bits as two separate bounds, on a ball (shared terms) and a box (two calls)."""
    from cvxdp.extension.affine_reduction import _support_bound, _support_bound_both

    rng = np.random.default_rng(12)
    for region in (Ball(rng.normal(size=6), 2.5), Box(-np.ones(6), 2.0 * np.ones(6))):
        V = rng.standard_t(2, size=(400, 6)) * 10.0 ** rng.integers(-80, 80, size=(400, 1))
        V[::9] = 0.0
        scale = np.linalg.norm(V, axis=1)
        up, down = _support_bound_both(region, V, scale)
        for got, want in ((up, _support_bound(region, V, scale)), (down, _support_bound(region, -V, scale))):
            assert np.array_equal(got, want)
            assert got[got != 0].tobytes() == want[got != 0].tobytes()
