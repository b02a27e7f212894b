"""Examples held in partitions (``cvxdp.run.partitions``), in this process (PartitionedExecutor).

Checked: every accepted form of data binds to the same rows; validation happens before anything is
charged; the tail histogram's counts and the batches' rows are those of the serial fit, whatever the
partitioning; a partitioned fit equals the serial fit within the certified accuracy, with the same plan
and ledger.
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp.error import DataError
from cvxdp.privacy.random import SeededRandom
from cvxdp.privacy.tail import tail_counts, tail_edges
from cvxdp.run.executor import PartitionedExecutor
from cvxdp.run.partitions import Partitions, partition_tail_counts
from cvxdp.run.shuffle import PublicShuffle

pytestmark = [pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning"),
              pytest.mark.filterwarnings("ignore::cvxdp.error.UtilityWarning")]


def _lad(n: int = 900, d: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_t(3, size=(n, d))
    y = X @ (rng.normal(size=d) / 2) + rng.standard_t(3, size=n)
    w = cp.Variable(d)
    return cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0]), {"x": X, "y": y}


@pytest.mark.parametrize("form", ["mapping", "list", "dask-arrays", "dask-delayed", "dask-dataframe"])
def test_every_form_of_data_binds_the_same_rows_in_order(form):
    model, data = _lad(500)
    ex = PartitionedExecutor(3)
    if form == "mapping":
        given = data
    elif form == "list":
        given = [{k: v[a:b] for k, v in data.items()} for a, b in ((0, 120), (120, 121), (121, 500))]
    elif form == "dask-arrays":
        da = pytest.importorskip("dask.array")
        given = {"x": da.from_array(data["x"], chunks=(130, 2)), "y": da.from_array(data["y"], chunks=130)}
    elif form == "dask-delayed":
        dask = pytest.importorskip("dask")
        given = [dask.delayed(dict)(x=data["x"][a:b], y=data["y"][a:b]) for a, b in ((0, 300), (300, 500))]
    else:
        pd = pytest.importorskip("pandas")
        dd = pytest.importorskip("dask.dataframe")
        frame = pd.DataFrame(data["x"], columns=["a", "b", "c"]).assign(label=data["y"])
        ddf = dd.from_pandas(frame, npartitions=4)
        given = {"x": ddf[["a", "b", "c"]], "y": ddf["label"]}
    parts = Partitions.from_data(model, given, ex)
    assert parts.n == 500 and sum(parts.sizes) == 500
    assert parts.starts == [0, *np.cumsum(parts.sizes)[:-1].tolist()]
    x_param = model.loss.placeholders["x"]
    got = np.concatenate([h.examples.arrays[h.model.loss.placeholders["x"]] for h in parts.handles])
    assert np.array_equal(got, data["x"]) and x_param is not None


def test_invalid_data_is_refused_where_it_lives_before_anything_is_charged():
    model, data = _lad(200)
    bad = {k: v.copy() for k, v in data.items()}
    bad["y"][150] = np.nan
    with pytest.raises(DataError, match="finite"):
        Partitions.from_data(model, bad, PartitionedExecutor(4))
    acc = cvxdp.BudgetAccountant(10.0)
    with pytest.raises(DataError):
        cvxdp.PrivateProblem(model).solve(bad, epsilon=1.0, moment_k=4.0, G_k=3.0, random_state=0,
                                          executor=PartitionedExecutor(4), accountant=acc)


@pytest.mark.parametrize("count", [1, 2, 7])
def test_tail_counts_add_up_exactly_to_the_serial_counts(count):
    model, data = _lad(700)
    rng = np.random.default_rng(3)
    data["x"][rng.integers(0, 700, 20)] *= 1e6  # a heavy tail across several bins
    edges = tail_edges(1e-3, 1e9, 2)
    serial = tail_counts(model, model.bind(data), edges)
    parts = Partitions.from_data(model, data, PartitionedExecutor(count))
    assert np.array_equal(np.sum(parts.map(partition_tail_counts, edges), axis=0), serial)


@pytest.mark.parametrize("count", [1, 3, 8])
def test_a_batch_holds_the_serial_batchs_rows_in_row_order(count):
    model, data = _lad(1000)
    shuffle = PublicShuffle.draw(SeededRandom(11), 1000)
    order = shuffle.order()
    parts = Partitions.from_data(model, data, PartitionedExecutor(count))
    for low, high in ((0, 500), (500, 750), (750, 1000)):
        batch = parts.batch(shuffle, low, high)
        assert batch.n == high - low
        rows = np.sort(order[low:high])
        got = np.concatenate([h.examples.arrays[h.model.loss.placeholders["y"]] for h in batch.handles])
        assert np.array_equal(got, data["y"][rows])


@pytest.mark.parametrize("algorithm", ["output-perturbation", "population"])
@pytest.mark.parametrize("count", [1, 4])
def test_a_partitioned_fit_equals_the_serial_fit_within_the_certified_accuracy(algorithm, count):
    model, data = _lad(1500, seed=4)
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=3.0, random_state=0, diagnostics=True, algorithm=algorithm)
    serial = cvxdp.PrivateProblem(model).solve(data, **kw)
    parted = cvxdp.PrivateProblem(model).solve(data, executor=PartitionedExecutor(count), **kw)
    assert [s.plan for s in parted.steps] == [s.plan for s in serial.steps]
    assert all(s.certificate.gap <= s.plan.alpha for s in parted.steps)
    assert parted.ledger.spent == serial.ledger.spent <= 1.0
    assert [e.n_examples for e in parted.ledger.entries] == [e.n_examples for e in serial.ledger.entries]
    last = parted.steps[-1], serial.steps[-1]
    reach = (sum(math.sqrt(2 * s.certificate.gap / s.lam) for s in last)
             + 2 * last[0].plan.mechanism().snap_radius)
    assert float(np.linalg.norm(parted.w - serial.w)) <= reach + 1e-12


def _mixed_model():
    """A piecewise-linear loss whose rows are generalized linear unless ``x2`` differs from ``x``."""
    d = 3
    w = cp.Variable(d)
    x1, x2, y = cp.Parameter(d, name="x"), cp.Parameter(d, name="x2"), cp.Parameter(name="y")
    loss = cvxdp.Loss(cp.maximum(0.8 * (y - x1 @ w), 0.2 * (x2 @ w - y)), w, data={"x": x1, "x2": x2, "y": y})
    return cvxdp.Model(loss, [cp.norm(w, 2) <= 1.0])


@pytest.mark.parametrize("steep", [False, True])
def test_a_generalized_linear_rows_form_and_pieces_do_not_depend_on_the_rows_beside_it(steep):
    """Found by review: (1) a generalized-linear row's pieces were its recovered coefficients in a batch with
    a row that is not generalized linear, but read off its form in a batch without one (the pieces released);
    (2) a steep such neighbour made the record scaling re-derive every row's form from the pieces.  Now a
    generalized-linear row's form, pieces, reduction and offsets are the same bits in any batch and any
    partition."""
    from cvxdp.erm.problem import RegularizedERM
    from cvxdp.geometry import Ball, Lens
    from cvxdp.run.partitions import compact

    model = _mixed_model()
    rng = np.random.default_rng(0)
    n = 12
    X = rng.normal(size=(n, 3)) * np.array([1.0, 3.7, 0.01])
    Y = rng.normal(size=n) * 0.3
    Y[:3] *= 1e12  # huge labels: the affine reduction substitutes them
    X2 = X.copy()
    X2[-1] = rng.normal(size=3) * (1e9 if steep else 1.0)  # the last row is not generalized linear
    data = {"x": X, "x2": X2, "y": Y}
    for region in (Ball(np.zeros(3), 1.0), Lens(Ball(np.zeros(3), 1.0), Ball(np.full(3, 0.2), 0.7))):
        seen = []
        for rows in (slice(None), slice(0, n - 1)):
            ex = model.bind({k: v[rows] for k, v in data.items()})
            compact(model, ex)
            prob = RegularizedERM(model, ex, region, 1.0, 0.3, np.asarray(region.interior_point(), float))
            g = prob.examples.glm()
            A, b = prob.examples.pieces()
            seen.append((g.a[: n - 1], g.link.slopes[: n - 1], g.link.intercepts[: n - 1], A[: n - 1],
                         b[: n - 1], prob.reduction.mask[: n - 1], [str(o) for o in prob.offsets[: n - 1]]))
        assert prob.reduction.mask[:3].all()
        for first, second in zip(*seen, strict=True):
            if isinstance(first, list):
                assert first == second
            else:
                assert np.array_equal(first, second)
    parts = Partitions.from_data(model, data, PartitionedExecutor(2))
    whole = model.bind(data)
    compact(model, whole)
    A_all, _ = whole.pieces()
    A_p0, _ = parts.handles[0].examples.pieces()  # the first partition holds generalized-linear rows only
    assert np.array_equal(A_p0, A_all[: parts.sizes[0]])


def test_a_far_ball_translates_a_piecewise_linear_row_with_exact_pieces():
    """Found by review: translated in its generalized-linear form with the shift in ``b``, a row's pieces
    read off the form had intercepts ``fl(κ b + e)`` that missed the form by about ``ε |κ| ||o||`` (10⁻⁴ at a
    centre of 10¹²), so the joint program certified lower bounds above the minimum (here a centre of 10⁶,
    where the translation still leaves room for an α of 10⁻⁶).  The shift now goes
    into the link's intercepts: the pieces' intercepts are the form's, exactly, and the joint program's
    certificate on a far ball is valid and tight."""
    from fractions import Fraction

    from cvxdp.erm import ERMSettings, solve_certified
    from cvxdp.erm.translation import TranslatedERM, regularized_erm, translate_examples

    centre = 1e6
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.pinball(w, 0.8), [cp.norm(w - centre, 2) <= 1.0])
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2)) * 0.7
    Y = np.einsum("md,md->m", X, centre + rng.normal(size=(40, 2)) * 0.5) + rng.normal(size=40) * 0.3
    ex = model.bind({"x": X, "y": Y})
    moved = translate_examples(ex, np.full(2, centre), True)
    g = moved.glm()
    _, b = moved.pieces()
    assert np.all(g.b == 0) and np.array_equal(b, np.broadcast_to(g.link.intercepts, b.shape))
    problem = regularized_erm(model, ex, model.domain, 3.0, 0.5, model.domain.interior_point(), alpha=1e-6)
    assert isinstance(problem, TranslatedERM)
    inner = problem.inner
    w_c, cert = solve_certified(problem, 1e-6, ERMSettings(method="conic", refine=False))
    assert cert.gap <= 1e-6 and cert.method.startswith("translated(clarabel")
    # the joint program's cut lies below the exact objective of the certified form, at random points of U
    from cvxdp.erm.joint import solve_joint

    cut = solve_joint(inner, ERMSettings().conic).cut
    kap = np.broadcast_to(g.link.slopes, b.shape)
    for v in inner.region.make_feasible(rng.normal(size=(20, 2)) * 0.5):
        fv = sum(max(Fraction(float(kap[i, j])) * sum(Fraction(float(g.a[i, t])) * Fraction(float(v[t]))
                                                      for t in range(2)) + Fraction(float(b[i, j]))
                     for j in range(2)) for i in range(40)) / 40
        lower = sum(Fraction(float(cut.g[t])) * Fraction(float(v[t])) for t in range(2))
        assert lower + Fraction(float(cut.beta)) <= fv  # C = 3 exceeds every row's slope: f_{C,U} = f on U
    assert np.linalg.norm(w_c - centre) <= 1.0 + 1e-9


@pytest.mark.parametrize("count", [1, 3])
def test_a_partitioned_fit_from_subsample_starts_equals_the_serial_fit(monkeypatch, count):
    """With the subsample start on (its threshold lowered to these rows), the partitioned problem's
    subsample is every 8th row of each partition: another route, and still the serial fit's plan and
    ledger, with the released point within the certified accuracy."""
    import cvxdp.erm.bundle as bundle_module

    monkeypatch.setattr(bundle_module, "WARM_ROWS", 400)
    model, data = _lad(1500, seed=4)
    kw = dict(epsilon=1.0, moment_k=4.0, G_k=3.0, random_state=0, diagnostics=True, algorithm="population")
    serial = cvxdp.PrivateProblem(model).solve(data, **kw)
    parted = cvxdp.PrivateProblem(model).solve(data, executor=PartitionedExecutor(count), **kw)
    assert any("subsample" in s.certificate.method for s in parted.steps)
    assert any("subsample" in s.certificate.method for s in serial.steps)
    assert [s.plan for s in parted.steps] == [s.plan for s in serial.steps]
    assert all(s.certificate.gap <= s.plan.alpha for s in parted.steps)
    assert parted.ledger.spent == serial.ledger.spent <= 1.0
    last = parted.steps[-1], serial.steps[-1]
    reach = (sum(math.sqrt(2 * s.certificate.gap / s.lam) for s in last)
             + 2 * last[0].plan.mechanism().snap_radius)
    assert float(np.linalg.norm(parted.w - serial.w)) <= reach + 1e-12


@pytest.mark.parametrize("count", [1, 3])
def test_a_partitioned_subsample_is_every_eighth_row_of_each_partition(count):
    """``PartitionedERM.subsample`` keeps rows 0, 8, 16, … of each partition where it lives: its passes
    equal a serial problem's on exactly those rows (to the sums' rounding), at several points."""
    from cvxdp.erm.partitioned import PartitionedERM
    from cvxdp.erm.problem import RegularizedERM

    model, data = _lad(1000, seed=2)
    examples = model.bind(data)
    parts = Partitions.from_examples(model, examples, PartitionedExecutor(count), count)
    U, w0 = model.domain, np.zeros(3)
    sub = PartitionedERM(model, parts, U, 1.5, 0.1, w0).subsample(8)
    rows = np.concatenate([block[::8] for block in np.array_split(np.arange(1000), count)])
    serial = RegularizedERM(model, examples.subset(rows), U, 1.5, 0.1, w0)
    assert sub.m == serial.m == rows.size
    rng = np.random.default_rng(3)
    for point in U.make_feasible(rng.normal(size=(4, 3))):
        (up_p, cut_p), (up_s, cut_s) = sub.upper_and_cut(point, 1e-10), serial.upper_and_cut(point, 1e-10)
        assert abs(up_p - up_s) <= 1e-9 * (1.0 + abs(up_s))
        np.testing.assert_allclose(cut_p.g, cut_s.g, rtol=1e-9, atol=1e-12)


def test_sorting_holds_no_unsorted_partition_once_its_sorted_copy_is_made():
    """``Partitions.sort_by`` hands each unsorted partition to its sorting task and keeps no other
    reference, so an executor frees it as soon as its sorted copy exists (on a cluster worker holding
    many partitions, all the unsorted forms alive until the end set the peak memory).  Each partition
    keeps its own rows, in the order of their shuffled positions."""
    import gc
    import weakref

    from cvxdp.run.executor import placed_value

    seen: list[list[bool]] = []

    class Watching(PartitionedExecutor):
        def place(self, fn, arguments):
            out, refs = [], []
            for args in arguments:
                refs.append(weakref.ref(placed_value(args[0])))
                out.append(fn(*args))
                del args
                gc.collect()
                seen.append([r() is not None for r in refs])
            return out

    model, data = _lad(1000, seed=4)
    parts = Partitions.from_data(model, data, Watching(3))
    shuffle = PublicShuffle.draw(SeededRandom(5), 1000)
    seen.clear()  # binding placed partitions too
    parts.sort_by(shuffle)
    assert seen == [[False], [False, False], [False, False, False]]
    for handle in parts.handles:  # each partition's own rows, in the order of their shuffled positions
        rows = np.arange(handle.start, handle.start + handle.m)
        rows = rows[np.argsort(shuffle.positions(rows), kind="stable")]
        assert np.array_equal(handle.examples.arrays[handle.model.loss.placeholders["y"]], data["y"][rows])
    assert sum(h.m for h in parts.handles) == 1000
