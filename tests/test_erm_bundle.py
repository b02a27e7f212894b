"""The bundle method (``cvxdp.erm.bundle``): certified like every release path, from aggregated output."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from test_erm import _problem, reference_minimum

import cvxdp.erm.bundle as bundle_module
from cvxdp.erm import ERMSettings, bundle_master, bundle_method, solve_certified
from cvxdp.erm.problem import evaluate_upper
from cvxdp.error import CertificationError, ParameterError


def test_bundle_and_conic_agree_within_strong_convexity(rng):
    """Two certified α-minimizers of a λ-strongly convex F lie within sqrt(2·(gap₁ + gap₂)/λ)·... of each
    other: ||w₁ − w₂|| ≤ sqrt(2 gap₁/λ) + sqrt(2 gap₂/λ)."""
    problem, _ = _problem(rng, loss="absolute", m=120)
    alpha = 1e-8
    w1, c1 = solve_certified(problem, alpha, ERMSettings(method="bundle", refine=False))
    w2, c2 = solve_certified(problem, alpha)
    bound = math.sqrt(2 * c1.gap / problem.lam) + math.sqrt(2 * c2.gap / problem.lam)
    assert float(np.linalg.norm(w1 - w2)) <= bound * (1 + 1e-9) + 1e-12


def test_bounded_memory_keeps_the_model_from_falling(rng):
    """With 2 cuts of memory plus the aggregate (and the newest cut) α is still met, and the master's
    minimum does not fall beyond the master solver's accuracy: the aggregate ``Σθ ℓ`` alone already
    has the previous minimum.  (Without the aggregate this run stalls at a gap of 2e-4.)"""
    problem, _ = _problem(rng, loss="hinge", m=60)
    lowers = []
    real = bundle_module.bundle_master

    def spy(problem_, cuts):
        assert len(cuts) <= 2 + 2
        master = real(problem_, cuts)
        lowers.append(master.lower)
        return master

    bundle_module.bundle_master = spy
    try:
        res = bundle_method(problem, 1e-7, problem.w0, memory=2, max_iterations=400)
    finally:
        bundle_module.bundle_master = real
    assert res.upper - res.lower <= 1e-7
    assert len(lowers) > 8  # the cap was reached and the aggregate took over
    for before, after in itertools.pairwise(lowers):
        assert after >= before - 1e-7 * (1.0 + abs(before))


@pytest.mark.parametrize("lie", ["nan", "far", "none"])
def test_a_lying_master_program_cannot_make_a_false_certificate(rng, monkeypatch, lie):
    """The master only proposes: points outside U, NaN points or none stop the run with what is
    certified; the release gate then refuses or the certificate is true."""
    problem, data = _problem(rng, loss="absolute", m=60)
    real = bundle_master

    def lying(problem_, cuts):
        m = real(problem_, cuts)
        far = m.point + 50.0 if m.point is not None else None
        point = {"nan": np.full(problem_.dim, math.nan), "far": far, "none": None}[lie]
        return m._replace(point=point, lower=m.lower)

    monkeypatch.setattr(bundle_module, "bundle_master", lying)
    ref = reference_minimum(problem, data)
    try:
        w, cert = solve_certified(problem, 1e-8, ERMSettings(method="bundle", refine=False,
                                                             bundle_iterations=30))
    except CertificationError:
        return
    upper, _ = evaluate_upper(problem, w, 1e-12)
    assert cert.lower <= ref + 1e-7 and upper - ref <= 1e-8 + 1e-7


def test_bundle_iterations_are_validated():
    with pytest.raises(ParameterError, match="bundle_iterations"):
        ERMSettings(method="bundle", bundle_iterations=0)
