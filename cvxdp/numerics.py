"""Float64 facts every certified bound relies on: the unit roundoff, rounding margins, directed rounding.

Everything that turns a float computation into a *certified* inequality charges its rounding with
these helpers, so the margins live in one place below every module that certifies (the extension's
brackets, the ERM certificates, the per-example Lipschitz constants of the tail histogram) and the
ledger's exact arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

EPS = float(np.finfo(float).eps)


def rounding_margin(*terms: np.ndarray) -> np.ndarray:
    """A safe bound on the float64 rounding error of a sum of the given terms.

    ``64 ε Σ|t|`` covers the few dozen operations behind each term with room
    to spare; we also add ``1e-300`` so the margin is never exactly zero.
    """
    total = np.zeros(())
    for t in terms:
        total = total + np.abs(np.asarray(t, float))
    return 64.0 * EPS * total + 1e-300


def argument_rounding(d: int, a_norm: np.ndarray, y_norm: np.ndarray, b_abs: np.ndarray) -> np.ndarray:
    """A bound on the float64 error of ``u = <a, y> + b`` (``d`` terms, then one addition).

    The classical bound for a length-``d`` dot product is ``γ_d Σ|a_j y_j| ≤ γ_d ||a|| ||y||``
    (``γ_d ≈ d ε``); the offset adds ``ε |u|``.  We charge ``(d + 2) ε (||a|| ||y|| + |b|)``.
    Unlike a margin relative to ``|u|``, this stays valid when ``<a, y>`` and ``b`` cancel —
    a well-fitted example with huge features or labels.
    """
    return (d + 2.0) * EPS * (np.asarray(a_norm) * np.asarray(y_norm) + np.abs(b_abs))


def float_down(q: Fraction) -> float:
    """The largest float ``≤ q`` (``q`` finite, within the float range)."""
    f = float(q)  # correctly rounded to nearest
    if Fraction(f) > q:
        f = math.nextafter(f, -math.inf)
    return f


def float_up(q: Fraction) -> float:
    """The smallest float ``≥ q`` (``q`` finite, within the float range)."""
    f = float(q)
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


__all__ = ["EPS", "argument_rounding", "float_down", "float_up", "rounding_margin"]
