"""A bundle method for the regularized extension ERM, driven by aggregated oracle output only.

``F(w) = (1/m) Σ f_{C,U}(w, z_i) + (λ/2)||w − w₀||²`` is minimized over ``U`` by a proximal bundle
method for regularized risk (Kelley's cutting planes on the loss with the regularizer kept exact, as
in Teo, Vishwanathan, Smola and Le's BMRM, 2010, stabilized by a proximal term around the best point
as in Kiwiel's proximal bundle method): at each point ``w_t ∈ U`` one pass of the certified oracle
over the examples gives the upper bound ``F(w_t)`` and the averaged minorant
``ℓ_t(w) = <ḡ_t, w> + β̄_t + (λ/2)||w − w₀||² ≤ F(w)`` on ``U``; the next point minimizes
``max_t ℓ_t(w) + (μ/2)||w − w_best||²`` over ``U`` (:func:`~cvxdp.erm.problem.bundle_master`), with
``μ`` halved after a step that improved on ``w_best`` and doubled after one that did not, within
``[10⁻³ λ, 10 λ]``.  For a
``λ``-strongly convex objective whose loss part is ``G``-Lipschitz, the model gap falls below ``ε``
after ``O(G²/(λε))`` passes (BMRM's bound).

Piecewise-linear objectives converge slowly near their minimizer, which sits on the kinks of a few
rows; once the ball ``B(w_best, sqrt(2·gap/λ))`` that holds the minimizer meets few kinks, those
rows enter the master program exactly (:mod:`cvxdp.erm.kinks`) and the next pass or two close the
gap (measured in ``benchmarks/bench_erm_solvers.py``).

**A subsample's point as the start.**  From the regularizer's centre ``w₀`` — the domain's centre in
the first phase of a fit — the model needs many passes before the ball of the certified gap meets few
enough kinks (129 passes at ``m = 5·10⁶`` against 53 at ``5·10⁵``: ``benchmarks/bench_scale.py``).  A
problem of at least ``WARM_ROWS`` rows therefore first runs the method on every ``WARM_STRIDE``-th of
its rows (in each partition: :meth:`RegularizedERM.subsample
<cvxdp.erm.problem.RegularizedERM.subsample>`) to ``WARM_SLACK·α``, at most ``WARM_PASSES`` of its
cheaper passes, and starts from the best point found (a subsample that large may start from its own
subsample).  The subsample is a function of the rows' positions, ``m`` and the partitions' sizes
(all public); a failure of its run leaves the start where it was.  What it
changes is the route — the cuts of the full run are its own, and the point released is certified
for all ``m`` examples as always, so the sensitivity, which holds for every ``α``-minimizer, does not
see the start.

**A smoothed Newton start.**  For a two-piece generalized-linear loss (hinge, absolute value, pinball)
with at least ``SMOOTH_ROWS`` rows, the start is instead the end of Newton's method on a smoothing of
``F`` (:mod:`cvxdp.erm.smoothed_start`): five stages of a few passes each that bring the point to about
10⁻⁴ of the minimizer, where the kink model closes the gap in two or three passes (measured on
``bench_scale``'s first phases: 30 passes over 5·10⁴ rows became 3 after about 40 smoothed ones, each
about a tenth of a certified pass's cost; 39 over 5·10⁵ rows became 2).  The same argument holds: a
start, not a release; the subsample is not run when the smoothed start gives a point.

Only sums over examples reach the method — the cut ``(ḡ_t, β̄_t)`` and the value — plus the pieces of
the few kink rows, so the passes can run where the data are (partitions on workers) and be reduced
at the driver.

The certificate is the one every release path uses: the upper bound is the oracle's certified
value at a point we made feasible ourselves, the lower bound the certified minimum of a convex
combination of the cuts (and of each kink row's pieces), rounding charged, without the proximal
term — it only moves the proposals — and the point is released only if ``upper − lower ≤ α`` (the
caller's gate, which fails closed on NaN).  The master program only proposes points and weights.
Memory is bounded by keeping the cuts with positive weight, the newest ones and the aggregated cut
``Σθ_t ℓ_t`` (a valid minorant itself), which keeps the model's minimum from falling.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np

from cvxdp.erm.kinks import KinkRows
from cvxdp.erm.problem import Cut, RegularizedERM, bundle_master, evaluate_upper
from cvxdp.erm.smoothed_start import smoothed_newton_start
from cvxdp.extension.certificates import certified_inner_points

logger = logging.getLogger(__name__)

#: Most kink rows the master program takes exactly (its size grows with them) ...
KINK_CAP = 10_000
#: ... and at most one in this many of the problem's rows (a few thousand kink rows cost the master more
#: than a pass over a small problem).
KINK_SHARE = 50
#: Minorants kept per kink row beside its two pieces.
KINK_MEMORY = 8
#: The proximal weight's start, in units of λ (halved after an improving step, doubled after another).
PROX = 1.0
#: The proximal weight's cap, in units of λ (a larger one stalled where every kink meets at the minimizer).
MU_MAX = 10.0
#: Two-piece generalized-linear problems with at least this many rows start from the smoothed Newton
#: point (:mod:`cvxdp.erm.smoothed_start`; below it a pass costs less than the start's overhead).
SMOOTH_ROWS = 2048
#: Problems with at least this many rows start from a subsample's point (where a pass over the rows
#: costs several master programs; below it the subsample's passes cost more than they save) ...
WARM_ROWS = 2**20
#: ... of every this-many-th row (per partition) ...
WARM_STRIDE = 8
#: ... solved to this multiple of the caller's α ...
WARM_SLACK = 100.0
#: ... within this many passes over the subsample.
WARM_PASSES = 40


@dataclass
class BundleResult:
    """The best certified point of a bundle run and the bounds behind its gap."""

    w: np.ndarray
    upper: float
    lower: float
    iterations: int
    seconds: float
    #: Passes over a subsample (and its own subsamples) that found the starting point.
    warm_passes: int = 0
    #: Passes of the smoothed Newton start (:mod:`cvxdp.erm.smoothed_start`), if it ran.
    smoothed_passes: int = 0


def bundle_method(problem: RegularizedERM, alpha: float, start: np.ndarray, *, max_iterations: int = 500,
                  oracle_tolerance: float | None = None, memory: int = 40,
                  kink_cap: int | None = KINK_CAP, prox: float | None = PROX,
                  warm_start: bool = True, warm_rows: int | None = None,
                  smooth_rows: int | None = None, coarse_rows: int | None = None) -> BundleResult:
    """Minimize ``F`` over ``U`` from ``start`` until the certified gap is ``≤ α`` (or the cap).

    Each iteration is one aggregated oracle pass and one master program with at most ``memory``
    cuts plus the aggregate, and the proximal weight ``μ`` starting at ``prox · λ`` and kept in
    ``[10⁻³ λ, 10 λ]`` (``prox=None``: none, the plain BMRM step).  Once the ball
    ``B(w_best, sqrt(2·gap/λ))``, which holds the minimizer, meets the kinks of at most
    ``min(kink_cap, m/50)`` rows (two-piece losses in closed form), those rows enter the master
    program exactly and the cuts leave them out (:mod:`cvxdp.erm.kinks`; the cuts start afresh);
    ``kink_cap=None`` keeps plain cuts.  With ``warm_start``, a problem of at least ``warm_rows`` rows
    (default ``WARM_ROWS``) that can be subsampled starts from a subsample's point instead of ``start``
    (module docstring); before that, a two-piece generalized-linear problem of at least ``smooth_rows``
    rows (default ``SMOOTH_ROWS``) starts from the smoothed Newton point, and then skips the subsample.
    Fails closed: a NaN upper bound is never the best; a master
    program that gives no point, or a point we cannot make feasible, stops the run with what is
    certified; the running lower bound is the largest valid one (``−∞`` if none).
    """
    t0 = time.perf_counter()
    region = problem.feasible_set
    tol = oracle_tolerance if oracle_tolerance is not None else alpha / 20.0
    start, warm_passes, smoothed_passes = np.asarray(start, float), 0, 0
    if warm_start and getattr(problem, "smoothed_sums", None) is not None and problem.m >= (
            SMOOTH_ROWS if smooth_rows is None else smooth_rows):
        try:
            smoothed = smoothed_newton_start(problem, start, coarse_rows)
        except Exception as exc:  # only a start: on any failure the run starts as it would have
            logger.debug("the smoothed start failed (%s); starting as without it", type(exc).__name__)
            smoothed = None
        if smoothed is not None:
            smoothed_passes = smoothed.passes
            start = smoothed.w
    subsample = getattr(problem, "subsample", None)
    if (warm_start and not smoothed_passes and subsample is not None
            and problem.m >= (WARM_ROWS if warm_rows is None else warm_rows)):
        try:
            warm = bundle_method(subsample(WARM_STRIDE), WARM_SLACK * alpha, start,
                                 max_iterations=WARM_PASSES, oracle_tolerance=tol, memory=memory,
                                 kink_cap=kink_cap, prox=prox, warm_rows=warm_rows, smooth_rows=smooth_rows,
                                 coarse_rows=coarse_rows)
        except Exception as exc:  # only a start: on any failure the full run starts as it would have
            logger.debug("the subsample's run failed (%s); starting from the given point", type(exc).__name__)
        else:
            warm_passes = warm.iterations + warm.warm_passes
            if np.all(np.isfinite(warm.w)):
                start = warm.w
    x = _query_point(region, start)
    best_w, best_upper, lower = x.copy(), math.inf, -math.inf
    cuts: list[Cut] = []
    kinks: KinkRows | None = None
    mu = None if prox is None else prox * problem.lam
    cap = None if kink_cap is None else max(min(kink_cap, problem.m // KINK_SHARE), 1)
    passes = 0
    for passes in range(1, max_iterations + 1):
        if kinks is None:
            upper, cut = evaluate_upper(problem, x, tol)
        else:  # the kink rows' own minorants join their models (a cutting-plane model per kink row)
            upper, cut, rows_g, rows_beta = problem.pass_with_rows(x, tol, kinks.index)
            kinks = _grown(kinks, rows_g, rows_beta)
        serious = upper < best_upper
        if upper < best_upper:  # False for NaN
            best_upper, best_w = upper, x.copy()
        cuts.append(cut)
        if mu is not None and passes > 1:
            # a step that improved on the best point lets the next one go farther, one that did not
            # keeps the next one closer
            mu = max(mu / 2.0, 1e-3 * problem.lam) if serious else min(mu * 2.0, MU_MAX * problem.lam)
        master = bundle_master(problem, cuts, kinks, prox=None if mu is None else (mu, best_w))
        if not math.isnan(master.lower):
            lower = max(lower, master.lower)
        if best_upper - lower <= alpha or master.point is None:
            break
        finder = getattr(problem, "kink_rows", None)
        if (finder is not None and cap is not None and kinks is None
                and math.isfinite(best_upper - lower)):
            radius = math.sqrt(2.0 * (best_upper - lower) / problem.lam) * (1.0 + 1e-6)
            found = finder(best_w, radius, cap)
            # every row whose kink may hold the minimizer, once they are few enough
            if found is not None and found.count and not found.truncated:
                # the cuts so far cover the kink rows too: the model starts afresh at the best point
                kinks, cuts, x = found, [], best_w.copy()
                continue
        cuts = _kept(cuts, master.theta, master.aggregate, memory)
        x = _query_point(region, master.point)
        if not (np.all(np.isfinite(x)) and bool(region.contains(x[None, :])[0])):
            break
    return BundleResult(w=best_w, upper=best_upper, lower=lower, iterations=passes,
                        seconds=time.perf_counter() - t0, warm_passes=warm_passes,
                        smoothed_passes=smoothed_passes)


def _grown(kinks: KinkRows, g: np.ndarray, beta: np.ndarray) -> KinkRows:
    """The kink rows with this pass's minorants added, keeping their two pieces and the newest
    ``KINK_MEMORY`` minorants (any subset of minorants is a valid model)."""
    grown = kinks.with_minorants(g, beta)
    if grown.g.shape[1] > 2 + KINK_MEMORY:
        keep = np.r_[0, 1, np.arange(grown.g.shape[1] - KINK_MEMORY, grown.g.shape[1])]
        grown = KinkRows(grown.index, grown.g[:, keep], grown.beta[:, keep], grown.truncated)
    return grown


def _query_point(region, point: np.ndarray) -> np.ndarray:
    """The master's proposal made feasible and, where the region has an exact membership test, pulled
    toward its interior point until the test vouches for it (a move of a few ulps): the oracle's
    closed forms need the query point in ``U`` exactly (:mod:`cvxdp.extension.tight`); any point of
    ``U`` is a valid query, so this changes no bound."""
    feasible = region.make_feasible(point[None, :])
    return certified_inner_points(region, feasible)[0][0]


def _kept(cuts: list[Cut], theta: np.ndarray, aggregate: Cut | None, memory: int) -> list[Cut]:
    """The cuts the next model keeps: all of them while there are few; else the weighted ones and the
    newest, at most ``memory``, plus the aggregate ``Σθ_t ℓ_t`` so the model's minimum cannot fall."""
    if len(cuts) <= memory:
        return cuts
    newest = max(memory // 4, 1)
    weighted = [j for j in np.argsort(-theta) if theta[j] > 0.0][: memory - newest]
    keep = sorted(set(weighted) | set(range(len(cuts) - newest, len(cuts))))
    return ([aggregate] if aggregate is not None else []) + [cuts[j] for j in keep]


__all__ = ["SMOOTH_ROWS", "WARM_ROWS", "WARM_STRIDE", "BundleResult", "bundle_method"]
