"""Empirical privacy audits: sound mechanisms stay below their claim, a broken one is caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cvxdp.audit import (
    NEIGHBOURS,
    audit,
    clopper_pearson,
    epsilon_from_counts,
    lad_model,
    neighbouring_pair,
    output_perturbation_mechanism,
)
from cvxdp.error import CertificationError, DataError
from cvxdp.problem import PrivateProblem

pytestmark = pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning")


def test_clopper_pearson_coverage():
    """The one-sided bounds cover the true proportion at their level (simulation)."""
    rng = np.random.default_rng(0)
    p, n, a = 0.3, 200, 0.05
    ks = rng.binomial(n, p, size=4000)
    lo = np.array([clopper_pearson(k, n, a)[0] for k in ks])
    hi = np.array([clopper_pearson(k, n, a)[1] for k in ks])
    assert np.mean(lo > p) <= a and np.mean(hi < p) <= a
    assert clopper_pearson(0, 10, a)[0] == 0.0 and clopper_pearson(10, 10, a)[1] == 1.0


def test_epsilon_from_counts():
    assert epsilon_from_counts(500, 500, 1000, 1000, 0.95) == 0.0
    strong = epsilon_from_counts(900, 100, 1000, 1000, 0.95)
    assert 1.5 < strong < math.log(9)


def _refusing_laplace(scale, refuse_0, refuse_1):
    """Laplace(scale) around the data's center that refuses (CertificationError) with a per-side rate.

    The output is snapped to the grid 2⁻²⁰ Z: unsnapped, ``center − noise`` carries the center in its
    low-order bits (Mironov's attack), which the audit's threshold events can find.
    """
    def mech(data, source):
        u, r = source.uniform(2)
        if r < (refuse_1 if data["center"] else refuse_0):
            raise CertificationError("injected refusal")
        x = data["center"] - scale * np.sign(u - 0.5) * math.log1p(-2 * abs(u - 0.5))
        return np.array([np.round(x * 2.0**20) / 2.0**20])
    return mech


def test_audit_of_exact_laplace_is_sound_and_powerful():
    """A Laplace mechanism: the bound approaches but never exceeds ε; ×0.25 noise is caught."""
    def laplace(scale):
        return _refusing_laplace(scale, 0.0, 0.0)  # never refuses; snapped against Mironov's attack

    d0, d1 = {"center": 0.0}, {"center": 1.0}
    sound = audit(laplace(1.0), d0, d1, claimed_epsilon=1.0, runs=4000, random_state=1)
    broken = audit(laplace(0.25), d0, d1, claimed_epsilon=1.0, runs=4000, random_state=1)
    assert 0.4 < sound.epsilon_lower_bound <= 1.0 and not sound.violation
    assert broken.violation and broken.epsilon_lower_bound > 2.0


def test_refusals_are_outputs_a_one_sided_refusal_is_caught():
    """A mechanism with heavy noise (ε ≈ 0.01 on its outputs) that refuses only on one neighbour leaks."""
    d0, d1 = {"center": 0.0}, {"center": 1.0}
    r = audit(_refusing_laplace(100.0, 0.0, 0.2), d0, d1, claimed_epsilon=1.0, runs=2000, random_state=3)
    assert r.violation and r.epsilon_lower_bound > 2.0
    assert r.extra["refusals"][0] == 0 and 300 < r.extra["refusals"][1] < 500
    assert "refused 0/" in r.summary()


def test_refusals_at_equal_rates_stay_within_the_claim():
    d0, d1 = {"center": 0.0}, {"center": 1.0}
    r = audit(_refusing_laplace(1.0, 0.1, 0.1), d0, d1, claimed_epsilon=1.0, runs=4000, random_state=4)
    assert not r.violation and 0.3 < r.epsilon_lower_bound <= 1.0
    assert all(300 < k < 500 for k in r.extra["refusals"])


def test_a_mechanism_that_always_refuses_cannot_be_audited():
    with pytest.raises(CertificationError, match="nothing to audit"):
        audit(_refusing_laplace(1.0, 1.0, 1.0), {"center": 0.0}, {"center": 1.0}, claimed_epsilon=1.0,
              runs=40, random_state=0)


def test_a_side_that_always_refuses_is_audited_against_the_other():
    """{⊥} has probability 1 on one side and 0 on the other: the audit must say so, not give up."""
    r = audit(_refusing_laplace(1.0, 1.0, 0.0), {"center": 0.0}, {"center": 1.0}, claimed_epsilon=1.0,
              runs=200, random_state=0)
    assert r.extra["refusals"] == [200, 0] and r.violation and r.epsilon_lower_bound > 3.0


def test_which_exceptions_are_outputs():
    """By default only CertificationError is a refusal; ``exceptions=(Exception,)`` counts every one."""
    def raising(data, source):
        u = source.uniform(1)
        if data["center"] and u[0] < 0.5:
            raise DataError("injected")
        return u

    d0, d1 = {"center": 0.0}, {"center": 1.0}
    with pytest.raises(DataError):
        audit(raising, d0, d1, claimed_epsilon=1.0, runs=40, random_state=0)
    r = audit(raising, d0, d1, claimed_epsilon=1.0, runs=2000, random_state=0, exceptions=(Exception,))
    assert r.extra["refusals"][0] == 0 and 900 < r.extra["refusals"][1] < 1100
    assert r.extra["exceptions"] == [{}, {"DataError": r.extra["refusals"][1]}]
    assert r.violation  # P(⊥) = 1/2 against 0


@pytest.mark.parametrize("kind", NEIGHBOURS)
def test_neighbouring_pairs_move_the_answer_by_a_full_sensitivity(kind):
    model = lad_model(1)
    d0, d1 = neighbouring_pair(kind, n=40, d=1, lam=0.5)
    assert np.array_equal(d0["x"], d1["x"]) and (d0["y"] != d1["y"]).sum() == 1
    mech = output_perturbation_mechanism(model, epsilon=1.0, moment_k=4, G_k=2.0, lam=0.5)
    w0, m0 = mech.plan_for(d0)
    w1, _ = mech.plan_for(d1)
    gap = float(np.linalg.norm(w0 - w1))
    assert gap <= m0.sensitivity * (1 + 1e-9)
    if kind != "boundary":
        assert gap >= 0.9 * m0.sensitivity / 1.05   # nearly the whole sensitivity


def test_mechanism_adapter_matches_the_library():
    """The audited adapter uses exactly the constants PrivateProblem.solve uses (without a tail estimate)."""
    model = lad_model(1)
    d0, _ = neighbouring_pair("outlier", n=40, d=1)
    mech = output_perturbation_mechanism(model, epsilon=1.0, moment_k=4, G_k=2.0, lam=0.5)
    _, m = mech.plan_for(d0)
    res = PrivateProblem(model).solve(d0, epsilon=1.0, moment_k=4, G_k=2.0, lam=0.5,
                                      algorithm="output-perturbation", random_state=0, tail_share=0.0)
    entry = res.ledger.entries[0]
    assert entry.sensitivity == pytest.approx(m.sensitivity, rel=1e-12)
    assert entry.noise_scale == pytest.approx(m.scale, rel=1e-12)


@pytest.mark.parametrize("profile", ["tight", "paper"])
def test_reduced_audit_of_cvxdp(profile):
    """Both profiles audit below their claim; the deliberately broken one (noise ×0.25) is caught."""
    model = lad_model(1)
    d0, d1 = neighbouring_pair("outlier", n=40, d=1, magnitude=1e5)
    kw = dict(epsilon=1.0, moment_k=4, G_k=2.0, lam=0.5, profile=profile)
    sound = audit(output_perturbation_mechanism(model, **kw), d0, d1, claimed_epsilon=1.0,
                  runs=2000, random_state=2, name=profile)
    assert not sound.violation
    if profile == "tight":
        broken = audit(output_perturbation_mechanism(model, noise_factor=0.25, **kw), d0, d1,
                       claimed_epsilon=1.0, runs=2000, random_state=2, name="broken")
        assert broken.violation
