"""A privacy budget across calls: one :class:`BudgetAccountant` shared by every fit of the same data.

Each ``PrivateProblem.solve(..., epsilon=ε_i)`` (and each estimator ``fit``) is
``ε_i``-DP on its own; its :class:`~cvxdp.privacy.ledger.PrivacyLedger` only sees that
call.  Several calls on the same data compose *sequentially*: releasing all of
their outputs is ``(Σ ε_i)``-DP — also when each call and its ``ε_i`` are chosen
after seeing the earlier outputs, as long as the running sum is capped by a
budget fixed in advance (for pure DP, basic composition is a valid privacy
*filter*: Rogers, Roth, Ullman and Vadhan 2016).  The accountant is that cap:

    acc = cvxdp.BudgetAccountant(1.0)
    problem.solve(data, epsilon=0.6, ..., accountant=acc)   # spends 0.6
    problem.solve(data, epsilon=0.6, ..., accountant=acc)   # PrivacyBudgetError: only 0.4 left

``solve`` charges the call's full ``ε`` right after validating its arguments and
before it reads the data or draws any noise; a refused call touches neither and
spends nothing.  The decision compares public numbers only (the budgets asked
for), so the refusal itself reveals nothing about the data.  A call that fails
*after* the charge (for example on invalid data) keeps its charge: that failure
may itself depend on the data, so the budget stays spent.

Arithmetic is exact (:class:`fractions.Fraction` of the float budgets, as in the
ledger).  The float ``0.1`` is slightly above ``1/10``, so ten charges of ``0.1``
exceed a total of ``1.0`` and the tenth is refused; :meth:`BudgetAccountant.split`
gives the largest float ``e`` such that ``k`` charges of ``e`` fit exactly
(``split(10)`` of a fresh ``BudgetAccountant(1.0)`` is ``0.09999999999999999``).

What it does not do: it sums every charge, so calls on *disjoint* data (which
compose in parallel) are over-counted — use one accountant per data set.  An
accountant is one object in one process: ``copy.copy``/``copy.deepcopy`` (and so
``sklearn.base.clone``, which ``GridSearchCV`` uses) return the same object, so
every fit spends from one budget; a copy that crossed a pickle boundary (another
process, e.g. ``GridSearchCV(n_jobs=2)`` with joblib's process backend, or a model
saved and loaded) refuses to spend, since what it spent would never reach the
original.  Run such searches with ``n_jobs=1`` (threads are safe: spending is
locked), or give each process its own accountant for a share of the budget.
"""

from __future__ import annotations

import threading
from fractions import Fraction

from cvxdp._validation import positive_finite, positive_int, privacy_epsilon
from cvxdp.error import ParameterError, PrivacyBudgetError
from cvxdp.numerics import float_down
from cvxdp.privacy.ledger import ExactBudget


class BudgetAccountant(ExactBudget):
    """A total privacy budget ``ε`` spent, exactly, by a sequence of ε-DP calls on the same data.

    Parameters
    ----------
    epsilon:
        The total (finite, at least ``1e-10``; above 100 warns that it protects nothing).

    Attributes
    ----------
    total, spent, remaining:
        The total, the exact sum of the charges rounded to the nearest float
        (never above ``total``), and the exact remainder rounded *down* (so
        ``spend(remaining)`` always fits).  ``spent_exact`` and
        ``remaining_exact`` are the exact :class:`~fractions.Fraction` values.
    history:
        The charges so far, as ``(label, ε)`` pairs, in order.
    """

    def __init__(self, epsilon: float) -> None:
        self._total_float = privacy_epsilon(epsilon)
        self._total = Fraction(self._total_float)
        self._spent = Fraction(0)
        self._history: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        self._restored = False

    # -- figures -----------------------------------------------------------------------------------
    @property
    def total(self) -> float:
        return self._total_float

    @property
    def spent_exact(self) -> Fraction:
        return self._spent

    @property
    def history(self) -> list[tuple[str, float]]:
        return list(self._history)

    # -- spending ----------------------------------------------------------------------------------
    def _refusal(self, eps: float, label: str) -> str | None:
        if self._spent + Fraction(eps) <= self._total:
            return None
        what = f" for {label!r}" if label else ""
        return (f"spending ε = {eps!r}{what} would exceed the budget: {self.spent!r} of {self.total!r} is "
                f"already spent and {self.remaining!r} remains (exact arithmetic), so the call was refused "
                "before touching the data. Ask for at most the remaining budget (see split() for equal "
                "shares) or use a larger total.")

    def check(self, epsilon: float, label: str = "") -> bool:
        """``True`` if ``epsilon`` can be spent now; raises :class:`~cvxdp.error.PrivacyBudgetError` if not.

        Spends nothing.  The answer depends only on the public budgets (and, like
        :meth:`spend`, is a refusal for an accountant restored from a pickle).
        """
        eps = positive_finite("epsilon", epsilon)
        self._refuse_if_restored()
        message = self._refusal(eps, label)
        if message is not None:
            raise PrivacyBudgetError(message)
        return True

    def spend(self, epsilon: float, label: str = "") -> BudgetAccountant:
        """Charge ``epsilon`` (exactly) under ``label``, or refuse and change nothing.

        Raises :class:`~cvxdp.error.PrivacyBudgetError` if the exact sum of the
        charges would exceed the total, by however little, or if this accountant
        was restored from a pickle (a copy in another process or session, whose
        spending the original would never see).  Returns the accountant.
        """
        eps = positive_finite("epsilon", epsilon)
        if not isinstance(label, str):
            raise ParameterError(f"label must be a string, got {type(label).__name__}.")
        self._refuse_if_restored()
        with self._lock:
            message = self._refusal(eps, label)
            if message is not None:
                raise PrivacyBudgetError(message)
            self._spent += Fraction(eps)
            self._history.append((label, eps))
        return self

    def _refuse_if_restored(self) -> None:
        if self._restored:
            raise PrivacyBudgetError(
                "this BudgetAccountant was restored from a pickle (for example sent to another process "
                "by joblib, or saved and loaded): what it spends would not reach the original, so it "
                "refuses to spend. Run the calls in one process (n_jobs=1) or give each process its own "
                "BudgetAccountant for its share of the budget.")

    def split(self, parts: int) -> float:
        """The largest float ``e`` such that ``parts`` charges of ``e`` fit in the remaining budget exactly.

        ``remaining / parts`` in floating point can be an ulp too large (``1.0/10`` is
        the float ``0.1 > 1/10``); this rounds the exact quotient down.
        """
        k = positive_int("parts", parts)
        return float_down(self.remaining_exact / k)

    # -- identity: one budget, one object ------------------------------------------------------------
    def __copy__(self) -> BudgetAccountant:
        return self

    def __deepcopy__(self, memo: dict) -> BudgetAccountant:
        return self

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._restored = True

    # -- display -----------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (f"BudgetAccountant(epsilon={self.total!r}, spent={self.spent!r}, "
                f"remaining={self.remaining!r}, charges={len(self._history)})")

    def summary(self) -> str:
        """The total, what is spent and what remains, and one line per charge."""
        lines = [f"privacy budget: spent ε = {self.spent:.6g} of {self.total:.6g}, "
                 f"{self.remaining:.6g} remaining ({len(self._history)} charges; exact sums)"]
        width = max([len(label) for label, _ in self._history] + [5])
        for i, (label, eps) in enumerate(self._history, start=1):
            lines.append(f"  {i:>3d}. {label or '-':<{width}s} ε = {eps:.6g}")
        return "\n".join(lines)


__all__ = ["BudgetAccountant"]
