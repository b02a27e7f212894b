"""The smoothed Newton start of the bundle method (``cvxdp.erm.smoothed_start``): the smoothing as math,
the sums as sums, and the start as a route that never changes what is certified."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_erm import _problem

import cvxdp.erm.bundle as bundle_module
import cvxdp.erm.smoothed_start as smoothed_module
from cvxdp.erm import ERMSettings, bundle_method
from cvxdp.erm.partitioned import PartitionedERM
from cvxdp.erm.problem import RegularizedERM
from cvxdp.erm.smoothed_start import SmoothingRows, smoothed_newton_start, smoothed_row_sums
from cvxdp.error import ParameterError
from cvxdp.run.executor import PartitionedExecutor
from cvxdp.run.partitions import Partitions


def _rows(rng, m=400, d=3):
    a = rng.standard_t(3.0, size=(m, d))
    low = -rng.uniform(0.0, 1.0, m)
    high = rng.uniform(0.0, 1.0, m)
    return a, SmoothingRows(rng.normal(size=m), low, high, np.full(m, np.inf))


def _sliced(rows, part):
    return SmoothingRows(rows.shift[part], rows.low[part], rows.high[part], rows.span[part])


def _psi(t, low, high, mu):
    s = t / mu
    q = np.clip(s, low, high)
    return np.where((s > low) & (s < high), t * t / (2 * mu), q * t - q * q * mu / 2)


def test_the_smoothing_is_a_minorant_within_its_width_of_the_clipped_link(rng):
    """``0 ≤ max(ℓt, ht) − ψ_μ(t) ≤ max(ℓ², h²) μ/2`` (the Moreau envelope's bound), and the bound is
    attained at the breakpoints ``t = ℓμ, hμ`` — the test has power on both sides."""
    low, high = -rng.uniform(0.1, 2.0, 500), rng.uniform(0.1, 2.0, 500)
    for mu in (1e-3, 0.3, 7.0):
        t = rng.normal(scale=3 * mu, size=500)
        gap = np.maximum(low * t, high * t) - _psi(t, low, high, mu)
        assert np.all(gap >= -1e-12 * (1 + np.abs(t)))
        assert np.all(gap <= np.maximum(low**2, high**2) * mu / 2 * (1 + 1e-12) + 1e-15)
        at = high * mu
        np.testing.assert_allclose(high * at - _psi(at, low, high, mu), high**2 * mu / 2, rtol=1e-9)


def test_the_sums_are_the_value_gradient_and_hessian_of_the_smoothed_loss(rng):
    """``Σψ'a`` against central differences of ``Σψ``, and ``Σψ''aaᵀ`` against differences of the
    gradient (the step is far below μ times the rows' distance to their breakpoints, which we check)."""
    a, rows = _rows(rng)
    mu, w, h = 0.5, rng.normal(size=3) * 0.3, 1e-6
    base = smoothed_row_sums(a, rows, w, mu)
    t = a @ w + rows.shift
    breaks = np.concatenate([np.abs(t - rows.low * mu), np.abs(t - rows.high * mu)])
    assert float(np.min(breaks)) > 10 * h * float(np.max(np.linalg.norm(a, axis=1)))
    np.testing.assert_allclose(base.value, float(np.sum(_psi(t, rows.low, rows.high, mu))), rtol=1e-12)
    for k in range(3):
        e = np.zeros(3)
        e[k] = h
        up, down = smoothed_row_sums(a, rows, w + e, mu), smoothed_row_sums(a, rows, w - e, mu)
        assert abs((up.value - down.value) / (2 * h) - base.gradient[k]) <= 1e-5 * (1 + abs(base.gradient[k]))
        np.testing.assert_allclose((up.gradient - down.gradient) / (2 * h), base.hessian[:, k],
                                   rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(base.hessian, base.hessian.T, rtol=0, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(base.hessian) >= -1e-9)


def test_a_row_left_out_contributes_nothing_and_the_sums_add_over_partitions(rng):
    """A row with ``ℓ = h = 0`` adds 0 to every sum; the sums of two halves are the sums of the whole."""
    a, rows = _rows(rng)
    w, mu = rng.normal(size=3), 0.2
    whole = smoothed_row_sums(a, rows, w, mu)
    halves = (slice(0, 150), slice(150, None))
    first, second = (smoothed_row_sums(a[s], _sliced(rows, s), w, mu) for s in halves)
    total = smoothed_module.SmoothedSums.total([first, second])
    np.testing.assert_allclose(total.value, whole.value, rtol=1e-12)
    np.testing.assert_allclose(total.gradient, whole.gradient, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(total.hessian, whole.hessian, rtol=1e-12, atol=1e-12)
    out = SmoothingRows(rows.shift, np.where(np.arange(400) < 200, rows.low, 0.0),
                        np.where(np.arange(400) < 200, rows.high, 0.0), rows.span)
    part = smoothed_row_sums(a, out, w, mu)
    head = smoothed_row_sums(a[:200], _sliced(rows, slice(0, 200)), w, mu)
    np.testing.assert_allclose(part.gradient, head.gradient, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(part.value, head.value, rtol=1e-12)


@pytest.mark.parametrize("loss", ["absolute", "hinge"])
def test_the_start_lands_near_the_certified_minimizer_and_saves_passes(rng, loss):
    """On a problem whose cold bundle run needs many passes, the smoothed start is twenty times nearer the
    certified minimizer than the regularizer's centre it started from (``S_μ``'s minimizers tend to
    ``F``'s as ``μ → 0``), and the run from it certifies α in fewer passes; both runs' points are
    α-minimizers of one ``F``."""
    problem, _ = _problem(rng, loss=loss, m=3000, d=5, C=50.0, lam=0.02, region="W")
    alpha = 1e-8
    cold = bundle_method(problem, alpha, problem.w0, warm_start=False)
    warm = bundle_method(problem, alpha, problem.w0, smooth_rows=1000)
    assert warm.smoothed_passes > 0 and cold.smoothed_passes == 0
    start = smoothed_newton_start(problem, problem.w0)
    far = float(np.linalg.norm(problem.w0 - cold.w))
    assert far > 0.1  # the start had somewhere to go
    assert float(np.linalg.norm(start.w - cold.w)) <= far / 20
    assert warm.iterations < cold.iterations
    for res in (cold, warm):
        assert res.upper - res.lower <= alpha
    bound = math.sqrt(2 * (cold.upper - cold.lower) / problem.lam) + math.sqrt(
        2 * (warm.upper - warm.lower) / problem.lam)
    assert float(np.linalg.norm(cold.w - warm.w)) <= bound * (1 + 1e-9) + 1e-12


def test_no_smoothing_for_a_smooth_link_and_the_subsample_start_stays(rng, monkeypatch):
    """A Huber loss has no two-piece form: ``smoothed_sums`` answers ``None`` and the bundle method
    starts as before (the subsample start where its threshold says)."""
    problem, _ = _problem(rng, loss="huber", m=300, region="W")
    assert problem.smoothed_sums(problem.w0, 1.0) is None
    assert smoothed_newton_start(problem, problem.w0) is None
    monkeypatch.setattr(bundle_module, "WARM_ROWS", 200)
    res = bundle_method(problem, 1e-8, problem.w0, smooth_rows=16)
    assert res.smoothed_passes == 0 and res.warm_passes > 0 and res.upper - res.lower <= 1e-8


@pytest.mark.parametrize("failure", ["raise", "nan-first", "nan-later"])
def test_a_failing_smoothed_start_changes_nothing_that_is_certified(rng, monkeypatch, failure):
    """Whatever the smoothed search meets — an exception, a NaN sum on its first pass or later — the
    bundle method still certifies α: from the given start (exception, or no point at all) or from the
    last good point."""
    problem, _ = _problem(rng, loss="absolute", m=600, region="W")
    real = type(problem).smoothed_sums
    calls = []

    def broken(self, w, mu):
        calls.append(mu)
        if failure == "raise":
            raise FloatingPointError("the smoothed pass failed")
        out = real(self, w, mu)
        if failure == "nan-first" or len(calls) > 4:
            return smoothed_module.SmoothedSums(math.nan, out.gradient * math.nan, out.hessian,
                                                 math.nan if failure == "nan-first" else out.abs_residual)
        return out

    monkeypatch.setattr(type(problem), "smoothed_sums", broken)
    res = bundle_method(problem, 1e-8, problem.w0, smooth_rows=16)
    assert calls and res.upper - res.lower <= 1e-8
    assert (res.smoothed_passes > 0) == (failure == "nan-later")
    if failure == "nan-first":
        assert smoothed_newton_start(problem, problem.w0) is None


@pytest.mark.parametrize("count", [1, 3])
def test_partitioned_smoothed_sums_equal_the_serial_ones(rng, count):
    """The partitions' sums, added at the driver, are the serial problem's (to the additions' rounding)."""
    problem, data = _problem(rng, loss="hinge", m=900, region="W")
    executor = PartitionedExecutor(count)
    parts = Partitions.from_data(problem.model, data, executor)
    parted = PartitionedERM(problem.model, parts, problem.region, problem.C, problem.lam, problem.w0)
    for mu in (1.0, 1e-3):
        w = problem.region.make_feasible(rng.normal(size=(1, problem.dim)))[0]
        mine, theirs = problem.smoothed_sums(w, mu), parted.smoothed_sums(w, mu)
        np.testing.assert_allclose(theirs.value, mine.value, rtol=1e-12)
        np.testing.assert_allclose(theirs.gradient, mine.gradient, rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(theirs.hessian, mine.hessian, rtol=1e-11, atol=1e-9)


@pytest.mark.parametrize("count", [1, 3])
def test_strided_sums_are_the_sums_of_every_strided_row(rng, count):
    """``smoothed_sums(w, μ, s)`` sums every ``s``-th row from the first, serially exactly the rows'
    ``smoothed_row_sums``, and over partitions every partition's own ``s``-th rows, counted."""
    problem, data = _problem(rng, loss="hinge", m=900, region="W")
    lean = problem._tight_pass_data()
    w = problem.region.make_feasible(rng.normal(size=(1, problem.dim)))[0]
    problem.smoothed_sums(w, 1.0)  # builds the smoothing rows
    for stride in (1, 7):
        mine = problem.smoothed_sums(w, 0.3, stride)
        rows = slice(0, None, stride)
        want = smoothed_row_sums(np.ascontiguousarray(lean.a[rows]), lean.smoothing.subset(rows), w, 0.3)
        assert mine.rows == len(range(0, 900, stride)) == want.rows
        assert mine.value == want.value
        np.testing.assert_array_equal(mine.gradient, want.gradient)
        np.testing.assert_array_equal(mine.hessian, want.hessian)
    parts = Partitions.from_data(problem.model, data, PartitionedExecutor(count))
    parted = PartitionedERM(problem.model, parts, problem.region, problem.C, problem.lam, problem.w0)
    theirs = parted.smoothed_sums(w, 0.3, 7)
    starts = np.r_[0, np.cumsum(parts.sizes)]
    picked = np.concatenate([np.arange(a, b, 7) for a, b in itertools.pairwise(starts)])
    want = smoothed_row_sums(lean.a[picked], lean.smoothing.subset(picked), w, 0.3)
    assert theirs.rows == picked.size
    np.testing.assert_allclose(theirs.value, want.value, rtol=1e-12)
    np.testing.assert_allclose(theirs.gradient, want.gradient, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(theirs.hessian, want.hessian, rtol=1e-11, atol=1e-9)


def test_the_first_stages_run_on_strided_rows_and_the_start_still_lands(rng, monkeypatch):
    """Where every ``COARSE_STRIDE``-th row leaves at least ``COARSE_ROWS`` rows, the width's pass and the
    first ``COARSE_STAGES`` stages sum those rows only and the later stages all rows; the start still lands
    twenty times nearer the certified minimizer than the centre (and where too few rows would be left,
    every pass sums all rows)."""
    problem, _ = _problem(rng, loss="absolute", m=3000, d=5, C=5.0, lam=0.05, region="W")
    real = type(problem).smoothed_sums
    calls = []

    def spy(self, w, mu, stride=1):
        calls.append((mu, stride))
        return real(self, w, mu, stride)

    monkeypatch.setattr(type(problem), "smoothed_sums", spy)
    cold = bundle_method(problem, 1e-8, problem.w0, warm_start=False)
    for rows, coarse in ((3000 // smoothed_module.COARSE_STRIDE, True), (3001, False)):
        monkeypatch.setattr(smoothed_module, "COARSE_ROWS", rows)
        calls.clear()
        start = smoothed_newton_start(problem, problem.w0)
        assert float(np.linalg.norm(start.w - cold.w)) <= float(np.linalg.norm(problem.w0 - cold.w)) / 20
        widths = [mu for mu, _ in calls]
        stage = [0] + [sorted(set(widths[1:]), reverse=True).index(mu) for mu in widths[1:]]
        for (mu, stride), k in zip(calls, stage, strict=True):
            expect = smoothed_module.COARSE_STRIDE if coarse and k < smoothed_module.COARSE_STAGES else 1
            assert stride == expect, (mu, k)
        assert {s for _, s in calls} == ({1, smoothed_module.COARSE_STRIDE} if coarse else {1})
        # the public knob (ERMSettings.smoothed_coarse_rows) takes the same route as the module default
        seen = list(calls)
        monkeypatch.setattr(smoothed_module, "COARSE_ROWS", 10**9)
        calls.clear()
        again = smoothed_newton_start(problem, problem.w0, coarse_rows=rows)
        assert calls == seen and np.array_equal(again.w, start.w)


def test_smoothed_start_rows_is_validated():
    for bad in (0, -3, 2.5, "1e6"):
        with pytest.raises(ParameterError):
            ERMSettings(smoothed_start_rows=bad)
        with pytest.raises(ParameterError):
            ERMSettings(smoothed_coarse_rows=bad)
    assert ERMSettings(smoothed_start_rows=10).smoothed_start_rows == 10
    assert ERMSettings(smoothed_coarse_rows=7).smoothed_coarse_rows == 7


def test_the_hessian_in_blocks_is_the_hessian(rng, monkeypatch):
    """The Hessian accumulated a block of rows at a time (temporaries of a block's size) is the one of
    all rows at once, to the additions' rounding."""
    a, rows = _rows(rng)
    w = rng.normal(size=3)
    whole = smoothed_row_sums(a, rows, w, 0.3)
    monkeypatch.setattr(smoothed_module, "BLOCK", 37)
    blocked = smoothed_row_sums(a, rows, w, 0.3)
    np.testing.assert_allclose(blocked.hessian, whole.hessian, rtol=1e-12, atol=1e-12)
    assert np.any(whole.hessian != 0)


def test_a_row_whose_kink_is_far_outside_u_does_not_set_the_width(rng):
    """One row with features 10⁻⁵⁰ and label 1 (its residual 10⁴⁹ and more, but affine on ``U``) made the
    first width so large that no stage moved (found by review): its residual is capped at
    ``||a|| diam U``, and the start lands as near the minimizer as without that row."""
    problem, data = _problem(rng, loss="absolute", m=3000, d=5, C=5.0, lam=0.2, region="W")
    data = {k: np.array(v, copy=True) for k, v in data.items()}
    data["x"][-1], data["y"][-1] = 1e-50, 1.0
    far = type(problem)(problem.model, problem.model.bind(data), problem.region, problem.C, problem.lam,
                        problem.w0)
    for p in (problem, far):
        cold = bundle_method(p, 1e-8, p.w0, warm_start=False)
        start = smoothed_newton_start(p, p.w0)
        assert float(np.linalg.norm(start.w - cold.w)) <= float(np.linalg.norm(p.w0 - cold.w)) / 20


def test_no_step_taken_means_no_start(rng, monkeypatch):
    """A search that never moves returns ``None`` (the subsample start may then run) instead of the
    given point dressed as a start."""
    problem, _ = _problem(rng, loss="hinge", m=600, region="W")
    monkeypatch.setattr(smoothed_module, "ARMIJO", np.inf)  # no step passes the decrease test
    assert smoothed_newton_start(problem, problem.w0) is None


def test_a_partition_whose_sums_fail_answers_none_on_its_worker(rng, monkeypatch):
    """The worker-side task is total: an exception in a partition's sums becomes ``None`` there (a failed
    Dask task would be logged on its worker), and the start then falls back at the driver."""
    from cvxdp.erm import partitioned

    problem, data = _problem(rng, loss="hinge", m=900, region="W")
    parts = Partitions.from_data(problem.model, data, PartitionedExecutor(3))
    parted = PartitionedERM(problem.model, parts, problem.region, problem.C, problem.lam, problem.w0)

    def broken(self, w, mu):
        raise FloatingPointError("a partition's pass failed")

    monkeypatch.setattr(RegularizedERM, "smoothed_sums", broken)
    assert partitioned._smoothed(problem, problem.w0, 1.0) is None
    assert parted.smoothed_sums(problem.w0, 1.0) is None
    assert smoothed_newton_start(parted, problem.w0) is None


class _Quadratic:
    """A stand-in problem whose smoothed sums are an exact quadratic ``½||w − c||²`` per row: Newton's
    first step lands on each stage's minimizer."""

    def __init__(self, m: int = 50, d: int = 3) -> None:
        from cvxdp.geometry import Ball

        self.m, self.lam, self.w0 = m, 1.0, np.zeros(d)
        self.feasible_set = Ball(np.zeros(d), 10.0)
        self.c = np.linspace(0.1, 0.3, d)
        self.calls = 0

    def smoothed_sums(self, w, mu):
        self.calls += 1
        r = np.asarray(w) - self.c
        if math.isinf(mu):
            zero = np.zeros((r.size, r.size))
            return smoothed_module.SmoothedSums(0.0, np.zeros(r.size), zero, self.m * 1.0)
        return smoothed_module.SmoothedSums(0.5 * self.m * float(r @ r), self.m * r, self.m * np.eye(r.size),
                                            0.0)


def test_a_converged_stage_spends_no_trial_pass():
    """Once Newton's decrement is at the objective's rounding, no trial can show a decrease: the stage
    ends without one.  Here the first stage's first step lands on the minimizer of every stage (the sums do
    not depend on the width): that stage costs its sums and one trial, every later stage its sums only —
    without the rule each stage would try one more, empty step (12 passes instead of 7)."""
    problem = _Quadratic()
    start = smoothed_newton_start(problem, problem.w0)
    assert start is not None
    np.testing.assert_allclose(start.w, problem.c / 2.0, rtol=1e-12)  # argmin ½||w − c||² + ½||w||²
    assert start.passes == problem.calls == 1 + 2 + (smoothed_module.STAGES - 1)
