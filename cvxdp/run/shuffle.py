"""Algorithm 1's disjoint batches by a public rule: a keyed pseudo-random permutation of the row indices.

Algorithm 1 reads each example in one batch only (parallel composition), so its batches may be any
partition of the rows that does not depend on their values; a random one keeps an ordered data set
(sorted by label, by time) from giving each phase a biased slice.  The rule here: row ``g``
(``0 ≤ g < n``, rows numbered in the order given — partition after partition for partitioned data)
sits at position ``σ(g)`` of a permutation ``σ`` of ``[0, n)``, and batch ``b`` of the plan reads the
rows whose positions fall in ``[offset_b, offset_b + size_b)`` — exactly the planned sizes.

``σ`` is a four-round Feistel network on ``2h`` bits (``4^h ≥ n``) whose round function mixes the
right half with a round key (the SplitMix64 finalizer, Steele, Lea and Flood 2014), restricted to
``[0, n)`` by cycle walking (Black and Rogaway 2002): a bijection computed row by row from the row's
index, ``n`` and four 64-bit keys drawn from the fit's noise source — independent of the data.  So a
worker finds which of its rows a batch reads from their global indices alone, and the driver never
holds a per-row array of the data's size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cvxdp._validation import positive_int
from cvxdp.privacy.random import NoiseSource

_ROUNDS = 4
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """The SplitMix64 finalizer (a bijection of 64-bit words with good avalanche), wrapping."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class PublicShuffle:
    """The permutation ``σ`` of ``[0, n)`` fixed by ``keys`` (see the module docstring)."""

    n: int
    keys: tuple[int, ...]

    def __post_init__(self) -> None:
        positive_int("n", self.n)
        if len(self.keys) != _ROUNDS:
            raise ValueError(f"a public shuffle needs {_ROUNDS} round keys")

    @classmethod
    def draw(cls, source: NoiseSource, n: int) -> PublicShuffle:
        """Round keys from ``source`` (integers drawn exactly, independent of the data)."""
        return cls(int(n), tuple(source.randbelow(2**64) for _ in range(_ROUNDS)))

    @property
    def half_bits(self) -> int:
        return max(1, (max(self.n - 1, 1).bit_length() + 1) // 2)

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        h = np.uint64(self.half_bits)
        mask = np.uint64((1 << self.half_bits) - 1)
        left, right = x >> h, x & mask
        with np.errstate(over="ignore"):
            for key in self.keys:
                left, right = right, left ^ (_mix(right ^ np.uint64(key)) & mask)
        return (left << h) | right

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """``σ(g)`` for each row index ``g`` in ``rows`` (integers in ``[0, n)``), row by row."""
        g = np.asarray(rows, dtype=np.int64)
        if g.size and (int(g.min()) < 0 or int(g.max()) >= self.n):
            raise ValueError("row indices of a public shuffle must lie in [0, n)")
        x = self._feistel(g.astype(np.uint64))
        n = np.uint64(self.n)
        outside = x >= n
        while np.any(outside):  # cycle walking: a bijection of the 4^h-point domain restricted to [0, n)
            x[outside] = self._feistel(x[outside])
            outside = x >= n
        return x.astype(np.int64)

    def order(self) -> np.ndarray:
        """``σ⁻¹``: the row at each position (``order[σ(g)] = g``), for data held in this process."""
        out = np.empty(self.n, dtype=np.int64)
        out[self.positions(np.arange(self.n))] = np.arange(self.n)
        return out

    def rows_in(self, rows: np.ndarray, low: int, high: int) -> np.ndarray:
        """Which of ``rows`` sit at a position in ``[low, high)`` (a boolean mask over ``rows``)."""
        pos = self.positions(rows)
        return (pos >= low) & (pos < high)


__all__ = ["PublicShuffle"]
