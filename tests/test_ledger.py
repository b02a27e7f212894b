"""The privacy ledger: sequential composition within a batch, parallel across disjoint batches."""

from __future__ import annotations

import numpy as np
import pytest

from cvxdp.error import ParameterError, PrivacyBudgetError
from cvxdp.ledger import PrivacyLedger


def test_sequential_and_parallel_composition():
    led = PrivacyLedger(100, 1.0)
    led.charge(0.3, np.arange(50), mechanism="m", batch="a")
    led.charge(0.7, np.arange(50), mechanism="m", batch="a")
    led.charge(1.0, np.arange(50, 100), mechanism="m", batch="b")  # disjoint: parallel
    assert led.spent == pytest.approx(1.0)
    assert np.allclose(led.per_example(), 1.0)
    assert led.verify() == pytest.approx(1.0)
    assert len(led.entries) == 3 and "spent ε = 1" in led.summary()


def test_overspending_is_refused_and_state_unchanged():
    led = PrivacyLedger(10, 1.0)
    led.charge(0.6, slice(0, 10), mechanism="m", batch="all")
    before = led.per_example()
    with pytest.raises(PrivacyBudgetError, match="refused"):
        led.charge(0.5, np.arange(3), mechanism="m", batch="some")
    assert np.array_equal(before, led.per_example()) and len(led.entries) == 1
    led.charge(0.4, np.arange(3), mechanism="m", batch="some")
    assert led.spent == pytest.approx(1.0)


def test_geometric_allocation_rounding_is_tolerated():
    led = PrivacyLedger(5, 1.0)
    thetas = np.array([0.04, 0.16, 0.8])
    thetas = thetas / thetas.sum()
    for t in thetas:
        led.charge(float(t), np.arange(5), mechanism="m", batch="b")
    assert led.spent <= 1.0 + 1e-12


@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_ledger_rejects_bad_budgets(eps):
    with pytest.raises(ParameterError):
        PrivacyLedger(10, eps)
    led = PrivacyLedger(10, 1.0)
    with pytest.raises(ParameterError):
        led.charge(eps, np.arange(3), mechanism="m", batch="b")
