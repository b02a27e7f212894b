"""The data layer of a private fit: the tail release, the plan, the pre-flight charges, the phases.

:meth:`PrivateProblem.solve <cvxdp.problem.PrivateProblem.solve>` validates the public inputs and
hands them here with the bound data; :func:`run_fit` is the only function that binds the data of a
fit to noise, in this order:

1. the private tail histogram, when the plan has one (charged, then noised, in
   :func:`~cvxdp.privacy.tail.private_tail_profile`);
2. the :class:`~cvxdp.plan.planner.ReleasePlan`, from the public inputs and that release;
3. Algorithm 1's public random partition (a keyed permutation of the rows, :mod:`cvxdp.run.shuffle`,
   its keys from the noise source, independent of the data);
4. the ledger charged for every round of the plan (:func:`~cvxdp.run.release.charge_plan`): a
   plan that would overspend is refused here, before the fit draws noise;
5. one noise source per group, spawned from the main one;
6. the phases (:func:`~cvxdp.run.population.population_localization`) through the executor.

The affine plan (:mod:`cvxdp.plan.mean_gradient`, for a loss affine in ``w``) has no histogram and no
batches: after step 2 its one release runs through :func:`~cvxdp.run.mean_gradient.release_mean_gradient`
(charge, clipped mean, noise, linear minimizer).
"""

from __future__ import annotations

import time

import numpy as np

from cvxdp.erm.solver import ERMSettings
from cvxdp.error import ParameterError
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.plan.planner import Planner, ReleasePlan
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.random import NoiseSource
from cvxdp.privacy.tail import private_tail_profile
from cvxdp.run.executor import Executor
from cvxdp.run.mean_gradient import release_mean_gradient
from cvxdp.run.partitions import Partitions, compact
from cvxdp.run.population import population_localization
from cvxdp.run.release import LocalizationStep, charge_plan
from cvxdp.run.shuffle import PublicShuffle


def run_fit(model: Model, examples: Examples | Partitions, planner: Planner, *, ledger: PrivacyLedger,
            source: NoiseSource, erm: ERMSettings, executor: Executor, progress: bool,
            timings: dict[str, float]) -> tuple[np.ndarray, list[LocalizationStep], ReleasePlan,
                                                np.ndarray | None]:
    """The data layer of a fit: tail release → plan → pre-flight charges → the phases.

    Returns ``(w, steps, plan, released_mean)``: the last is the affine plan's released mean of the
    clipped gradients (ε-DP, the release ``w`` is the linear minimizer of), ``None`` for every other plan.
    """
    t1 = time.perf_counter()
    if isinstance(examples, Examples):
        compact(model, examples)  # partitions are compacted where they are bound
    tail_plan = planner.tail_release()
    tail = None
    if tail_plan is not None:
        tail = private_tail_profile(model, examples, epsilon=tail_plan.epsilon, ledger=ledger,
                                    source=source, low=tail_plan.low, high=tail_plan.high,
                                    bins_per_octave=tail_plan.bins_per_octave, beta=tail_plan.beta,
                                    moment_bounds=tail_plan.moment_bounds)
    timings["tail"] = time.perf_counter() - t1
    plan = planner.plan(tail)
    timings["plan"] = time.perf_counter() - t1 - timings["tail"]
    if plan.gradient is not None:  # the affine plan: one release, no batches (cvxdp.run.mean_gradient)
        w, released = release_mean_gradient(model, examples, plan.gradient, ledger=ledger, source=source)
        timings["fit"] = time.perf_counter() - t1
        return w, [], plan, released
    n = examples.n if isinstance(examples, Partitions) else examples.m
    # Algorithm 1's public random partition (cvxdp.run.shuffle): batch b reads the rows at shuffled
    # positions [offset_b, offset_b + size_b); the single-batch algorithms read every example.  The
    # ledger knows each example by its position (a bijection of the rows, so the same accounting).
    shuffle = PublicShuffle.draw(source, n) if plan.partitioned and plan.batches else None

    def positions_of(batch):
        return slice(batch.offset, batch.offset + batch.size)

    charges = charge_plan(ledger, plan, positions_of)
    rows_of = _batch_rows(examples, shuffle)
    keys = [(b.phase, b.group) for b in plan.batches]
    sources = dict(zip(keys, source.spawn(len(keys)), strict=True))
    groups_elsewhere = executor.remote and not executor.data_parallel  # solve refused such sources earlier
    if groups_elsewhere and len({id(s) for s in sources.values()}) < len(sources):
        raise ParameterError("groups run in other processes need independent noise sources.")
    bar = _progress(progress, len(keys))
    try:
        res = population_localization(model, plan, rows_of=rows_of, charges=charges, sources=sources,
                                      erm=erm, executor=executor, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    timings["fit"] = time.perf_counter() - t1
    return res.w, res.steps, plan, None


def _batch_rows(examples: Examples | Partitions, shuffle: PublicShuffle | None):
    """``rows_of(batch)``: the examples a batch reads — a subset held here, or the partitions' shares
    made where the rows live (only the shuffle's keys and the positions travel)."""
    if shuffle is None:
        return lambda batch: examples
    if isinstance(examples, Partitions):
        examples.sort_by(shuffle)  # batches become slices of the partitions: views, not copies
        return lambda batch: examples.batch(shuffle, batch.offset, batch.offset + batch.size)
    order = shuffle.order()
    return lambda batch: examples.subset(np.sort(order[batch.offset:batch.offset + batch.size]))


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency, but stay usable without it
        return None
    return tqdm(total=total, desc="private fit (phases × groups)", unit="call", leave=False)


__all__ = ["run_fit"]
