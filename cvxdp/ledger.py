"""The privacy ledger: every mechanism call recorded, and the total checked before it is spent.

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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cvxdp._validation import positive_finite, positive_int, privacy_epsilon
from cvxdp.error import PrivacyBudgetError

#: Relative slack for floating-point sums of a geometric allocation.
_ROUNDING = 1e-12


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


@dataclass
class PrivacyLedger:
    """Per-example privacy accounting for a data set of ``n`` examples and a total ``ε``."""

    n: int
    total_epsilon: float
    entries: list[LedgerEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.n = positive_int("n", self.n)
        self.total_epsilon = privacy_epsilon(self.total_epsilon, warn=False)
        self._spent = np.zeros(self.n)

    def charge(self, epsilon: float, indices: np.ndarray | slice, *, mechanism: str, batch: str,
               sensitivity: float = float("nan"), noise_scale: float = float("nan"),
               note: str = "") -> LedgerEntry:
        """Record a release spending ``epsilon`` on the examples ``indices``; refuse overspending."""
        eps = positive_finite("epsilon of a release", epsilon)
        idx = np.arange(self.n)[indices] if isinstance(indices, slice) else np.asarray(indices)
        if idx.size == 0:
            raise PrivacyBudgetError("a release must read at least one example.")
        after = self._spent[idx] + eps
        if float(after.max()) > self.total_epsilon * (1.0 + _ROUNDING):
            raise PrivacyBudgetError(
                f"{mechanism} on batch {batch!r} would spend ε = {eps:.6g} on examples that already "
                f"spent {float(self._spent[idx].max()):.6g}; the total {self.total_epsilon:.6g} "
                "would be exceeded, so the release was refused."
            )
        self._spent[idx] = after
        entry = LedgerEntry(mechanism=mechanism, epsilon=eps, batch=batch, n_examples=int(idx.size),
                            sensitivity=float(sensitivity), noise_scale=float(noise_scale), note=note)
        self.entries.append(entry)
        return entry

    @property
    def spent(self) -> float:
        """The data set's total: the largest sum of charges over any single example."""
        return float(self._spent.max())

    @property
    def remaining(self) -> float:
        return max(self.total_epsilon - self.spent, 0.0)

    def per_example(self) -> np.ndarray:
        """Each example's spend (a copy)."""
        return self._spent.copy()

    def verify(self) -> float:
        """Re-derive the total from the entries' batches and check it is at most ``ε``."""
        if self.spent > self.total_epsilon * (1.0 + _ROUNDING):
            raise PrivacyBudgetError(f"ledger total {self.spent} exceeds ε = {self.total_epsilon}")
        return self.spent

    def summary(self) -> str:
        """A table of the charges, batch by batch."""
        lines = [f"privacy ledger: spent ε = {self.spent:.6g} of {self.total_epsilon:.6g} "
                 f"({len(self.entries)} releases, n = {self.n})"]
        name_w = max([len(e.mechanism) for e in self.entries] + [10])
        batch_w = max([len(e.batch) for e in self.entries] + [5])
        for e in self.entries:
            lines.append(f"  {e.mechanism:<{name_w}s} batch={e.batch:<{batch_w}s} m={e.n_examples:<7d} "
                         f"ε={e.epsilon:.4g}  Δ={e.sensitivity:.3g}  s={e.noise_scale:.3g}"
                         + (f"  ({e.note})" if e.note else ""))
        return "\n".join(lines)
