"""A bundle method for the regularized extension ERM, driven by aggregated oracle output only.

``F(w) = (1/m) Σ f_{C,U}(w, z_i) + (λ/2)||w − w₀||²`` is minimized over ``U`` by the bundle method
for regularized risk (Kelley's cutting planes on the loss with the regularizer kept exact, as in
Teo, Vishwanathan, Smola and Le's BMRM, 2010): at each point ``w_t ∈ U`` one pass of the certified
oracle over the examples gives the upper bound ``F(w_t)`` and the averaged minorant
``ℓ_t(w) = <ḡ_t, w> + β̄_t + (λ/2)||w − w₀||² ≤ F(w)`` on ``U``; the next point minimizes the model
``max_t ℓ_t`` over ``U`` (:func:`~cvxdp.erm.problem.bundle_master`).  For a ``λ``-strongly convex
objective whose loss part is ``G``-Lipschitz, the model gap falls below ``ε`` after
``O(G²/(λε))`` passes (BMRM's bound); on the piecewise-linear losses we fit it takes tens of passes
in practice (measured in ``benchmarks/bench_erm_solvers.py``).

Only sums over examples reach the method — the cut ``(ḡ_t, β̄_t)`` and the value — so the passes can
run where the data are (partitions on workers) and be reduced at the driver.

The certificate is the one every release path uses: the upper bound is the oracle's certified
value at a point we made feasible ourselves, the lower bound the certified minimum of a convex
combination of the cuts (rounding charged), and the point is released only if ``upper − lower ≤ α``
(the caller's gate, which fails closed on NaN).  The master program only proposes points and
weights.  Memory is bounded by keeping the cuts with positive weight, the newest ones and the
aggregated cut ``Σθ_t ℓ_t`` (a valid minorant itself), which keeps the model's minimum from falling.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from cvxdp.erm.problem import Cut, RegularizedERM, bundle_master, evaluate_upper


@dataclass
class BundleResult:
    """The best certified point of a bundle run and the bounds behind its gap."""

    w: np.ndarray
    upper: float
    lower: float
    iterations: int
    seconds: float


def bundle_method(problem: RegularizedERM, alpha: float, start: np.ndarray, *, max_iterations: int = 500,
                  oracle_tolerance: float | None = None, memory: int = 40) -> BundleResult:
    """Minimize ``F`` over ``U`` from ``start`` until the certified gap is ``≤ α`` (or the cap).

    Each iteration is one aggregated oracle pass and one master program with at most ``memory``
    cuts plus the aggregate.  Fails closed: a NaN upper bound is never the best; a master program
    that gives no point, or a point we cannot make feasible, stops the run with what is certified;
    the running lower bound is the largest valid one (``−∞`` if none).
    """
    t0 = time.perf_counter()
    region = problem.feasible_set
    tol = oracle_tolerance if oracle_tolerance is not None else alpha / 20.0
    x = region.make_feasible(np.asarray(start, float)[None, :])[0]
    best_w, best_upper, lower = x.copy(), math.inf, -math.inf
    cuts: list[Cut] = []
    passes = 0
    for passes in range(1, max_iterations + 1):  # noqa: B007 (the count is returned)
        upper, cut = evaluate_upper(problem, x, tol)
        if upper < best_upper:  # False for NaN
            best_upper, best_w = upper, x.copy()
        cuts.append(cut)
        master = bundle_master(problem, cuts)
        if not math.isnan(master.lower):
            lower = max(lower, master.lower)
        if best_upper - lower <= alpha or master.point is None:
            break
        cuts = _kept(cuts, master.theta, master.aggregate, memory)
        x = region.make_feasible(master.point[None, :])[0]
        if not (np.all(np.isfinite(x)) and bool(region.contains(x[None, :])[0])):
            break
    return BundleResult(w=best_w, upper=best_upper, lower=lower, iterations=passes,
                        seconds=time.perf_counter() - t0)


def _kept(cuts: list[Cut], theta: np.ndarray, aggregate: Cut | None, memory: int) -> list[Cut]:
    """The cuts the next model keeps: all of them while there are few; else the weighted ones and the
    newest, at most ``memory``, plus the aggregate ``Σθ_t ℓ_t`` so the model's minimum cannot fall."""
    if len(cuts) <= memory:
        return cuts
    newest = max(memory // 4, 1)
    weighted = [j for j in np.argsort(-theta) if theta[j] > 0.0][: memory - newest]
    keep = sorted(set(weighted) | set(range(len(cuts) - newest, len(cuts))))
    return ([aggregate] if aggregate is not None else []) + [cuts[j] for j in keep]


__all__ = ["BundleResult", "bundle_method"]
