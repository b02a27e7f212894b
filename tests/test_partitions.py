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
