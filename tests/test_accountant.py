"""A budget across calls: the accountant's exact arithmetic, its refusals, and its use by ``solve``."""

from __future__ import annotations

import copy
import math
import pickle
import threading
from collections.abc import Mapping
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from conftest import CountingSource

import cvxdp
from cvxdp.datasets import student_t_lad
from cvxdp.error import DataError, ParameterError, PrivacyBudgetError
from cvxdp.privacy.accountant import BudgetAccountant

pytestmark = [pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning"),
              pytest.mark.filterwarnings("ignore::cvxdp.error.UtilityWarning")]


class _Untouchable(Mapping):
    """Data that fail the test if anything reads them."""

    def __getitem__(self, key):
        pytest.fail("the data were read")

    def __iter__(self):
        pytest.fail("the data were read")

    def __len__(self):
        pytest.fail("the data were read")


def _problem(n=300, d=2):
    task = student_t_lad(n=n, d=d, nu=5.0, n_test=10, seed=0)
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])
    kw = dict(moment_k=4.0, G_k=task.G(4.0), algorithm="output-perturbation")
    return cvxdp.PrivateProblem(model), {"x": task.X_train, "y": task.y_train}, kw


def test_spend_check_history_and_display():
    acc = cvxdp.BudgetAccountant(1.0)
    assert (acc.total, acc.spent, acc.remaining, acc.history) == (1.0, 0.0, 1.0, [])
    assert acc.check(0.25) is True and acc.spent == 0.0  # check spends nothing
    assert acc.spend(0.25, label="first") is acc
    acc.spend(0.5)
    assert acc.spent == 0.75 and acc.remaining == 0.25 and acc.history == [("first", 0.25), ("", 0.5)]
    assert acc.spent_exact == Fraction(3, 4) and acc.remaining_exact == Fraction(1, 4)
    with pytest.raises(PrivacyBudgetError, match="refused"):
        acc.check(0.5)
    with pytest.raises(PrivacyBudgetError, match="second"):
        acc.spend(0.5, label="second")
    assert acc.spent == 0.75 and len(acc.history) == 2  # a refusal changes nothing
    acc.spend(0.25)
    assert acc.remaining == 0.0
    with pytest.raises(PrivacyBudgetError):
        acc.spend(5e-324)  # even the smallest float: the total is reached exactly
    assert repr(acc) == "BudgetAccountant(epsilon=1.0, spent=1.0, remaining=0.0, charges=3)"
    text = acc.summary()
    assert "spent ε = 1 of 1" in text and "first" in text and text.count("\n") == 3


def test_ten_tenths_do_not_fit_in_one_and_split_gives_shares_that_do():
    """0.1 as a float is above 1/10: ten charges exceed 1.0 exactly, so the tenth is refused."""
    acc = BudgetAccountant(1.0)
    for _ in range(9):
        acc.spend(0.1)
    with pytest.raises(PrivacyBudgetError):
        acc.spend(0.1)
    assert acc.spent_exact == 9 * Fraction(0.1) and len(acc.history) == 9
    acc.spend(acc.remaining)  # the remainder is rounded down, so it always fits
    assert acc.spent_exact <= 1 and acc.spent <= 1.0
    fresh = BudgetAccountant(1.0)
    share = fresh.split(10)
    assert share == math.nextafter(0.1, 0.0) == 0.09999999999999999
    for _ in range(10):
        fresh.spend(share)
    assert fresh.spent_exact == 10 * Fraction(share) <= 1
    with pytest.raises(ParameterError):
        fresh.split(0)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "1", None, 1e-11])
def test_bad_budgets_and_charges_are_refused(bad):
    with pytest.raises(ParameterError):
        BudgetAccountant(bad)
    if bad != 1e-11:  # a tiny charge is fine, only a tiny total is refused (as any ε below 1e-10)
        with pytest.raises(ParameterError):
            BudgetAccountant(1.0).spend(bad)
        with pytest.raises(ParameterError):
            BudgetAccountant(1.0).check(bad)
    with pytest.raises(ParameterError):
        BudgetAccountant(1.0).spend(0.1, label=3)


def test_one_accountant_is_one_object_and_a_pickled_copy_refuses_to_spend():
    from sklearn.base import clone

    acc = BudgetAccountant(1.0)
    assert copy.copy(acc) is acc and copy.deepcopy(acc) is acc and copy.deepcopy([acc])[0] is acc
    est = cvxdp.PrivateLADRegressor(G_k=2.0, accountant=acc)
    assert clone(est).accountant is acc  # sklearn's clone (GridSearchCV) keeps the shared budget
    acc.spend(0.25, label="kept")
    restored = pickle.loads(pickle.dumps(acc))
    assert restored.spent == 0.25 and restored.history == [("kept", 0.25)]
    with pytest.raises(PrivacyBudgetError, match="pickle"):
        restored.spend(0.1)
    with pytest.raises(PrivacyBudgetError, match="pickle"):
        restored.check(0.1)
    acc.spend(0.25)  # the original is unaffected
    assert acc.spent == 0.5


def test_concurrent_spending_never_exceeds_the_total():
    acc = BudgetAccountant(0.5)
    outcomes = []
    barrier = threading.Barrier(8)

    def work():
        barrier.wait()
        try:
            acc.spend(0.125)
            outcomes.append(True)
        except PrivacyBudgetError:
            outcomes.append(False)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == [False] * 4 + [True] * 4 and acc.spent_exact == Fraction(1, 2)


def test_two_solves_on_one_accountant_the_second_refused_before_any_noise_or_data():
    problem, data, kw = _problem()
    acc = BudgetAccountant(1.0)
    first = CountingSource(0)
    r = problem.solve(data, epsilon=0.6, accountant=acc, random_state=first, **kw)
    assert first.draws > 0 and first.integers > 0  # the counters see both kinds of noise
    label = "PrivateProblem.solve(algorithm='output-perturbation')"
    assert acc.spent == 0.6 and acc.history == [(label, 0.6)]
    assert r.ledger.spent_exact <= Fraction(0.6)
    second = CountingSource(1)
    with pytest.raises(PrivacyBudgetError, match="refused"):
        problem.solve(data, epsilon=0.6, accountant=acc, random_state=second, **kw)
    assert second.draws == 0 and second.integers == 0
    assert acc.spent == 0.6 and len(acc.history) == 1  # the refused call spent nothing
    with pytest.raises(PrivacyBudgetError):  # and it never reads the data
        problem.solve(_Untouchable(), epsilon=0.6, accountant=acc, random_state=second, **kw)
    r = problem.solve(data, epsilon=acc.remaining, accountant=acc, random_state=2, **kw)
    assert acc.spent_exact <= 1 and acc.remaining < 1e-15 and len(acc.history) == 2
    assert r.epsilon == acc.history[-1][1]


def test_solve_validates_the_accountant_and_its_arguments_before_charging():
    problem, data, kw = _problem()
    acc = BudgetAccountant(1.0)
    with pytest.raises(ParameterError, match="BudgetAccountant"):
        problem.solve(data, epsilon=0.5, accountant=1.0, **kw)
    with pytest.raises(ParameterError):
        problem.solve(data, epsilon=0.5, accountant=acc, random_state="seed", **kw)
    with pytest.raises(ParameterError):
        problem.solve(data, epsilon=float("nan"), accountant=acc, **kw)
    with pytest.raises(ParameterError):
        problem.solve(data, epsilon=0.5, accountant=acc, **dict(kw, algorithm="magic"))
    assert acc.spent == 0.0 and acc.history == []


def test_a_call_that_fails_on_its_data_after_the_charge_keeps_it():
    """Invalid data are found after the charge; that failure may depend on the data, so ε stays spent."""
    problem, data, kw = _problem()
    bad = {"x": data["x"].copy(), "y": data["y"].copy()}
    bad["y"][3] = np.nan
    acc = BudgetAccountant(1.0)
    with pytest.raises(DataError):
        problem.solve(bad, epsilon=0.4, accountant=acc, random_state=0, **kw)
    assert acc.spent == 0.4


def test_a_search_over_epsilon_spends_from_one_budget():
    """A search over ε the way GridSearchCV runs it (``clone`` + ``set_params`` + ``fit`` per grid point
    and fold, then a refit): every fit is charged to the one shared accountant, and the search that
    does not fit in what is left is refused at its first fit."""
    from sklearn.base import clone

    task = student_t_lad(n=300, d=2, nu=5.0, n_test=10, seed=1)
    X, y = task.X_train, task.y_train
    acc = BudgetAccountant(2.0)
    est = cvxdp.PrivateLADRegressor(G_k=task.G(4.0), algorithm="output-perturbation", radius=2.0,
                                    fit_intercept=False, random_state=0, accountant=acc)

    def search():
        folds = np.array_split(np.arange(X.shape[0]), 2)
        for eps in (0.25, 0.5):
            for fold in folds:
                clone(est).set_params(epsilon=eps).fit(np.delete(X, fold, axis=0), np.delete(y, fold))
        clone(est).set_params(epsilon=0.5).fit(X, y)  # the refit

    search()
    assert acc.spent_exact == 2 * Fraction(0.25) + 3 * Fraction(0.5) == 2 and len(acc.history) == 5
    with pytest.raises(PrivacyBudgetError):
        search()
    assert len(acc.history) == 5
