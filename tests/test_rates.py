"""The paper's rates: exponents, ordering of the bounds, and the sample-size planner."""

from __future__ import annotations

import numpy as np
import pytest

from cvxdp.error import ParameterError
from cvxdp.rates import (
    clipped_output_perturbation_rate,
    lower_bound,
    optimal_rate,
    samples_needed,
    upper_bound,
)

ARGS = dict(d=10, epsilon=1.0, k=4.0, G_k=5.0, G_2=3.0, D=2.0)


@pytest.mark.parametrize("k", [2.5, 4.0, 8.0])
def test_privacy_term_exponent(k):
    """In the privacy-dominated regime the rate decays like (nε)^{−(1−1/k)}."""
    args = dict(ARGS, k=k, G_2=1e-9)
    ns = np.array([1e3, 1e4, 1e5])
    vals = [optimal_rate(n, **args) for n in ns]
    slope = np.polyfit(np.log(ns), np.log(vals), 1)[0]
    assert slope == pytest.approx(-(1 - 1 / k), abs=1e-6)


def test_lower_below_upper_and_both_decrease():
    for n in (1e2, 1e4, 1e6):
        for delta in (0.1, 0.01):
            assert lower_bound(n, **ARGS, delta=delta) <= upper_bound(n, **ARGS, delta=delta)
    assert upper_bound(1e5, **ARGS) < upper_bound(1e4, **ARGS)
    assert lower_bound(1e5, **ARGS) < lower_bound(1e4, **ARGS)
    assert lower_bound(1.0, **ARGS) == pytest.approx(ARGS["D"] * ARGS["G_2"])  # the trivial cap


def test_clipping_pays_the_square_root():
    """Clipped output perturbation's private term is the square root of (d/(nε)), not its 3/4 power."""
    n = 1e6
    assert clipped_output_perturbation_rate(n, 10, 1.0, 5.0, 2.0) > optimal_rate(n, **dict(ARGS, G_2=1e-9))


def test_samples_needed_inverts_the_upper_bound():
    n = samples_needed(0.05, **ARGS)
    assert upper_bound(n, **ARGS) <= 0.05 < upper_bound(n - 1, **ARGS)
    assert samples_needed(0.01, **ARGS) > n


def test_rates_validate():
    with pytest.raises(ParameterError):
        optimal_rate(0, **ARGS)
    with pytest.raises(ParameterError):
        upper_bound(100, **dict(ARGS, k=1.5))
