"""Feature centring for linear models with an intercept: the same model and domain, better geometry.

The reparametrization.  For a linear model ``x·β + b`` over a domain ``W`` of ``w = (β, b) ∈ R^{p+1}``
and any vector ``μ ∈ R^p``, write ``b = b' − μ·β``: then ``x·β + b = (x − μ)·β + b'`` for every row.
The map ``v = (β, b') ↦ w = A_μ v = (β, b' − μ·β)`` is linear with determinant 1, so fitting ``v`` over
``A_μ⁻¹ W`` on the centred rows ``(x − μ, 1)`` is the same model class over the same set of predictors,
and :func:`uncentred` maps the fitted ``v`` back to ``w`` exactly as it would map any point
(post-processing).  What changes is the geometry the private fit works in: its regularization toward
the domain's centre and its isotropic noise act on ``v``.  With uncentred features (an age measured
from 0, mean 4 in decades) the intercept trades off against the slopes along a nearly flat direction
of the risk, and a fit regularized toward the centre shrinks far along it; measured from their mean
the features no longer lean on the intercept (README, *Large real data sets*: 3.5× lower excess test
loss on CPSSW8's 0.9 quantile as loaded, at full size and ε = 1).

Where ``μ`` comes from:

* public reference values (units, a typical worker — never the training data): no privacy cost;
* :func:`private_feature_mean`: the affine plan's one release (:mod:`cvxdp.plan.mean_gradient`) for
  the affine loss ``f(u, x) = ⟨x, u⟩``, whose gradient at every ``u`` is the row ``x`` itself — so
  its released mean is a clipped, noisy mean of the rows, ε_c-DP (the plan's argument: the clipped
  mean moves by at most ``2C/n`` in ℓ2 when one row is replaced, and ℓ2-Laplace noise of scale
  ``2C/(nε)`` hides it), with ``G_k`` estimated by the private tail histogram of ``||x||``.

Privacy of a centred fit (basic composition).  ``μ̂`` is an ε_c-DP release; the fit that follows
is ε_fit-DP for every fixed ``μ̂`` — its argument holds for any public linear reparametrization,
since it reads only the per-example losses on the centred rows and the domain ``A_μ̂⁻¹ W``, both
functions of ``μ̂`` and of each example alone (row ``i`` of the centred design depends on ``x_i``
and ``μ̂`` only).  The centring is charged at most ``ε_c``, and the fit
``ε_fit = budget_remainder(ε, centring's charges)``, so the two add up to at most ``ε`` exactly.
When the histogram sees nothing above its noise the mean is not released (the affine plan falls
back to no fit) and the features are left as they are — a branch on a charged release; the fit then
gets the centring's unspent share back (``ε`` less the histogram's part), a function of that
release too.  A released centre nearer 0 than :data:`CENTRE_FROM`, or beyond
:data:`MAX_CENTRE_NORM`, is not used either (post-processing; its share stays spent).
"""

from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np

from cvxdp.error import UtilityWarning
from cvxdp.privacy.ledger import PrivacyLedger

#: The largest ``||μ||`` a fit is centred at.  ``A_μ`` has singular values ``σ_max ≥ 1 ≥ σ_min`` with
#: ``σ_max σ_min = 1`` and ``σ_max² + σ_min² = 2 + ||μ||²``, so the centred domain ``A_μ⁻¹ W`` of a ball
#: is an ellipsoid of condition number ``σ_max⁴ ≈ ||μ||⁴``: ``8·10⁵`` at ``||μ|| = 30``, where the
#: conic solves and the geometry's own checks (an ellipsoid with ``λ_min/λ_max ≤ 10⁻¹²`` is refused as
#: unbounded) still have room.  Features whose centre lies farther out are better rescaled to units
#: near 1 first (they are then also a better fit for the declared ball).
MAX_CENTRE_NORM = 30.0


def usable_centre(mu: np.ndarray | None) -> bool:
    """Whether a fit can be centred at ``mu``: finite, with ``||μ|| ≤`` :data:`MAX_CENTRE_NORM` (NaN: no).

    For the private mean the test reads the release only (post-processing); a released mean beyond it
    (noise planned for a large ``G_k`` estimate, or a heavy tail) leaves the features as given.
    """
    if mu is None:
        return False
    with np.errstate(all="ignore"):
        norm = float(np.linalg.norm(np.asarray(mu, float)))
    return norm <= MAX_CENTRE_NORM


#: The smallest released ``||μ̂||`` at which the estimators' *private* centring is used (public
#: reference values are always used).  Centring trades the flat intercept direction for a longer domain:
#: ``A_μ⁻¹ W`` has diameter up to ``σ_max(A_μ) = O(||μ||)`` times ``W``'s, and the plan's constants grow
#: with it, while the flat direction it removes is mild when the features' centre is near 0.
#: Measured, not derived (``benchmarks/bench_large_real.py``, full size, ε = 1, 5 splits, median excess
#: test loss; ``||μ̂||`` in brackets).  Far from 0 centring wins clearly: CPSSW8 as loaded (4.4), τ = 0.9
#: 0.0102 → 0.0029 and LAD 0.0036 → 0.0018; Fertility's hinge (3.2) 0.00061 → 0.00022.  Near 0 it is a
#: coin flip at the noise level of these medians — used against not used (both after the centring's
#: 10% of ε): diamonds (1.5) LAD 0.00061 against 0.00027 and τ = 0.9 0.00036 against 0.00052; CPSSW8
#: from its public reference worker (0.7) LAD 0.00114 against 0.00080 and τ = 0.9 0.00188 against
#: 0.00276 — so the switch sits at 2, below the smallest centre with a clear gain, where the domain's
#: growth argues against centring.  The test reads the release only.
CENTRE_FROM = 2.0


def worth_centring(mu: np.ndarray | None) -> bool:
    """Whether the estimators use a *released* centre: :func:`usable_centre` and ``||μ̂|| ≥``
    :data:`CENTRE_FROM` (post-processing of the release; NaN: no)."""
    if not usable_centre(mu):
        return False
    return float(np.linalg.norm(np.asarray(mu, float))) >= CENTRE_FROM


def centring_map(mu: np.ndarray) -> np.ndarray:
    """``A_μ``, ``(p+1) × (p+1)``: ``w = A_μ v`` takes ``v = (β, b')`` to ``(β, b' − μ·β)``."""
    mu = np.asarray(mu, float)
    A = np.eye(mu.size + 1)
    A[-1, :-1] = -mu
    return A


def centred_design(X: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """The rows ``(x_i − μ, 1)``: row ``i`` depends on ``x_i`` and ``μ`` only."""
    X = np.asarray(X, float)
    return np.hstack([X - np.asarray(mu, float)[None, :], np.ones((X.shape[0], 1))])


def uncentred(v: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, float]:
    """``(β, b)`` from ``v = (β, b')``: ``β`` as is and ``b = b' − μ·β`` (the inverse of the centring)."""
    v = np.asarray(v, float)
    coef = v[:-1].copy()
    return coef, float(v[-1] - float(np.dot(np.asarray(mu, float), coef)))


def _mean_model(p: int):
    """The affine model whose one release is the rows' clipped noisy mean: ``⟨x, u⟩`` on the unit ball."""
    from cvxdp import losses
    from cvxdp.model import Model

    u = cp.Variable(p)
    return Model(losses.affine(u), [cp.norm(u, 2) <= 1.0])


def feature_mean_plan(n: int, p: int, *, epsilon: float, moment_k: float) -> object:
    """The dry run of :func:`private_feature_mean` for ``n`` rows of ``p`` features: its
    :class:`~cvxdp.plan.planner.ReleasePlan` (provisional: ``G_k`` comes from the histogram), or the
    same :class:`~cvxdp.error.ParameterError` the release would raise — public inputs only, so the
    estimators check it before they charge an accountant."""
    from cvxdp.problem import PrivateProblem

    return PrivateProblem(_mean_model(p)).plan(n=n, epsilon=epsilon, moment_k=moment_k, G_k="auto",
                                               algorithm="mean-gradient")


def private_feature_mean(X: np.ndarray, *, epsilon: float, moment_k: float, random_state: object = None,
                         accountant: object = None) -> tuple[np.ndarray | None, PrivacyLedger]:
    """An ε-DP mean of the rows of ``X`` (``n × p``), or ``None`` when no scale was seen; and its ledger.

    It is the affine plan's release for the loss ``⟨x, u⟩`` (gradient ``x``) with ``G_k="auto"``: the
    tail histogram of ``||x_i||`` (10% of ``epsilon``) sets ``G_k``, the rows are clipped to
    ``C = G_k((k−1)nε/(2p))^{1/k}`` and their mean released with ℓ2-Laplace noise (the rest of
    ``epsilon``).  ``random_state`` is a noise source (or seed) shared with what follows, so a
    seeded fit stays reproducible; ``accountant`` is charged ``epsilon``.
    """
    from cvxdp.problem import PrivateProblem

    X = np.asarray(X, float)
    model = _mean_model(X.shape[1])
    with warnings.catch_warnings():
        # "the histogram saw nothing" speaks of a fit releasing its centre; here it means no centring,
        # which the caller reads off the ``None`` (the same release, so no other information)
        warnings.simplefilter("ignore", UtilityWarning)
        result = PrivateProblem(model).solve({"x": X, "y": np.zeros(X.shape[0])}, epsilon=epsilon,
                                             moment_k=moment_k, G_k="auto", algorithm="mean-gradient",
                                             random_state=random_state, accountant=accountant)
    return result.released_mean, result.ledger


__all__ = ["CENTRE_FROM", "MAX_CENTRE_NORM", "centred_design", "centring_map", "feature_mean_plan",
           "private_feature_mean", "uncentred", "usable_centre", "worth_centring"]
