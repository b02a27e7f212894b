"""The privacy ledger: sequential composition within a batch, parallel across disjoint batches, exactly."""

from __future__ import annotations

import math
import pickle
import warnings
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvxdp
from cvxdp.datasets import student_t_lad
from cvxdp.error import ParameterError, PrivacyBudgetError
from cvxdp.numerics import float_down, float_up
from cvxdp.plan.profiles import PaperProfile, TightProfile
from cvxdp.plan.schedule import allocation
from cvxdp.privacy.ledger import PrivacyLedger, budget_remainder, equal_share


def test_sequential_and_parallel_composition():
    led = PrivacyLedger(100, 1.0)
    led.charge(0.25, np.arange(50), mechanism="m", batch="a")
    led.charge(0.75, np.arange(50), mechanism="m", batch="a")
    led.charge(1.0, np.arange(50, 100), mechanism="m", batch="b")  # disjoint: parallel
    assert led.spent == 1.0 and led.spent_exact == 1 and led.remaining == 0.0
    assert np.array_equal(led.per_example(), np.ones(100))
    assert led.verify() == 1.0
    assert len(led.entries) == 3 and "spent ε = 1" in led.summary() and led.groups == 2


def test_overspending_is_refused_and_state_unchanged():
    led = PrivacyLedger(10, 1.0)
    led.charge(0.6, slice(0, 10), mechanism="m", batch="all")
    before = led.per_example()
    with pytest.raises(PrivacyBudgetError, match="refused"):
        led.charge(0.5, np.arange(3), mechanism="m", batch="some")
    assert np.array_equal(before, led.per_example()) and len(led.entries) == 1 and led.groups == 1
    led.charge(0.4, np.arange(3), mechanism="m", batch="some")
    assert led.spent_exact == Fraction(0.6) + Fraction(0.4) <= 1 and led.verify() == led.spent


def test_one_ulp_over_the_total_is_refused():
    """No relative slack: exact arithmetic refuses a charge that would exceed ε by one ulp."""
    led = PrivacyLedger(4, 1.0)
    led.charge(0.5, slice(None), mechanism="m", batch="all")
    with pytest.raises(PrivacyBudgetError):
        led.charge(math.nextafter(0.5, 1.0), slice(None), mechanism="m", batch="all")
    led.charge(0.5, slice(None), mechanism="m", batch="all")
    assert led.spent_exact == 1
    with pytest.raises(PrivacyBudgetError):
        led.charge(5e-324, [0], mechanism="m", batch="one")  # the smallest positive float
    for total in (1.0, 3.7, 1e-10):
        ledger = PrivacyLedger(2, total)
        with pytest.raises(PrivacyBudgetError):
            ledger.charge(total * (1 + 1e-13), slice(None), mechanism="m", batch="all")  # the old slack
        with pytest.raises(PrivacyBudgetError):
            ledger.charge(math.nextafter(total, math.inf), slice(None), mechanism="m", batch="all")
        ledger.charge(total, slice(None), mechanism="m", batch="all")


def test_ten_charges_of_a_tenth_exceed_one_and_equal_shares_do_not():
    """The float 0.1 is above 1/10, so ten of them exceed 1 exactly: the tenth is refused."""
    assert 10 * Fraction(0.1) > 1
    led = PrivacyLedger(3, 1.0)
    for _ in range(9):
        led.charge(0.1, slice(None), mechanism="m", batch="all")
    with pytest.raises(PrivacyBudgetError):
        led.charge(0.1, slice(None), mechanism="m", batch="all")
    # what is left is rounded down, so it can always be charged
    assert Fraction(led.remaining) <= led.remaining_exact < Fraction(math.nextafter(led.remaining, 1.0))
    led.charge(led.remaining, slice(None), mechanism="m", batch="all")
    assert led.spent_exact <= 1 and led.spent <= 1.0
    share = equal_share(1.0, 10)
    assert share == math.nextafter(0.1, 0.0)
    ok = PrivacyLedger(3, 1.0)
    for _ in range(10):
        ok.charge(share, slice(None), mechanism="m", batch="all")
    assert ok.spent_exact == 10 * Fraction(share) <= 1


@settings(max_examples=300, deadline=None)
@given(total=st.floats(1e-10, 1e3), spent=st.lists(st.floats(0.0, 1e3), max_size=4),
       parts=st.integers(1, 10**6))
def test_splitting_helpers_are_exact_and_as_large_as_possible(total, spent, parts):
    rest = budget_remainder(total, *spent)
    used = sum((Fraction(s) for s in spent), Fraction(0))
    assert used + Fraction(rest) <= Fraction(total) < used + Fraction(math.nextafter(rest, math.inf))
    share = equal_share(total, parts)
    assert parts * Fraction(share) <= Fraction(total) < parts * Fraction(math.nextafter(share, math.inf))
    q = Fraction(total) / 3
    assert Fraction(float_down(q)) <= q <= Fraction(float_up(q))
    assert float_up(q) - float_down(q) <= math.ulp(float(q))


@settings(max_examples=300, deadline=None)
@given(eps=st.floats(1e-10, 100.0), share=st.sampled_from([0.0, 0.05, 0.1, 0.2, 0.3, 0.37, 0.5]),
       k=st.one_of(st.sampled_from([2.0, 3.0, 4.0, 8.0, 1000.0]), st.floats(2.0, 1000.0)),
       S=st.integers(1, 8))
def test_a_full_solve_plan_never_exceeds_epsilon_exactly(eps, share, k, S):
    """Tail share, fit remainder and the geometric split of the fit: the exact sum of every charge ≤ ε.

    This is the arithmetic of ``PrivateProblem.solve`` (``eps_tail = share·ε``, ``eps_fit`` the
    remainder rounded down, ``ε_j = profile.round_epsilons(eps_fit, allocation(S, k))``), checked in
    rationals and by the ledger itself, which refuses an exact overspend.
    """
    thetas = allocation(S, k)
    assert np.all(thetas > 0) and sum(Fraction(float(t)) for t in thetas) <= 1
    eps_tail = share * eps
    eps_fit = budget_remainder(eps, eps_tail) if share else eps
    for profile in (TightProfile(), PaperProfile()):
        rounds = [float(e) for e in profile.round_epsilons(eps_fit, thetas)]
        charges = ([eps_tail] if share else []) + rounds
        assert sum(Fraction(c) for c in charges) <= Fraction(eps)
        led = PrivacyLedger(5, eps)
        for c in charges:
            led.charge(c, slice(None), mechanism="m", batch="all")
        assert led.spent_exact <= Fraction(eps) and led.spent <= eps and led.verify() <= eps


def test_the_recorded_total_above_one_is_gone():
    """ε = 1, k = 4, four rounds, the default 10% tail share: the old arithmetic recorded 1.0000000000000002.

    It took ``eps_fit = ε − eps_tail`` rounded to nearest, shares normalized to sum to one in floating
    point, per-example float sums, and a 1e-12 relative slack that let the excess through.
    """
    eps, S, k = 1.0, 4, 4.0
    a = 1.0 / (k + 1.0)
    old = (1.0 - a) * a ** (S - 1 - np.arange(S)) / (1.0 - a**S)
    old = old / old.sum()
    spent = np.zeros(1) + 0.1
    for e in (eps - 0.1) * old:
        spent = spent + float(e)
    assert spent[0] == 1.0000000000000002  # the figure: this instance is the one that broke
    led = PrivacyLedger(10, eps)
    led.charge(0.1, slice(None), mechanism="private tail histogram", batch="all")
    for e in TightProfile().round_epsilons(budget_remainder(eps, 0.1), allocation(S, k)):
        led.charge(float(e), slice(None), mechanism="localized output perturbation", batch="all")
    assert led.spent_exact <= 1 and led.spent <= 1.0 and led.verify() <= 1.0


@pytest.mark.parametrize(("algorithm", "epsilons"), [("recursive", (1.0, 0.3, 0.7)), ("population", (1.0,)),
                                                     ("output-perturbation", (1.0, 0.3, 0.7))])
def test_a_real_solve_charges_at_most_epsilon_exactly(algorithm, epsilons):
    task = student_t_lad(n=400, d=2, nu=5.0, n_test=10, seed=0)
    w = cp.Variable(2)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])
    for eps in epsilons:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = cvxdp.PrivateProblem(model).solve({"x": task.X_train, "y": task.y_train}, epsilon=eps,
                                                  moment_k=4.0, G_k=task.G(4.0), algorithm=algorithm,
                                                  random_state=1)
        assert r.ledger.entries[0].mechanism == "private tail histogram"
        assert r.ledger.spent_exact <= Fraction(eps) and r.ledger.spent <= eps
        # the histogram reads everyone; each example's other charges are one batch's rounds
        by_batch: dict[str, Fraction] = {}
        for e in r.ledger.entries[1:]:
            by_batch[e.batch] = by_batch.get(e.batch, Fraction(0)) + Fraction(e.epsilon)
        assert Fraction(r.ledger.entries[0].epsilon) + max(by_batch.values()) <= Fraction(eps)
        assert r.ledger.verify() == r.ledger.spent


def test_groups_keep_the_ledger_small_for_a_million_examples():
    """A population-like schedule on n = 10⁶: one Fraction per distinct charge history, not per example."""
    n = 10**6
    led = PrivacyLedger(n, 1.0)
    led.charge(0.1, slice(None), mechanism="histogram", batch="all")
    order = np.random.default_rng(0).permutation(n)
    rounds = [float(e) for e in 0.875 * allocation(3, 4.0)]
    start, batches = 0, 0
    for t in range(1, 11):
        size = n // 2**t
        for group in np.array_split(order[start:start + size], 5):
            batches += 1
            for e in rounds:
                led.charge(e, group, mechanism="m", batch=f"{t}/{batches}")
        start += size
    assert led.groups == batches + 1  # each batch, and the examples no phase used
    spent = led.per_example()
    assert np.all(spent[order[start:]] == 0.1)
    expected = float(Fraction(0.1) + sum(Fraction(e) for e in rounds))
    assert np.all(spent[order[:start]] == expected) and led.spent == expected
    assert led.per_example_exact(int(order[0])) == Fraction(0.1) + sum(Fraction(e) for e in rounds)
    assert led.verify() == expected


def test_verify_rederives_the_totals_from_the_entries():
    led = PrivacyLedger(6, 1.0)
    led.charge(0.5, [0, 1, 2], mechanism="m", batch="a")
    led.charge(0.25, [2, 3], mechanism="m", batch="b")
    assert led.verify() == 0.75 and led.groups == 4
    from dataclasses import replace

    tampered = pickle.loads(pickle.dumps(led))
    assert tampered.verify() == 0.75  # a pickled ledger keeps its exact state
    tampered.entries[1] = replace(tampered.entries[1], epsilon=0.125)
    with pytest.raises(PrivacyBudgetError, match="disagree"):
        tampered.verify()
    tampered = pickle.loads(pickle.dumps(led))
    tampered.entries[0] = replace(tampered.entries[0], n_examples=6)
    with pytest.raises(PrivacyBudgetError, match="disagree"):
        tampered.verify()


def test_indices_are_validated_and_read_once():
    led = PrivacyLedger(5, 1.0)
    led.charge(0.5, [1, 1, 3], mechanism="m", batch="dup")  # repeated indices: each example read once
    assert led.entries[0].n_examples == 2 and list(led.per_example()) == [0, 0.5, 0, 0.5, 0]
    led.charge(0.5, np.array([True, True, False, False, False]), mechanism="m", batch="mask")
    assert list(led.per_example()) == [0.5, 1.0, 0, 0.5, 0]
    for bad in ([-1], [5], [0.5], np.zeros((2, 2), dtype=int), np.array([True, False])):
        with pytest.raises(ParameterError):
            led.charge(0.1, bad, mechanism="m", batch="bad")
    with pytest.raises(PrivacyBudgetError, match="at least one"):
        led.charge(0.1, [], mechanism="m", batch="empty")
    with pytest.raises(ParameterError):
        led.per_example_exact(7)
    assert len(led.entries) == 2


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_ledger_rejects_bad_budgets(eps):
    with pytest.raises(ParameterError):
        PrivacyLedger(10, eps)
    led = PrivacyLedger(10, 1.0)
    with pytest.raises(ParameterError):
        led.charge(eps, np.arange(3), mechanism="m", batch="b")
    with pytest.raises(ParameterError):
        equal_share(1.0, 0)
