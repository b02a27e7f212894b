"""``G_k`` of common feature laws: closed forms against Monte Carlo, monotone in k, refused where infinite."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from cvxdp.datasets.synthetic import multivariate_t
from cvxdp.error import ParameterError
from cvxdp.moment_bounds import feature_moment_bound, moment_bound_table


@pytest.mark.parametrize("law, params, sampler", [
    ("student_t", {"nu": 9.0}, lambda rng, n, d: multivariate_t(rng, n, d, 9.0)),
    ("gaussian", {}, lambda rng, n, d: rng.standard_normal((n, d))),
    ("bounded", {"bound": 2.0}, lambda rng, n, d: rng.uniform(-1, 1, (n, d)) * 2 / math.sqrt(d)),
])
def test_closed_forms_match_monte_carlo(law, params, sampler):
    """Exact laws: the closed form within Monte-Carlo error; bounded: an upper bound."""
    rng = np.random.default_rng(0)
    d, k = 3, 3.0
    x = sampler(rng, 400_000, d)
    empirical = float(np.mean(np.linalg.norm(x, axis=1) ** k)) ** (1 / k)
    G = feature_moment_bound(law, k, d, **params)
    if law == "bounded":
        assert empirical <= G
    else:
        assert G == pytest.approx(empirical, rel=0.02)


@pytest.mark.parametrize("law, params", [("pareto", {"alpha": 7.0}), ("lognormal", {"sigma": 0.5})])
def test_coordinatewise_laws_are_upper_bounds(law, params):
    rng = np.random.default_rng(1)
    d, k = 4, 3.0
    if law == "pareto":
        x = (rng.pareto(7.0, (400_000, d)) + 1.0) * rng.choice([-1, 1], (400_000, d))
    else:
        x = np.exp(0.5 * rng.standard_normal((400_000, d)))
    empirical = float(np.mean(np.linalg.norm(x, axis=1) ** k)) ** (1 / k)
    assert empirical <= feature_moment_bound(law, k, d, **params)


def test_monotone_in_k_and_the_intercept_adds_one():
    table = moment_bound_table("student_t", 5, nu=7.0)
    assert list(table) == [2.0, 2.5, 3.0, 4.0, 6.0]  # k = 8 ≥ ν is left out
    values = list(table.values())
    assert all(a < b for a, b in itertools.pairwise(values))  # Lyapunov: G_k grows with k
    g = feature_moment_bound("gaussian", 3, 3)
    assert feature_moment_bound("gaussian", 3, 3, intercept=True) == pytest.approx(math.hypot(g, 1.0))
    rng = np.random.default_rng(2)
    z = np.c_[rng.standard_normal((400_000, 3)), np.ones(400_000)]
    assert float(np.mean(np.linalg.norm(z, axis=1) ** 3)) ** (1 / 3) <= math.hypot(g, 1.0) * 1.005


@pytest.mark.parametrize("law, params, k, advice", [("student_t", {"nu": 4.0}, 4.0, "k = 3"),
                                                    ("pareto", {"alpha": 3.0}, 3.5, "k = 2.5"),
                                                    ("student_t", {"nu": 2.0}, 2.0, "no k ≥ 2")])
def test_an_infinite_moment_is_refused_with_the_reason(law, params, k, advice):
    with pytest.raises(ParameterError, match="infinite") as info:
        feature_moment_bound(law, k, 3, **params)
    assert advice in str(info.value)
