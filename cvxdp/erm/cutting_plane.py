"""Deterministic cutting-plane solver: the ellipsoid method with accuracy certificates.

The paper's Appendix E.3 shows that for polyhedral losses the extension's
subgradients can be approximated deterministically (our oracle's brackets),
so the ERM can be solved in deterministic polynomial time.  We use the
central-cut ellipsoid method over the certified oracle:

* a center outside ``U`` gets a *feasibility* cut ``<a, u> ≤ level`` with
  ``level ≥ σ_U(a)`` (exact supports, or a violated linear row);
* a center in ``U`` gets an *objective* cut from the oracle's aggregated
  minorant, ``g = ḡ + λ(x − w₀)``.

With ``E₀ = B(c, ρ)`` containing the minimizer and ``F`` ``L``-Lipschitz on
``U``, the best feasible center after ``N = ⌈2 d² ln(2ρL/ε)⌉`` steps is an
``ε``-minimizer (volume argument; ``N`` is fixed in advance — the
deterministic iteration bound).  The certificate is evaluated, not assumed:
the upper bound at the best center, the lower bound from the best convex
combination of the objective cuts (:func:`~cvxdp.erm.problem.bundle_lower_bound`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from cvxdp.erm.problem import Cut, RegularizedERM, bundle_lower_bound, evaluate_upper
from cvxdp.geometry.certified import separating_cut


@dataclass
class CuttingPlaneResult:
    w: np.ndarray
    upper: float
    lower: float
    iterations: int
    bound: int
    seconds: float


def _raise_lower(lower: float, candidate: float) -> float:
    """The larger of two valid lower bounds, ignoring NaN (Python's ``max`` keeps a leading NaN)."""
    return lower if math.isnan(candidate) else max(lower, candidate)


def iteration_bound(d: int, radius: float, lipschitz: float, eps: float) -> int:
    """``⌈2 d² ln(2ρL/ε)⌉`` (bisection ``⌈log₂(2ρL/ε)⌉ + 1`` in one dimension)."""
    ratio = max(2.0 * radius * lipschitz / eps, 2.0)
    if d == 1:
        return math.ceil(math.log2(ratio)) + 1
    return math.ceil(2.0 * d * d * math.log(ratio))


def ellipsoid_method(problem: RegularizedERM, alpha: float, center: np.ndarray, radius: float,
                     max_iterations: int | None = None, check_every: int | None = None,
                     oracle_tolerance: float | None = None) -> CuttingPlaneResult:
    """Minimize ``F`` over ``U`` from ``E₀ = B(center, radius)`` until the certified gap is ``≤ α``.

    Stops early once the evaluated certificate reaches ``α``; otherwise after
    the a-priori bound (or ``max_iterations`` if smaller).  Returns the best
    feasible center with its certified bounds.

    Fails closed: a NaN upper bound is never "best", NaN lower bounds are ignored
    (the running lower bound is the largest *valid* one, ``−∞`` if none), and a
    non-finite cut or ellipsoid update stops the search with what is certified so
    far.  The caller compares the returned bounds with ``not (gap <= α)``.
    """
    t0 = time.perf_counter()
    d = problem.dim
    L = problem.lipschitz_bound()
    bound = iteration_bound(d, radius, L, alpha / 2.0)
    n_iter = bound if max_iterations is None else min(bound, int(max_iterations))
    check = check_every or max(d, 10)
    tol = oracle_tolerance if oracle_tolerance is not None else alpha / 20.0
    x = np.asarray(center, dtype=float).copy()
    P = np.eye(d) * radius * radius
    lo_1d, hi_1d = float(x[0] - radius), float(x[0] + radius)
    best_w, best_upper = None, math.inf
    cuts: list[Cut] = []
    lower = -math.inf
    it = 0
    for it in range(1, n_iter + 1):
        sep = separating_cut(problem.feasible_set, x)
        if sep is None:
            upper, cut = evaluate_upper(problem, x, tol)
            cuts.append(cut)
            if upper < best_upper:  # False for NaN: a NaN bound is never the best
                best_upper, best_w = upper, x.copy()
            a = cut.g + problem.lam * (x - problem.w0)
            level = float(a @ x)
            if not np.any(a):
                lower = _raise_lower(lower, bundle_lower_bound(problem, cuts)[0])
                break
        else:
            a, level = sep
        if not (np.all(np.isfinite(a)) and math.isfinite(level)):
            break  # a non-finite cut cannot be followed; certify what we have
        if it % check == 0 and cuts:
            lower = _raise_lower(lower, bundle_lower_bound(problem, cuts)[0])
            if best_upper - lower <= alpha:
                break
        if d == 1:
            # bisection on the interval [lo, hi]
            if a[0] > 0:
                hi_1d = min(hi_1d, level / a[0])
            elif a[0] < 0:
                lo_1d = max(lo_1d, level / a[0])
            if not (lo_1d <= hi_1d):
                break
            x = np.array([(lo_1d + hi_1d) / 2.0])
            continue
        Pa = P @ a
        aPa = float(a @ Pa)
        if not (aPa > 0 and math.isfinite(aPa)):
            break
        root = math.sqrt(aPa)
        depth = (float(a @ x) - level) / root
        if not (depth < 1.0):
            break  # the cut removes the whole ellipsoid: nothing of U is left to search (or NaN)
        depth = max(depth, 0.0)
        tau = (1.0 + d * depth) / (d + 1.0)
        sigma = 2.0 * (1.0 + d * depth) / ((d + 1.0) * (1.0 + depth))
        delta = d * d * (1.0 - depth * depth) / (d * d - 1.0)
        x = x - tau * Pa / root
        P = delta * (P - sigma * np.outer(Pa, Pa) / aPa)
        P = 0.5 * (P + P.T)
    if cuts:
        lower = _raise_lower(lower, bundle_lower_bound(problem, cuts)[0])
    if best_w is None:
        best_w = problem.feasible_set.make_feasible(np.asarray(center, float))
        best_upper, cut = evaluate_upper(problem, best_w, tol)
        lower = _raise_lower(lower, bundle_lower_bound(problem, [*cuts, cut])[0])
    return CuttingPlaneResult(w=best_w, upper=best_upper, lower=lower, iterations=it, bound=bound,
                              seconds=time.perf_counter() - t0)
