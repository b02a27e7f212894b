"""``G_k`` for common feature laws: the public moment bound a private fit needs, from what you know.

cvxdp's guarantee needs ``E A(z)^k ≤ G_k^k`` for the per-example Lipschitz constant ``A(z)``, and
nothing about the worst case.  For the linear losses (absolute, pinball, hinge, Huber, logistic)
``A(z) ≤ L·||x||`` with ``L`` the link's slope bound (1 for absolute and hinge, ``max(τ, 1 − τ)`` for
pinball, the Huber threshold times its scale, ...), so ``G_k = L · (E||x||^k)^{1/k}``.  This module
computes ``(E||x||^k)^{1/k}`` for feature laws a user can state without looking at the data —
from units, a data sheet, a pilot study on other data — and refuses a ``k`` whose moment is
infinite, saying why.

Choosing ``k``: the private term of the rate is ``G_k D (d/(nε))^{1−1/k}``; a larger ``k`` buys a
better exponent, but ``G_k`` grows with ``k`` and is infinite from the tail index on (Student-t
with ``ν`` degrees of freedom: ``k < ν``; Pareto with index ``α``: ``k < α``).  A ``k`` well inside
the finite range (``k ≈ (2 + ν)/2`` for ``ν ≤ 6``, ``k = 4`` beyond) keeps ``G_k`` moderate;
:func:`moment_bound_table` shows how ``G_k`` moves with ``k``.

Every figure is a closed form; with ``intercept=True`` it bounds ``||(x, 1)||``
(``sqrt(G_k² + 1)``, by Minkowski's inequality in ``L^{k/2}``).
"""

from __future__ import annotations

import math

from scipy.special import gammaln

from cvxdp._validation import at_least, positive_finite, positive_int
from cvxdp.error import ParameterError

LAWS = ("student_t", "gaussian", "pareto", "lognormal", "bounded")


def student_t_norm_moment(d: int, nu: float, k: float) -> float:
    """``E||T||^k`` for the ``d``-variate Student-t with ``ν > k`` degrees of freedom (``∞`` else).

    ``T = Z/sqrt(V/ν)`` with ``Z ~ N(0, I_d)`` and ``V ~ χ²_ν`` independent:
    ``E||Z||^k = 2^{k/2} Γ((d+k)/2)/Γ(d/2)`` and ``E (V/ν)^{−k/2} = ν^{k/2} 2^{−k/2} Γ((ν−k)/2)/Γ(ν/2)``.
    """
    if not nu > k:
        return math.inf
    return math.exp((k / 2.0) * math.log(nu) + gammaln((d + k) / 2.0) + gammaln((nu - k) / 2.0)
                    - gammaln(d / 2.0) - gammaln(nu / 2.0))


def feature_moment_bound(law: str, k: float, d: int, *, scale: float = 1.0, nu: float | None = None,
                         alpha: float | None = None, sigma: float | None = None, bound: float | None = None,
                         intercept: bool = False) -> float:
    """``(E||x||^k)^{1/k}`` for ``d`` features of a stated law (times ``scale``), or of ``(x, 1)``.

    With an intercept the bound is ``sqrt(g² + 1)``: ``E (||x||² + 1)^{k/2}`` is the ``k/2``-th power
    of an ``L^{k/2}`` norm, and Minkowski's inequality there (``k ≥ 2``) gives
    ``(E||(x, 1)||^k)^{2/k} ≤ (E||x||^k)^{2/k} + 1``.

    Laws:

    ``"student_t"`` (``nu``)
        the ``d``-variate Student-t with ``ν`` degrees of freedom (exact; finite for ``k < ν``);
    ``"gaussian"``
        ``N(0, I_d)`` (exact: ``E||Z||^k = 2^{k/2} Γ((d+k)/2)/Γ(d/2)``);
    ``"pareto"`` (``alpha``)
        i.i.d. coordinates ``|x_j|`` Pareto with index ``α`` and minimum ``scale``:
        ``E|x_j|^k = α s^k/(α − k)`` for ``k < α``, and ``E||x||^k ≤ d^{k/2} E|x_1|^k`` (power means,
        ``k ≥ 2``) — an upper bound;
    ``"lognormal"`` (``sigma``)
        i.i.d. ``|x_j| = scale·e^{σ N(0,1)}``: ``E|x_j|^k = s^k e^{k²σ²/2}``, bounded as for Pareto;
    ``"bounded"`` (``bound``)
        ``||x|| ≤ B`` surely: ``B`` for every ``k`` (``scale`` is not used).

    Raises :class:`~cvxdp.error.ParameterError` when the ``k``-th moment is infinite, naming the
    largest ``k`` that is not.
    """
    k = at_least("k", k, 2.0)
    d = positive_int("d", d)
    s = positive_finite("scale", scale)
    if law == "student_t":
        nu = positive_finite("nu", nu)
        if not k < nu:
            raise ParameterError(f"the k-th moment of Student-t features with ν = {nu:g} degrees of freedom "
                                 f"is infinite for k ≥ ν; {_advice(nu)}")
        g = s * student_t_norm_moment(d, nu, k) ** (1.0 / k)
    elif law == "gaussian":
        g = s * math.exp(((k / 2.0) * math.log(2.0) + gammaln((d + k) / 2.0) - gammaln(d / 2.0)) / k)
    elif law == "pareto":
        alpha = positive_finite("alpha", alpha)
        if not k < alpha:
            raise ParameterError(f"the k-th moment of Pareto features with index α = {alpha:g} is infinite "
                                 f"for k ≥ α; {_advice(alpha)}")
        g = math.sqrt(d) * s * (alpha / (alpha - k)) ** (1.0 / k)
    elif law == "lognormal":
        sigma = positive_finite("sigma", sigma)
        g = math.sqrt(d) * s * math.exp(k * sigma * sigma / 2.0)
    elif law == "bounded":
        g = positive_finite("bound", bound)
    else:
        raise ParameterError(f"law must be one of {LAWS}, got {law!r}.")
    return math.hypot(g, 1.0) if intercept else g


def moment_bound_table(law: str, d: int, ks: tuple[float, ...] = (2.0, 2.5, 3.0, 4.0, 6.0, 8.0),
                       **params) -> dict[float, float]:
    """``{k: G_k}`` for the ``k`` whose moment is finite (see :func:`feature_moment_bound`)."""
    out = {}
    for k in ks:
        try:
            out[float(k)] = feature_moment_bound(law, k, d, **params)
        except ParameterError:
            if law in ("student_t", "pareto"):
                continue
            raise
    return out


def _advice(index: float) -> str:
    """What to do when ``k`` reaches the tail index: a ``k`` well inside ``[2, index)``, if there is one."""
    if index <= 2.0:
        return ("no k ≥ 2 has a finite moment, and cvxdp's guarantee needs one: bound the features "
                "publicly (law='bounded', e.g. after public clipping) or use a lighter-tailed model.")
    k = 4.0 if index > 6.0 else round((2.0 + index) / 2.0, 2)
    return f"choose 2 ≤ k < {index:g} (e.g. k = {k:g}), or a law with lighter tails."


__all__ = ["LAWS", "feature_moment_bound", "moment_bound_table", "student_t_norm_moment"]
