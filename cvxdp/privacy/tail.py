"""Private knowledge of the tail: per-example Lipschitz constants, a DP histogram, and ``G_k``.

The heavy-tailed guarantee needs a moment bound ``E A(z)^k ≤ G_k^k`` on the
per-example Lipschitz constants ``A(z) = sup_{w∈W} ||∂f(w, z)||``, and the
localization radii need the extension's bias ``E (A − C)₊``.  Users rarely
know either; reading them off the training data would break privacy.
:func:`private_tail_profile` spends a stated share of ε on a pure-DP histogram
of ``log A(z_i)`` over a public geometric grid and turns it into

* an estimate of ``G_k`` (each value one fine bin below its bin's upper edge,
  :meth:`TailProfile.values`: the lower edge of a fine bin, at most ``√2`` below the truth there), and
* an estimate of the bias curve ``C ↦ E(A − C)₊``, used by the tight profile to
  choose ``C`` and the radii.

Privacy: replacing one example moves one count down and one up, so the
integer histogram has ℓ1 sensitivity 2, and discrete Laplace (two-sided
geometric) noise ``P(Z = z) ∝ exp(−ε_h|z|/2)`` on each count makes it
``ε_h``-DP: the noisy counts ``o`` have ``P(o | c)/P(o | c') =
exp(ε_h(||o − c'||₁ − ||o − c||₁)/2) ≤ exp(ε_h)``.  The noise is sampled exactly
(:meth:`~cvxdp.privacy.random.NoiseSource.discrete_laplace`, scale the exact rational
``2/ε_h`` of the float ``ε_h``) from integers drawn from the CSPRNG: no float
uniform, so no truncated tail and no event where pure DP fails.
Thresholding, renormalizing and everything derived from it are
post-processing.  The charge goes to every example in the ledger.

Small samples: with ``J`` bins of width ``2^{1/b}`` the threshold
``(2/ε_h) log(2(J+2)/β)`` can exceed every count (a few hundred examples at
``ε_h = 0.1``).  The histogram is then *coarsened* — adjacent noisy counts summed
in blocks of 2, 4, 8, … with a threshold valid for a sum of discrete Laplace
noises (:func:`sum_laplace_threshold`) — until the bins that survive hold at least half
of the ``n`` examples (failing that, the level that saw the most is kept, with a
:class:`~cvxdp.error.UtilityWarning` when its bins are wide).  When no level sees anything the
profile is marked unseen (:attr:`TailProfile.seen`): it gives no scale, and the planner does not
plan a fit for a stand-in (:meth:`~cvxdp.plan.planner.Planner.plan`).  Summing released
noisy counts is post-processing: no extra privacy is spent; a coarser bin only
knows its values less precisely.

What the estimate is *not*: a certified upper bound.  Bins whose noisy count
falls below the noise threshold are dropped, so a sparse far tail can be
missed — for ``k`` close to the tail index no finite sample pins ``G_k`` down.
Privacy never depends on it; only the utility of the fit does.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from cvxdp._validation import at_least, positive_finite, privacy_epsilon, probability
from cvxdp.error import ParameterError, UncertifiableLossError, UtilityWarning
from cvxdp.geometry import Domain
from cvxdp.geometry.certified import row_support_bound, row_support_bound_both
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.numerics import rounding_margin, row_dot, row_norm
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.mechanisms import DiscreteLaplaceCounts
from cvxdp.privacy.random import NoiseSource
from cvxdp.structure import GenericStructure, PiecewiseLinearStructure


def lipschitz_constants(model: Model, examples: Examples) -> np.ndarray:
    """``A(z_i) ≥ sup_{w ∈ W} ||∂f(w, z_i)||`` for every example, each from its own example alone.

    * Generalized-linear examples (``examples.glm().is_glm``): ``||a_i|| · Lip(φ_i on
      [lo_i, hi_i])`` with ``[lo_i, hi_i] ⊇ {<a_i, w> + b_i : w ∈ W}`` (the support
      function of ``W`` at ``±a_i``, widened by its rounding), so a kink of ``φ_i``
      outside the range — a steep piece that is never active on ``W`` — costs nothing.
    * Other piecewise-linear examples: ``max ||a_ij||`` over the pieces ``j`` that are
      not *provably inactive* on ``W``.  Piece ``j`` is dropped when some piece ``k``
      exceeds it on all of ``W``: ``σ_W(a_ij − a_ik) + b_ij − b_ik < 0``, tested with the
      rounding of every term charged (so the test is safe in floating point; NaN keeps
      the piece).  On ``W`` the subdifferential is the hull of the active pieces' slopes,
      so this is still an upper bound.

    Privacy: the private tail histogram's sensitivity (one count down, one up) needs
    each ``A(z_i)`` — to the last bit, since it is binned — to depend on example ``i``
    and public inputs (``W``, the loss) only.  Every decision above is taken per
    example, and every array operation runs on all rows at positions fixed by ``m``
    (never on a data-dependent subset, whose float kernels could round a row
    differently), with ``σ_W`` in closed form (balls, lenses, boxes, simplices,
    ellipsoids) or, for other sets, bounded by ``W``'s bounding ball — a batched
    support LP would couple the rows through the solver's shared iterations.
    Generic losses have no such closed form: pass ``G_k`` yourself.
    """
    st = model.loss.structure
    if isinstance(st, GenericStructure):
        raise UncertifiableLossError("per-example Lipschitz constants are only available for "
                                     "piecewise-linear and generalized-linear losses; pass G_k.")
    W = model.domain
    glm = examples.glm()
    out = None
    if glm is not None:
        a, b, link = glm
        a_norm = glm.a_norm()  # row_norm(a), computed once for the fit's phases too
        (s_hi, e_hi), (s_lo, e_lo) = row_support_bound_both(W, a, a_norm)
        with np.errstate(invalid="ignore", over="ignore"):
            hi = b + s_hi
            lo = b - s_lo
            hi = hi + e_hi + rounding_margin(b, s_hi)
            lo = lo - e_lo - rounding_margin(b, s_lo)
            out = a_norm * link.lipschitz_on(lo, hi)
    if isinstance(st, PiecewiseLinearStructure):
        # the pieces' bound for the examples that are not generalized linear (only theirs: every
        # operation of the bound is row by row, so a row's bits do not depend on which rows go with it)
        rows = np.arange(examples.m) if glm is None else np.nonzero(~glm.is_glm)[0]
        if out is None:
            out = np.empty(examples.m)
        if rows.size:
            A, b = examples.pieces()
            out[rows] = _active_piece_bound(W, A[rows], b[rows])
    return out


def _active_piece_bound(domain: Domain, A: np.ndarray, b: np.ndarray, candidates: int = 8) -> np.ndarray:
    """``max ||a_ij||`` over the pieces of each example not provably dominated on ``W`` by another.

    Each piece is tested against the ``candidates`` pieces of its example that are largest at
    ``W``'s interior point (all pieces when there are that few) — a choice made from the
    example's own pieces; testing fewer pairs only keeps more pieces, so the bound stays valid
    and costs ``O(M · candidates)`` instead of ``O(M²)`` per example.  Examples are processed in
    chunks whose bounds depend on ``m``, ``M`` and ``d`` only, so every example's directions sit
    at positions fixed by public sizes.
    """
    m, M, d = A.shape
    norms = row_norm(A)
    if M == 1:
        return norms[:, 0]
    K = min(M, candidates)
    center = np.asarray(domain.interior_point(), float)
    out = np.empty(m)
    step = max(1, (1 << 21) // (M * K * max(d, 1)))
    for start in range(0, m, step):
        sl = slice(start, min(m, start + step))
        Ac, bc = A[sl], b[sl]
        with np.errstate(invalid="ignore", over="ignore"):
            if K < M:  # the likeliest dominators: the largest pieces at the centre (NaN sorts last)
                top = np.argsort(-(row_dot(Ac, center) + bc), axis=1, kind="stable")[:, :K]
                Ak, bk = np.take_along_axis(Ac, top[:, :, None], axis=1), np.take_along_axis(bc, top, axis=1)
            else:
                Ak, bk = Ac, bc
            # pair (j, k): piece j of the example against its candidate k (j = k gives gap 0: kept)
            V = Ac[:, :, None, :] - Ak[:, None, :, :]
            s, e = row_support_bound(domain, V)
            bj, bkk = bc[:, :, None], bk[:, None, :]
            gap = s + (bj - bkk)
            margin = e + rounding_margin(s, bj, bkk)
            dominated = (gap + margin < 0.0).any(axis=2)  # NaN compares false: the piece is kept
        keep = ~dominated
        keep[~keep.any(axis=1)] = True  # impossible with valid margins; never drop every piece
        out[sl] = np.where(keep, norms[sl], -np.inf).max(axis=1)
    return out


class MomentCache:
    """Memo of a tail model's moment curves ``C ↦ (E(A − C)₊, E(A − C)₊²)`` by the bytes of ``C``.

    The planner evaluates the same public grid of ``C`` thousands of times; the curves depend on
    ``C`` and the model only, so each distinct array is computed once (at most ``size`` kept).
    """

    def __init__(self, moments, size: int = 1024) -> None:
        self._moments, self._size, self._store = moments, size, {}

    def __call__(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = (C.shape, C.tobytes())
        hit = self._store.get(key)
        if hit is None:
            if len(self._store) >= self._size:
                self._store.clear()
            hit = self._store[key] = self._moments(C)
        return hit


def block_upper_values(edges: np.ndarray, block: int) -> np.ndarray:
    """The upper edge of each block of ``block`` fine bins (:meth:`TailProfile.upper_values`)."""
    fine = np.concatenate([edges, [2.0 * edges[-1]]])
    ends = np.minimum(np.arange(block - 1, fine.size + block - 1, block), fine.size - 1)
    return fine[ends]


def block_values(edges: np.ndarray, block: int) -> np.ndarray:
    """The value of each block's examples: one fine bin ratio below its upper edge
    (:meth:`TailProfile.values`)."""
    ratio = float(edges[1] / edges[0]) if edges.size > 1 else 1.0
    return block_upper_values(edges, block) / ratio


@dataclass
class TailProfile:
    """A private estimate of the law of ``A(z)`` on a geometric grid.

    Attributes
    ----------
    edges:
        Bin edges ``e_0 < e_1 < … < e_J``; bin 0 is ``A ≤ e_0``, bin ``j`` is
        ``(e_{j−1}, e_j]``, and bin ``J + 1`` is ``A > e_J``.
    mass:
        Estimated probability of each bin (non-negative, sums to one).
    epsilon:
        Privacy spent to make it.
    threshold:
        Noisy counts below this many examples were treated as empty.
    block:
        How many fine bins each bin of ``mass`` merges (1 unless the sample was
        too small to see anything at the fine resolution).
    seen:
        ``False`` when no count, at any level of coarsening, cleared its noise threshold: the release
        says nothing about the scale of ``A`` (``mass`` is then a stand-in, everything above the grid,
        which no fit should plan for; see :meth:`~cvxdp.plan.planner.Planner.plan`).  A function of the
        released noisy counts, so branching on it is post-processing.
    """

    edges: np.ndarray
    mass: np.ndarray
    epsilon: float
    threshold: float
    n: int
    block: int = 1
    seen: bool = True
    _moments: MomentCache = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._moments = MomentCache(self._bias_moments)

    def upper_values(self) -> np.ndarray:
        """Each bin's upper edge (``2 e_J`` for the overflow bin).

        After coarsening into blocks of ``block`` fine bins, a block's upper edge is the
        upper edge of its last fine bin.
        """
        return block_upper_values(self.edges, self.block)

    def values(self) -> np.ndarray:
        """The value the estimates give each bin's examples: one fine bin width below its upper edge.

        For a bin of the grid, ``(e_{j−1}, e_j]``, that is its lower edge: every example in it has ``A``
        above this value and at most ``r = 2^{1/b}`` times it (``b`` bins per octave).  A block of
        coarsened bins takes the lower edge of its top fine bin — where coarsening knows less, the value
        stays near the top of what the block could hold, as the upper edge did.  The end bins take the
        same step down from their stand-in upper values (``e_0/r`` below the grid, ``2 e_J/r`` above it).

        Why the lower edge and not the upper one: the tight profile's ``C`` lands where the estimated
        bias curve ``C ↦ E(A − C)₊`` stops paying for its noise, which for a bounded bulk is the top of
        the highest bin holding mass.  Valued at their upper edges, the top bin's examples pulled ``C``
        up to that edge — up to ``r`` (√2) above every example, noise for nothing — and ``G_k`` rose by
        the same factor, and with it ``λ₁`` and every radius.  Valued at their lower edges they clip at
        most the top bin's excess over its lower edge, by less than ``(1 − 1/r) A``.  The price: the
        estimated bias curve now reads every example low (by less than ``(1 − 1/r) A``), where the upper
        edges read it high and failed only through dropped bins and noise — so with a tail histogram the
        radii :meth:`~cvxdp.plan.profiles.TightProfile.plan` computes are estimates, not level-``β``
        bounds (on a law whose every ``A`` sits just above a bin's lower edge the bias term can read 0).
        They steer ``C`` and localization only: a radius that is too small costs utility, never privacy —
        the values are post-processing of the released counts, and no noise scale reads them except
        through ``C`` and ``λ``, which the sensitivity covers whatever they are.

        Measured (``d = 10``, ε = 1, 5 seeds, median excess; upper edge → lower edge), Algorithm 1 with
        public ``G_k``, ``G₂`` and the default tail share: Student-t LAD (ν = 5, k = 4) 0.0126 → 0.0071 at
        ``n = 10⁴``, 0.0044 → 0.0028 at 3·10⁴, 0.0012 → 0.00069 at 10⁵; the lower-bound instance (k = 4)
        0.0143 → 0.0086 at 3·10⁴, 0.0059 → 0.0037 at 10⁵ (0.0185 → 0.0231 at 10⁴); high-leverage 0.088 →
        0.054 at 10⁴, 0.0027 → 0.0026 at 10⁵ (0.0113 → 0.0150 at 3·10⁴).  With ``G_k="auto"``, excess
        test loss over the non-private fit at full size: diamonds LAD 0.00061 → 0.00031, τ = 0.9 0.00042 →
        0.00031; CPSSW8 LAD 0.0054 → 0.0036, τ = 0.9 0.0127 → 0.0102; Fertility's hinge 0.0012 → 0.0006;
        randhie 0.0018 → 0.0015 (ε = 1) and 0.0054 → 0.0037 (ε = 0.5).  The geometric midpoint fell
        between the two on most of these and behind both on the high-leverage tail.
        """
        return block_values(self.edges, self.block)

    def moment(self, k: float) -> float:
        """``(Σ_b mass_b · v_b^k)^{1/k}`` over the bins' :meth:`values`: the estimate of ``G_k``.

        In logarithms (``exp(logsumexp(k log v, b=mass)/k)``) when the direct sum overflows or
        underflows, as ``v^k`` does for ``k = 1000`` and values above about 2 (or well below 1).
        """
        v = self.values()
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            total = float((self.mass * v**k).sum())
        if math.isfinite(total) and total > 1e-290:
            return float(total ** (1.0 / k))
        return float(np.exp(logsumexp(k * np.log(v), b=self.mass) / k))

    def bias_mean(self, C: np.ndarray) -> np.ndarray:
        """Estimated ``E(A − C)₊`` (each example at its bin's :meth:`values`)."""
        return self.bias_moments(C)[0]

    def bias_moments(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Estimated ``E(A − C)₊`` and ``E(A − C)₊²`` for every entry of ``C`` (remembered per array)."""
        return self._moments(np.atleast_1d(np.asarray(C, float)))

    def _bias_moments(self, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = self.values()
        excess = np.maximum(v[None, :] - C.reshape(-1)[:, None], 0.0)
        mu = (self.mass[None, :] * excess).sum(axis=1).reshape(C.shape)
        second = (self.mass[None, :] * excess**2).sum(axis=1).reshape(C.shape)
        return mu, second

    def bias_bound(self, C: np.ndarray, m, beta) -> np.ndarray:
        """A level-``β`` Cantelli estimate of a batch mean ``(1/m) Σ (A_i − C)₊`` under the estimated law
        (a bound only for that law: each example sits at its bin's :meth:`values`, below its ``A``).

        Cantelli with the estimated mean and second moment of ``(A − C)₊``.  Mass in bins that fell below
        the noise threshold is treated as absent — a sparse far tail can be
        missed; this steers ``C`` and the radii (utility), never the noise.
        Broadcasts over ``C``, ``m`` and ``β``.
        """
        mu, second = self.bias_moments(C)
        return mu + np.sqrt(second * (1.0 - beta) / (beta * m))

    def scale(self) -> float:
        """A typical scale of ``A`` (the estimated second moment's root), for grids of ``C``."""
        return max(self.moment(2.0), float(self.edges[0]))


def sum_laplace_threshold(scale: float, terms: int, beta: float) -> float:
    """``t`` with ``P(S ≥ t) ≤ β`` for ``S`` a sum of ``terms`` i.i.d. discrete Laplace(``scale``) variables.

    Valid for the discrete law ``P(Z = z) ∝ e^{−|z|/s}`` on the integers (the noise
    of the histogram) and for the continuous Laplace law alike.  One term: the
    discrete tail is ``P(Z ≥ t) = q^{⌈t⌉}/(1 + q) ≤ e^{−t/s}`` with ``q = e^{−1/s}``
    (continuous: ``½ e^{−t/s}``), so ``t = s log(1/β)``.  ``b`` terms: Chernoff,
    ``P(S ≥ t) ≤ E e^{θS} e^{−θt}`` for ``0 ≤ θ < 1/s``.  The discrete moment
    generating function is ``E e^{θZ} = (1 − q)²/((1 − qe^θ)(1 − qe^{−θ})) =
    1/(1 − sinh²(θ/2)/sinh²(1/(2s)))``, and ``sinh(x)/x`` increases, so
    ``sinh(θ/2)/sinh(1/(2s)) ≤ sθ``: it is at most the continuous one,
    ``(1 − s²θ²)^{−1}``.  Hence ``P(S ≥ t) ≤ min_θ (1 − s²θ²)^{−b} e^{−θt}``;
    the minimizing ``θ = (√(b²s² + t²) − bs)/(ts)`` solves
    ``2bs²θ/(1 − s²θ²) = t``, and ``t`` is found by bisection (the bound
    decreases in ``t``; the bracket's upper end is the bound at ``θ = 1/(√2 s)``).
    """
    L = math.log(1.0 / beta)
    if terms <= 1:
        return scale * L
    b = float(terms)

    def log_tail(t: float) -> float:
        theta = (math.sqrt(b * b * scale * scale + t * t) - b * scale) / (t * scale)
        return -b * math.log1p(-(scale * theta) ** 2) - theta * t

    lo, hi = 0.0, scale * (math.sqrt(2.0) * (L + b) + 1.0)  # the closed-form θ = 1/(√2 s) bound
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if log_tail(mid) > -L:
            lo = mid
        else:
            hi = mid
    return hi


#: A kept bin with no other kept bin within :data:`LONE_BIN_GAP` bins of it (and not the fullest one) must
#: clear the threshold at this fraction of its level's failure probability.
LONE_BIN_BETA = 1e-3
LONE_BIN_GAP = 2


def room_under_moments(values: np.ndarray, count: float, n: int,
                       moment_bounds: tuple[tuple[float, float], ...]) -> np.ndarray:
    """Which bins the declared moment bounds leave room for ``count`` examples in: ``count · v^j ≤ n G_j^j``
    for every declared ``(j, G_j)``, ``v`` the bin's value (:func:`block_values`).

    By Markov's inequality on the sample, ``#{i : A_i ≥ v} ≤ n G_j^j / v^j`` whenever the examples'
    empirical ``j``-th moment is within the bound, so where a bin's examples all have ``A ≥ v`` (a fine
    bin of the grid) a count of ``count`` there without room would contradict a declared bound.  Where
    ``v`` sits above some of a bin's examples (a merged block, the overflow bin) the test is stricter
    than Markov's, so fewer bins have room; the low bins of the default grid (from ``10⁻⁴ G_k``) have
    room.  The looser the declared bounds, the more bins have room.  Public: a function of the grid,
    ``n``, the threshold and the declared bounds.  In logarithms (no overflow at ``j = 1000``); a NaN
    reads as no room.
    """
    ok = np.ones(values.shape, dtype=bool)
    with np.errstate(divide="ignore"):
        log_v = np.log(values)
        for j, G in moment_bounds:
            ok &= math.log(count) + j * log_v <= math.log(n) + j * math.log(G)
    return ok


def _without_lone_noise(kept: np.ndarray, noisy: np.ndarray, strict: float,
                        bounded: np.ndarray | None = None) -> np.ndarray:
    """``kept`` less its *lone* bins that do not clear ``strict``: post-processing of the noisy counts.

    Why.  At level ``β`` a bin holding no example clears its threshold with probability about
    ``β/(J + 2)``, so over the ``J + 2`` bins a fit keeps one spurious count about ``β`` of the time — and
    a spurious count far up the grid (``10⁷`` on the default grid to ``10¹⁰``) sets the ``k``-th moment
    by itself: on four large data sets (``benchmarks/bench_tail_spurious.py``, ``β = 0.1``) 0.9–2.3% of
    releases estimated ``G₄`` above 10× the median release's (CPSSW8's LAD at full size: ``10⁶–10⁷``
    instead of 1.67), and such fits release about the domain's centre (there, an excess test loss of
    1.1–1.4 against a median of 0.0005); with the rule none of 4,000 did.  Such a count exceeds its
    threshold by an exponential amount of about one noise scale, so it stands alone: no kept bin within
    :data:`LONE_BIN_GAP` bins.  A lone bin other than the fullest must clear ``strict`` (the threshold
    at :data:`LONE_BIN_BETA` times the level's failure probability, about ``7`` noise scales more):
    a spurious one then survives about ``10⁻³β`` of the time, while a real cluster a few noise scales
    above the threshold, or any bin next to others, is kept as before.  What a dropped real cluster
    costs is an underestimate of ``G_k`` — more clipping, never privacy.

    ``bounded`` (optional, public) marks the bins where declared moment bounds leave room for a
    threshold's worth of examples (:func:`room_under_moments`); a lone bin there is held to the ordinary
    threshold.  Such a bin, spurious or not, can move the moment estimate by about the declared moment
    only — the catastrophe the rule guards against needs a count far above what any declared bound
    allows — while a real lone cluster is exactly what a heavy tail at its declared moment looks like:
    the lower-bound family's rare atom (``p n = 16 d/ε`` examples at ``p^{−1/k} G_k``) clears the
    ordinary threshold by about one noise scale and never the strict one; dropping it left Algorithm 1
    at the domain's centre there (``benchmarks/bench_utility.py``, lower-bound study).
    """
    positive = np.flatnonzero(kept > 0)
    if positive.size <= 1:
        return kept
    gaps = np.diff(positive)  # sorted: a bin's nearest kept neighbours are the adjacent entries
    lone = (np.r_[np.inf, gaps] > LONE_BIN_GAP) & (np.r_[gaps, np.inf] > LONE_BIN_GAP)
    lone[np.argmax(noisy[positive])] = False  # the fullest bin stays
    if bounded is not None:
        lone &= ~bounded[positive]
    out = kept.copy()
    out[positive[lone & (noisy[positive] < strict)]] = 0.0
    return out


def histogram_bins(low: float, high: float, bins_per_octave: int) -> int:
    """``J``: the geometric bins of ratio ``2^{1/bins_per_octave}`` that cover ``[low, high]``
    (the histogram has ``J + 2`` counts: below the grid, the ``J`` bins, above it)."""
    ratio = high / low
    # a range wider than the floats (a subnormal low) overflows the quotient: its logarithms do not
    octaves = math.log2(ratio) if math.isfinite(ratio) else math.log2(high) - math.log2(low)
    return math.ceil(octaves * bins_per_octave)


def tail_edges(low: float, high: float, bins_per_octave: int) -> np.ndarray:
    """The histogram's public bin edges ``low · 2^{j/bins_per_octave}``, ``j = 0..J``."""
    J = histogram_bins(low, high, bins_per_octave)
    return low * 2.0 ** (np.arange(J + 1) / bins_per_octave)


def tail_counts(model: Model, examples: Examples, edges: np.ndarray) -> np.ndarray:
    """How many examples' ``A(z_i)`` fall in each bin: below ``edges[0]``, each ``(e_{j−1}, e_j]``, above
    ``edges[-1]`` — integers (``J + 2`` of them); one example moves one count by one, so partitions'
    counts add up exactly to the whole data set's, whatever the partitioning."""
    A = lipschitz_constants(model, examples)
    return np.bincount(np.searchsorted(edges, A, side="left"), minlength=edges.size + 1).astype(np.int64)


def _quiet(function):
    """``function`` with numpy's floating-point warnings off: a warning printed on one record's magnitudes
    (an overflowing quotient of a subnormal slope) would be an observable output deciding on that record;
    every such value meets a gate that fails closed (:func:`cvxdp.problem._no_floating_point_warnings`
    does the same for a fit)."""
    @functools.wraps(function)
    def quiet(*args, **kwargs):
        with np.errstate(all="ignore"):
            return function(*args, **kwargs)

    return quiet


@_quiet
def private_tail_profile(model: Model, examples: Examples, *, epsilon: float, ledger: PrivacyLedger,
                         source: NoiseSource, low: float = 1e-4, high: float = 1e8,
                         bins_per_octave: int = 2, beta: float = 0.1,
                         indices: np.ndarray | None = None,
                         moment_bounds: tuple[tuple[float, float], ...] = ()) -> TailProfile:
    """ε-DP histogram of ``A(z_i)`` on the public grid ``[low, high]`` (ratio ``2^{1/bins_per_octave}``).

    Charges ``epsilon`` to the examples it reads (all by default) before drawing noise.  ``examples``
    may be :class:`~cvxdp.run.partitions.Partitions`: the counts are then made where the rows are
    (:func:`tail_counts`) and summed here before the noise.  ``moment_bounds``: the declared
    ``(j, G_j)`` of a fit given public moment bounds; the lone-bin rule reads them
    (:func:`_without_lone_noise`, post-processing).
    """
    eps = privacy_epsilon(epsilon, warn=False)
    low = positive_finite("low", low)
    high = positive_finite("high", high)
    beta = probability("beta", beta)
    if high <= low:
        raise ValueError("the histogram's range needs high > low")
    if (isinstance(bins_per_octave, bool) or not isinstance(bins_per_octave, int | np.integer)
            or bins_per_octave < 1):
        raise ParameterError(f"bins_per_octave must be a positive integer, got {bins_per_octave!r}.")
    bins_per_octave = int(bins_per_octave)
    moment_bounds = tuple((at_least("moment order", j, 1.0), positive_finite("moment bound", G))
                          for j, G in moment_bounds)
    if not low / 2.0 ** (1.0 / bins_per_octave) > 0.0:
        raise ParameterError(f"low = {low!r} is so small that the value of the histogram's lowest bin (one "
                             "bin ratio below it) underflows to 0; raise low.")
    J = histogram_bins(low, high, bins_per_octave)
    edges = tail_edges(low, high, bins_per_octave)
    if isinstance(examples, Examples):
        counts, n = tail_counts(model, examples, edges), examples.m
    else:  # partitions where an executor runs them: the counts are made there and summed here, exactly
        from cvxdp.run.partitions import partition_tail_counts

        counts = np.sum(np.stack(examples.map(partition_tail_counts, edges)), axis=0)
        n = examples.n
    idx = np.arange(n) if indices is None else np.asarray(indices)
    ledger.charge(eps, idx, mechanism="private tail histogram", batch="all", sensitivity=2.0,
                  noise_scale=2.0 / eps, note=f"{J + 2} bins on [{low:.3g}, {high:.3g}]")
    # exact integer noise on integer counts (ℓ1 sensitivity 2, scale the exact rational 2/ε)
    noisy = DiscreteLaplaceCounts(2.0, eps, counts.size).release(counts, source)
    # everything below is post-processing of the released noisy counts.  Level j (blocks of 2^j fine
    # bins) gets failure probability β/2^{j+1} split over its bins, so all levels together stay under β;
    # the thresholds use the noise scale rounded up (the float 2/ε may sit half an ulp below 2/ε).
    noise_scale = math.nextafter(2.0 / eps, math.inf)
    levels = []
    block, level_beta = 1, beta / 2.0
    while True:
        merged = np.add.reduceat(noisy, np.arange(0, noisy.size, block))
        threshold = sum_laplace_threshold(noise_scale, block, level_beta / merged.size)
        strict = sum_laplace_threshold(noise_scale, block, level_beta * LONE_BIN_BETA / merged.size)
        bounded = (room_under_moments(block_values(edges, block), threshold, n, moment_bounds)
                   if moment_bounds else None)
        kept = _without_lone_noise(np.where(merged >= threshold, merged, 0.0), merged, strict, bounded)
        levels.append((kept, block, threshold))
        if kept.sum() >= 0.5 * n or block >= noisy.size:
            break
        block *= 2
        level_beta /= 2.0
    if kept.sum() < 0.5 * n:
        # no level saw half the sample: keep the one that saw the most (the finer one on ties)
        kept, block, threshold = max(levels, key=lambda lv: (lv[0].sum(), -lv[1]))
    rounding = 2.0 ** (block / bins_per_octave)
    if kept.sum() > 0 and rounding > 4.0:
        warnings.warn(UtilityWarning(
            f"the private tail histogram had to merge {block} bins to see anything above its noise "
            f"(n = {n}, ε = {eps:g}): its values are known only to within a factor of {rounding:.3g}. Pass a "
            "public G_k, raise the share of ε spent on the histogram, or narrow its grid (tail_range)."),
            stacklevel=2)
    seen = bool(kept.sum() > 0)
    if not seen:
        # a stand-in on the fine bins (everything above the grid); `seen` tells planners not to use it
        kept, block, threshold = np.zeros(noisy.size), 1, levels[0][2]
        kept[-1] = 1.0
        warnings.warn(UtilityWarning(
            f"the private tail histogram saw nothing above its noise (n = {n}, ε = {eps:g}), so it gives "
            "no scale for the per-example Lipschitz constants: with G_k='auto' the fit releases the "
            "domain's public centre (or, with a public tail_range, plans for the range's top). Pass a "
            "public G_k, raise the share of ε spent on the histogram (tail_share), or narrow its grid "
            "(tail_range)."),
            stacklevel=2)
    return TailProfile(edges=edges, mass=kept / kept.sum(), epsilon=eps, threshold=threshold, n=n,
                       block=block, seen=seen)


@_quiet
def estimate_moment_bound(model: Model, data: dict, *, k: float, epsilon: float, ledger: PrivacyLedger,
                          source: NoiseSource, **grid) -> tuple[float, TailProfile]:
    """A pure-ε-DP estimate of ``G_k`` (from the bins' :meth:`~TailProfile.values`; see the module's
    caveats) and its histogram.

    When the histogram saw nothing above its noise (``profile.seen`` false) the estimate is the
    stand-in's — the overflow bin's value, above the grid's top — and means only that the release
    gave no scale."""
    examples = model.bind(data)
    profile = private_tail_profile(model, examples, epsilon=epsilon, ledger=ledger, source=source, **grid)
    return profile.moment(k), profile


__all__ = ["MomentCache", "TailProfile", "block_upper_values", "block_values", "estimate_moment_bound",
           "histogram_bins", "lipschitz_constants", "private_tail_profile", "room_under_moments",
           "sum_laplace_threshold", "tail_counts", "tail_edges"]
