"""The privacy ledger: every mechanism call recorded, and the total checked, exactly, before it is spent.

cvxdp accounts per example.  Each release charges its ``ε_j`` to the examples
it read (a *batch*); an example's spend is the sum of the charges that touch
it (sequential composition), and the data set's spend is the maximum over
examples (parallel composition across disjoint batches — every example used
by one phase of Algorithm 1 only).  This handles nested and adaptive schedules
without special cases.

:meth:`PrivacyLedger.charge` is called *before* noise is drawn and refuses
(:class:`~cvxdp.error.PrivacyBudgetError`) any charge that would take some
example past the granted total.  Charges depend only on the public schedule,
never on the data.

Exact arithmetic.  Every ``ε`` is a float, hence an exact dyadic rational; the
ledger adds them as :class:`fractions.Fraction` and compares with the total
exactly, so a release that would exceed ``ε`` by a single ulp is refused — there
is no rounding slack.  Examples are grouped by their *charge history* (the
sequence of releases that read them): all examples of a group have spent the
same exact amount, so the ledger keeps one integer group label per example and
one :class:`~fractions.Fraction` per group.  A population run on ``n = 10⁶``
examples has as many groups as batches, not one Fraction per example.

Reported figures: :attr:`PrivacyLedger.spent` is the exact spend rounded to the
nearest float.  Since the exact spend is at most the float total and rounding
to nearest is monotone, ``spent ≤ total_epsilon`` holds in floating point too.
:attr:`PrivacyLedger.remaining` is rounded *down*, so charging it always fits.
The exact values are :attr:`~PrivacyLedger.spent_exact` and
:attr:`~PrivacyLedger.remaining_exact`.

Splitting a budget so that the parts fit exactly: :func:`budget_remainder` (the
largest float ``r`` with ``Σ spent + r ≤ total`` exactly) and :func:`equal_share`
(the largest float ``e`` with ``parts · e ≤ total`` exactly).  ``ε/T`` charged
``T`` times can exceed ``ε`` (``10 × 0.1 > 1`` exactly, since the float ``0.1`` is
above 1/10); ``equal_share(ε, T)`` never does.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from cvxdp._validation import positive_finite, positive_int, privacy_epsilon
from cvxdp.error import ParameterError, PrivacyBudgetError
from cvxdp.numerics import float_down


def budget_remainder(total: float, *spent: float) -> float:
    """The largest float ``r`` with ``Σ spent + r ≤ total`` in exact arithmetic (may be ``≤ 0``).

    ``total − spent`` in floating point rounds to nearest, which can land half an
    ulp above the exact remainder: ``Fraction(0.1) + Fraction(1 − 0.1) > 1``.  This
    rounds down instead, so the parts of a split never exceed the whole.
    """
    rest = Fraction(float(total)) - sum((Fraction(float(s)) for s in spent), Fraction(0))
    return float_down(rest)


def equal_share(total: float, parts: int) -> float:
    """The largest float ``e`` with ``parts · e ≤ total`` in exact arithmetic.

    ``total/parts`` rounds to nearest and ``parts`` copies of it can exceed
    ``total`` (``10 · 0.1 > 1`` exactly); this is that quotient or the float just
    below it.
    """
    k = positive_int("parts", parts)
    return float_down(Fraction(float(total)) / k)


@dataclass(frozen=True)
class LedgerEntry:
    """One mechanism call."""

    mechanism: str
    epsilon: float
    batch: str
    n_examples: int
    sensitivity: float
    noise_scale: float
    note: str = ""


class ExactBudget:
    """What a budget in exact arithmetic reports, from its exact total ``_total`` and :attr:`spent_exact`.

    Shared by :class:`PrivacyLedger` (one call's releases) and
    :class:`~cvxdp.privacy.accountant.BudgetAccountant` (a budget across calls).
    """

    _total: Fraction

    @property
    def spent_exact(self) -> Fraction:  # pragma: no cover - every budget defines it
        raise NotImplementedError

    @property
    def spent(self) -> float:
        """:attr:`spent_exact` rounded to the nearest float (never above the float total)."""
        return float(self.spent_exact)

    @property
    def remaining_exact(self) -> Fraction:
        """The total minus :attr:`spent_exact`, exactly (never negative)."""
        return self._total - self.spent_exact

    @property
    def remaining(self) -> float:
        """The exact remainder rounded down: the most one more charge may spend."""
        return float_down(self.remaining_exact)


@dataclass
class PrivacyLedger(ExactBudget):
    """Per-example privacy accounting, in exact arithmetic, for ``n`` examples and a total ``ε``."""

    n: int
    total_epsilon: float
    entries: list[LedgerEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.n = positive_int("n", self.n)
        self.total_epsilon = privacy_epsilon(self.total_epsilon, warn=False)
        self._total = Fraction(self.total_epsilon)
        # examples with identical charge histories share a group: its exact spend, size and history
        self._group = np.zeros(self.n, dtype=np.intp)
        self._group_spent: list[Fraction] = [Fraction(0)]
        self._group_size: list[int] = [self.n]
        self._group_history: list[tuple[int, ...]] = [()]

    def _indices(self, indices: np.ndarray | slice) -> np.ndarray:
        if isinstance(indices, slice):
            return np.arange(self.n)[indices]
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (self.n,):
                raise ParameterError(f"a boolean mask of examples needs shape ({self.n},), got {idx.shape}.")
            return np.flatnonzero(idx)
        if idx.size == 0:
            return idx.astype(np.intp).reshape(-1)
        if not np.issubdtype(idx.dtype, np.integer) or idx.ndim != 1:
            raise ParameterError("the examples of a release must be a slice, a boolean mask or a 1-d array "
                                 "of integer indices.")
        if int(idx.min()) < 0 or int(idx.max()) >= self.n:
            raise ParameterError(f"example indices must lie in [0, {self.n}).")
        seen = np.zeros(self.n, dtype=bool)
        seen[idx] = True
        if np.count_nonzero(seen) != idx.size:  # repeated indices: a release reads each example once
            return np.flatnonzero(seen)
        return idx

    def charge(self, epsilon: float, indices: np.ndarray | slice, *, mechanism: str, batch: str,
               sensitivity: float = float("nan"), noise_scale: float = float("nan"),
               note: str = "") -> LedgerEntry:
        """Record a release spending ``epsilon`` on the examples ``indices``; refuse overspending.

        The check is exact: the release is refused if any example it reads would
        have spent more than ``total_epsilon`` as a sum of rationals, by however
        little.  A refused charge changes nothing.  The decision depends on the
        public schedule only (which examples, which ``ε``), never on the data.
        """
        eps = positive_finite("epsilon of a release", epsilon)
        idx = self._indices(indices)
        if idx.size == 0:
            raise PrivacyBudgetError("a release must read at least one example.")
        amount = Fraction(eps)
        groups = self._group[idx]
        tally = np.bincount(groups, minlength=len(self._group_size))
        touched = np.flatnonzero(tally)
        counts = tally[touched]
        before = max(self._group_spent[int(g)] for g in touched)
        if before + amount > self._total:
            raise PrivacyBudgetError(
                f"{mechanism} on batch {batch!r} would spend ε = {eps:.6g} on examples that already "
                f"spent {float(before):.6g}; the total {self.total_epsilon:.6g} would be exceeded (in exact "
                "arithmetic), so the release was refused."
            )
        entry = LedgerEntry(mechanism=mechanism, epsilon=eps, batch=batch, n_examples=int(idx.size),
                            sensitivity=float(sensitivity), noise_scale=float(noise_scale), note=note)
        number = len(self.entries)
        relabel = np.arange(len(self._group_size))
        for g, c in zip(touched.tolist(), counts.tolist(), strict=True):
            if c == self._group_size[g]:  # the whole group is read: it keeps its label
                self._group_spent[g] += amount
                self._group_history[g] += (number,)
                continue
            relabel[g] = len(self._group_size)  # part of it: the part read becomes a new group
            self._group_spent.append(self._group_spent[g] + amount)
            self._group_size.append(c)
            self._group_history.append(self._group_history[g] + (number,))
            self._group_size[g] -= c
        self._group[idx] = relabel[groups]
        self.entries.append(entry)
        return entry

    def _live(self) -> list[int]:
        return [g for g, size in enumerate(self._group_size) if size > 0]

    @property
    def spent_exact(self) -> Fraction:
        """The data set's total, exactly: the largest sum of charges over any single example."""
        return max(self._group_spent[g] for g in self._live())

    @property
    def groups(self) -> int:
        """How many distinct charge histories the examples have (the ledger's memory is one Fraction each)."""
        return len(self._live())

    def per_example(self) -> np.ndarray:
        """Each example's spend, rounded to the nearest float (a new array)."""
        values = np.array([float(s) for s in self._group_spent])
        return values[self._group]

    def per_example_exact(self, index: int) -> Fraction:
        """One example's exact spend."""
        if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= int(index) < self.n:
            raise ParameterError(f"example index must be an integer in [0, {self.n}), got {index!r}.")
        return self._group_spent[int(self._group[int(index)])]

    def verify(self) -> float:
        """Re-derive every example's spend from the entries and check, exactly, that it is at most ``ε``.

        Each group's spend is recomputed as the exact sum of the ``ε`` of the
        entries in its history, each entry's ``n_examples`` as the number of
        examples whose history contains it; any mismatch, or a total above ``ε``,
        raises :class:`~cvxdp.error.PrivacyBudgetError`.  Returns :attr:`spent`.
        """
        live = self._live()
        readers = [0] * len(self.entries)
        for g in live:
            history = self._group_history[g]
            if sum((Fraction(self.entries[i].epsilon) for i in history), Fraction(0)) != self._group_spent[g]:
                raise PrivacyBudgetError("the ledger's running totals disagree with its entries.")
            for i in history:
                readers[i] += self._group_size[g]
        if sum(self._group_size[g] for g in live) != self.n or any(
                r != e.n_examples for r, e in zip(readers, self.entries, strict=True)):
            raise PrivacyBudgetError("the ledger's batches disagree with its entries.")
        if self.spent_exact > self._total:
            raise PrivacyBudgetError(f"ledger total {self.spent!r} exceeds ε = {self.total_epsilon!r}.")
        return self.spent

    def summary(self) -> str:
        """A table of the charges, batch by batch."""
        lines = [f"privacy ledger: spent ε = {self.spent:.6g} of {self.total_epsilon:.6g} "
                 f"({len(self.entries)} releases, n = {self.n}; exact sums)"]
        name_w = max([len(e.mechanism) for e in self.entries] + [10])
        batch_w = max([len(e.batch) for e in self.entries] + [5])
        for e in self.entries:
            lines.append(f"  {e.mechanism:<{name_w}s} batch={e.batch:<{batch_w}s} m={e.n_examples:<7d} "
                         f"ε={e.epsilon:.4g}  Δ={e.sensitivity:.3g}  s={e.noise_scale:.3g}"
                         + (f"  ({e.note})" if e.note else ""))
        return "\n".join(lines)


__all__ = ["LedgerEntry", "PrivacyLedger", "budget_remainder", "equal_share"]
