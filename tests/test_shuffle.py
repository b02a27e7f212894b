"""The public shuffle of Algorithm 1's batches (``cvxdp.run.shuffle``)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from cvxdp.privacy.random import SeededRandom
from cvxdp.run.shuffle import PublicShuffle


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 5000), keys=st.tuples(*[st.integers(0, 2**64 - 1)] * 4))
def test_positions_are_a_bijection_of_the_rows(n, keys):
    s = PublicShuffle(n, keys)
    pos = s.positions(np.arange(n))
    assert np.array_equal(np.sort(pos), np.arange(n))
    order = s.order()
    assert np.array_equal(order[pos], np.arange(n))


def test_a_rows_position_depends_on_its_index_n_and_the_keys_only():
    """Computed row by row: any subset of rows (a partition) gets the positions it has in the whole."""
    s = PublicShuffle(100_003, (5, 6, 7, 8))
    whole = s.positions(np.arange(100_003))
    for a, b in ((0, 10), (777, 31_000), (99_000, 100_003)):
        assert np.array_equal(s.positions(np.arange(a, b)), whole[a:b])
    assert np.array_equal(s.rows_in(np.arange(500, 900), 1000, 50_000),
                          (whole[500:900] >= 1000) & (whole[500:900] < 50_000))
    with pytest.raises(ValueError):
        s.positions(np.array([100_003]))


def test_batches_are_as_large_as_planned_and_cover_every_row_once():
    n = 12_345
    s = PublicShuffle.draw(SeededRandom(1), n)
    bounds = [0, 6000, 9000, 10_500, n]
    rows = np.arange(n)
    masks = [s.rows_in(rows, a, b) for a, b in itertools.pairwise(bounds)]
    assert [int(m.sum()) for m in masks] == [b - a for a, b in itertools.pairwise(bounds)]
    assert np.array_equal(np.sum(masks, axis=0), np.ones(n))


def test_the_shuffle_breaks_the_order_of_the_rows():
    """Statistical check with power: the batch of a row is independent of where the row sits (a sorted data
    set does not give a phase one end of it).  Rows' positions are uniform (Kolmogorov–Smirnov) and their
    rank correlation with the index is nil; a shuffle that kept the order would fail both."""
    n = 200_000
    pos = PublicShuffle.draw(SeededRandom(7), n).positions(np.arange(n))
    first = pos[: n // 10] / n  # the first tenth of the rows spreads over every position
    assert stats.kstest(first, "uniform").pvalue > 1e-3
    assert abs(stats.spearmanr(np.arange(n), pos).statistic) < 0.01
    identity = np.arange(n)[: n // 10] / n
    assert stats.kstest(identity, "uniform").pvalue < 1e-10  # power


def test_different_keys_give_different_shuffles():
    n = 1000
    a = PublicShuffle.draw(SeededRandom(1), n).positions(np.arange(n))
    b = PublicShuffle.draw(SeededRandom(2), n).positions(np.arange(n))
    assert np.mean(a == b) < 0.02  # about 1/n by chance
