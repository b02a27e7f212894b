"""The regularized extension ERM that every private step solves, and its certificate.

    min_{w ∈ U} F(w) = (1/m) Σ_i f_{C,U}(w, z_i) + (λ/2) ||w − w₀||²

``F`` is λ-strongly convex on ``U``, so an ``α``-minimizer ``w̃`` satisfies
``||w̃ − ŵ|| ≤ sqrt(2α/λ)`` — the accuracy term in the output-perturbation
sensitivity.  :func:`certify` proves ``F(w̃) − min_U F ≤ gap``:

* **upper** — ``w̃`` moved into ``U`` exactly, and the oracle's certified upper
  bounds of ``f_{C,U}(w̃, z_i)``;
* **lower** — per-example affine minorants ``<g_i, w> + β_i`` (valid on ``U``)
  averaged into the model ``<ḡ, w> + β̄ + (λ/2)||w − w₀||²``, whose minimum over
  ``U`` is ``<ḡ, w₀> − ||ḡ||²/(2λ) + β̄ + (λ/2) dist(w₀ − ḡ/λ, U)²`` — with the
  distance bounded *below* (exact projection, or a superset of ``U``), so the
  bound never exceeds the true minimum.

Several sets of minorants (cuts) combine through :func:`bundle_lower_bound`:
for weights ``θ`` in the simplex, ``min_U Σ_j θ_j ℓ_j`` is again a valid lower
bound, evaluated by the same closed form.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from cvxdp._validation import finite_array, positive_finite
from cvxdp.erm.kinks import KinkRows, kink_candidates, kink_rows, two_piece
from cvxdp.erm.master_dual import product_simplex_master, simplex_master
from cvxdp.erm.smoothed_start import SmoothedSums, SmoothingRows, smoothed_row_sums
from cvxdp.error import DataError
from cvxdp.extension import LipschitzExtension
from cvxdp.extension.affine_reduction import AffineReduction, affine_reduction
from cvxdp.extension.record_scaling import RecordScaling, scale_steep_records
from cvxdp.extension.tight import closed_form_rows
from cvxdp.geometry import Ball, Domain, Lens
from cvxdp.geometry.certified import distance_lower_bound
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.numerics import EPS, accurate_sum, rounding_margin, row_scales, weighted_row_sum


@dataclass
class RegularizedERM:
    """``min_{w∈U} (1/m) Σ f_{C,U}(w, z_i) + (λ/2)||w − w₀||²`` (all fields public except the data).

    ``region`` is the extension's set ``U``; ``w`` ranges over ``w_domain`` when
    given (it must lie inside ``U``), else over ``U`` itself — the paper's
    setting.  A separate ``w_domain`` serves the classical clipping baseline,
    whose extension is over (nearly) all of ``R^d`` while ``w`` stays in ``W``.

    ``examples`` is stored with the examples that are one affine piece on ``U`` with a huge
    level substituted by the same piece at a small level (``reduction``, see
    :mod:`cvxdp.extension.affine_reduction`): ``F`` moves by the constant ``(1/m) Σ κ_i``
    only, so its minimizers and every certified gap are those of the data as given.  On a region
    other than a ball or lens, records steeper than ``2⁸ max(C, 1)`` are then scaled down to that
    slope (``scaling``, :mod:`cvxdp.extension.record_scaling`): a public per-record map, so the
    release is that of the mapped data set.
    """

    model: Model
    examples: Examples
    region: Domain
    C: float
    lam: float
    w0: np.ndarray
    w_domain: Domain | None = None
    extension: LipschitzExtension = field(init=False, repr=False)
    _offsets: np.ndarray | None = field(init=False, repr=False, default=None)
    _tight_data: object = field(init=False, repr=False, default=None)
    reduction: AffineReduction = field(init=False, repr=False)
    scaling: RecordScaling = field(init=False, repr=False)

    @property
    def feasible_set(self) -> Domain:
        """The set ``w`` ranges over."""
        return self.region if self.w_domain is None else self.w_domain

    def __post_init__(self) -> None:
        self.C = positive_finite("C", self.C)
        self.lam = positive_finite("lambda", self.lam)
        self.w0 = finite_array("w0", self.w0, shape=(self.model.dim,))
        if self.examples.loss is not self.model.loss:
            raise DataError("examples were bound to a different loss.")
        self.extension = LipschitzExtension(self.model, self.C, self.region)
        # examples that are one affine piece on U with a huge level (a label of 1e10) are replaced by
        # the same piece at a small level: the same f_{C,U} up to a constant, per example
        self.reduction = affine_reduction(self.examples, self.region, self.C)
        self.examples = self.reduction.apply(self.examples)
        # on regions without an exact path (not a ball or lens), records steeper than a public limit
        # far above C are scaled down to it: a per-record public map (cvxdp.extension.record_scaling)
        self.scaling = scale_steep_records(self.examples, self.region, self.C)
        self.examples = self.scaling.examples

    @property
    def m(self) -> int:
        return self.examples.m

    @property
    def dim(self) -> int:
        return self.model.dim

    def regularizer(self, w: np.ndarray) -> float:
        return 0.5 * self.lam * float(np.sum((np.asarray(w) - self.w0) ** 2))

    @property
    def offsets(self) -> np.ndarray:
        """Per-example constants ``κ_i`` every bound of this problem is taken relative to.

        The certificate proves ``F(w̃) − min F ≤ α`` for ``F − (1/m) Σ κ_i`` — the same
        minimizers and the same gaps as ``F`` — with every evaluation of example ``i`` shifted
        by ``κ_i``, so a label or feature of ``10¹²`` costs its bracket nothing (see
        :meth:`~cvxdp.extension.LipschitzExtension.level_offsets`).  Computed once per problem,
        each ``κ_i`` from its own example and the public ``C`` and ``U``.
        """
        if self._offsets is None:
            self._offsets = self.extension.level_offsets(self.examples)
        return self._offsets

    def subsample(self, stride: int) -> RegularizedERM:
        """The same problem (``C``, ``λ``, ``w₀``, ``U``, ``W``) on every ``stride``-th of its rows, from the
        first: a choice by position, for the bundle method's starting point only
        (:mod:`cvxdp.erm.bundle`).

        Its rows are this problem's as stored — already reduced and scaled, each row the same function
        and the same offset ``κ_i`` — taken without running the reduction again (which is not idempotent
        for every link: a squared row's level shift would be recomputed from its shifted label)."""
        rows = slice(0, None, int(stride))
        sub = copy.copy(self)
        sub.examples = self.examples.subset(rows)
        sub._offsets = None if self._offsets is None else self._offsets[rows]
        sub._tight_data = None
        # ``reduction`` and ``scaling`` stay the full problem's records (nothing reads them after
        # construction); the rows themselves are already the reduced, scaled ones
        return sub

    def kink_rows(self, w: np.ndarray, radius: float, cap: int) -> KinkRows | None:
        """The rows whose kink meets ``B(w, radius)`` with their exact pieces (:mod:`cvxdp.erm.kinks`; the
        ``cap`` nearest ones, ``truncated``, if more qualify), or ``None`` if the model does not apply (no
        two-piece closed form)."""
        lean = self._tight_pass_data()
        if lean is None or not two_piece(lean.link):
            return None
        if lean.kinks is None:
            lean.kinks = kink_candidates(lean.link, lean.a_norm, lean.candidates)
        eligible, kink = lean.kinks
        return kink_rows(w, radius, lean.a, lean.b, lean.link, lean.a_norm, eligible, kink, self.C,
                         self.feasible_set.norm_bound(), cap)

    def smoothed_sums(self, w: np.ndarray, mu: float, stride: int = 1) -> SmoothedSums | None:
        """The sums of the smoothed objective at ``w`` for the width ``mu`` over every ``stride``-th of this
        problem's rows, from the first (the bundle method's start: :mod:`cvxdp.erm.smoothed_start`), or
        ``None`` if the smoothing does not apply (no two-piece closed form)."""
        lean = self._tight_pass_data()
        if lean is None or not two_piece(lean.link):
            return None
        if lean.smoothing is None:
            if lean.kinks is None:
                lean.kinks = kink_candidates(lean.link, lean.a_norm, lean.candidates)
            eligible, kink = lean.kinks
            _, radius = self.feasible_set.bounding_ball()
            lean.smoothing = SmoothingRows.of(lean.b, lean.link, lean.a_norm, eligible, kink, self.C,
                                              2.0 * float(radius))
        stride = int(stride)
        if stride == 1:
            return smoothed_row_sums(lean.a, lean.smoothing, np.asarray(w, dtype=float), float(mu))
        if stride not in lean.coarse:
            rows = slice(0, None, stride)
            lean.coarse[stride] = (np.ascontiguousarray(lean.a[rows]), lean.smoothing.subset(rows))
        a, smoothing = lean.coarse[stride]
        return smoothed_row_sums(a, smoothing, np.asarray(w, dtype=float), float(mu))

    def upper_and_cut(self, w: np.ndarray, tolerance: float, exclude: np.ndarray | None = None
                      ) -> tuple[float, Cut]:
        """One oracle pass at ``w``: the certified upper bound of ``F(w)`` and the averaged minorant.

        Rows with a closed form at ``w`` (tight or clipped, :mod:`cvxdp.extension.tight`) contribute
        their exact bounds and slopes ``π_i a_i`` as sums, without per-row vectors; the others go
        through the oracle.  Each row's bounds are those :meth:`LipschitzExtension.evaluate
        <cvxdp.extension.LipschitzExtension.evaluate>` gives it (the same functions of the row).

        ``exclude`` (row indices, e.g. the kink rows the caller models exactly) leaves rows out of the
        cut, which then bounds ``(1/m) Σ_{i ∉ exclude} f_{C,U}(·, z_i)`` plus the regularizer; the
        upper bound always covers every row.
        """
        return reduce_pass(self, [self.pass_sums(w, tolerance, exclude)], w)

    def pass_with_rows(self, w: np.ndarray, tolerance: float, rows: np.ndarray
                       ) -> tuple[float, Cut, np.ndarray, np.ndarray]:
        """:meth:`upper_and_cut` with ``rows`` left out of the cut, and those rows' own minorants
        (slopes ``(k, d)`` and intercepts ``(k,)``, in the order of ``rows``)."""
        sums = self.pass_sums(w, tolerance, rows)
        upper, cut = reduce_pass(self, [sums], w)
        return upper, cut, sums.rows_g, sums.rows_beta

    def pass_sums(self, w: np.ndarray, tolerance: float, exclude: np.ndarray | None = None) -> PassSums:
        """One oracle pass at ``w`` over this problem's rows, as sums with certified error bounds; the rows
        ``exclude`` are left out of the cut and their minorants returned one by one."""
        w = np.asarray(w, dtype=float)
        lean = self._tight_pass_data()
        cut_rows = np.ones(self.m, dtype=bool)
        if exclude is not None:
            exclude = np.asarray(exclude, dtype=np.int64)
            cut_rows[exclude] = False
        if lean is None:
            ev = self.extension.evaluate(w, self.examples, tolerance=tolerance, offsets=self.offsets)
            total, error = accurate_sum(ev.upper)
            sums, errors = accurate_sum(np.column_stack([ev.subgradient[cut_rows], ev.intercept[cut_rows]]))
            rows_g = rows_beta = None
            if exclude is not None:
                rows_g, rows_beta = ev.subgradient[exclude], ev.intercept[exclude]
            return PassSums(self.m, float(total), float(error), sums[:-1], errors[:-1], float(sums[-1]),
                            float(errors[-1]), rows_g, rows_beta)
        return self._tight_pass(w, tolerance, lean, cut_rows, exclude)

    def _tight_pass_data(self) -> _TightPassData | None:
        """What the sums-only pass reads, made once per problem (``None`` where it does not apply:
        the closed form's setting — generalized-linear rows on a ball or lens — is required)."""
        if self._tight_data is None:
            ext = self.extension
            glm = None
            if (ext.certification == "E.3 dual" and ext.settings.closed_form
                    and isinstance(self.region, Ball | Lens)):
                glm = self.examples.glm()
            if glm is None:
                self._tight_data = False
            else:
                a, b, link = glm
                shifted = np.asarray(self.offsets != 0, dtype=bool)
                self._tight_data = _TightPassData(
                    a=a, b=b, link=link, a_norm=glm.a_norm(),
                    candidates=np.asarray(glm.is_glm, dtype=bool) & ~shifted,
                    scales=row_scales(a))
        return self._tight_data or None

    def _tight_pass(self, w: np.ndarray, tolerance: float, lean: _TightPassData, cut_rows: np.ndarray,
                    exclude: np.ndarray | None = None) -> PassSums:
        solved = closed_form_rows(w, lean.a, lean.b, lean.link, self.C, self.region, lean.a_norm,
                                  lean.candidates)
        # a solved row whose bracket misses the tolerance is the oracle's (it goes to the exact path)
        keep = solved.upper - solved.lower <= tolerance
        done = solved.rows[keep]
        in_cut = cut_rows[done]
        coef = np.zeros(self.m)
        coef[done[in_cut]] = solved.pi[keep][in_cut]
        g_sum, g_err = weighted_row_sum(lean.a, coef, lean.scales)
        uppers, betas, g_rows = [solved.upper[keep]], [solved.beta[keep][in_cut]], []
        rest = np.ones(self.m, dtype=bool)
        rest[done] = False
        rest = np.nonzero(rest)[0]
        ev = None
        if rest.size:
            ev = self.extension.evaluate(w, self.examples.subset(rest), tolerance=tolerance,
                                         offsets=self.offsets[rest])
            uppers.append(ev.upper)
            betas.append(ev.intercept[cut_rows[rest]])
            g_rows.append(ev.subgradient[cut_rows[rest]])
        rows_g = rows_beta = None
        if exclude is not None:
            # the left-out rows' own minorants: (fl(π a), β) where solved — β charges the slope's rounding
            # (extension.tight) — and the oracle's elsewhere
            rows_g = np.zeros((exclude.size, self.dim))
            rows_beta = np.full(exclude.size, -np.inf)
            where = np.full(self.m, -1, dtype=np.int64)
            where[exclude] = np.arange(exclude.size)
            pos = where[done]
            hit = pos >= 0
            rows_g[pos[hit]] = solved.pi[keep][hit][:, None] * lean.a[done[hit]]
            rows_beta[pos[hit]] = solved.beta[keep][hit]
            if ev is not None:
                pos = where[rest]
                hit = pos >= 0
                rows_g[pos[hit]] = ev.subgradient[hit]
                rows_beta[pos[hit]] = ev.intercept[hit]
        total, error = accurate_sum(np.concatenate(uppers))
        beta_sum, beta_err = accurate_sum(np.concatenate(betas))
        if g_rows and g_rows[0].shape[0]:
            rest_sum, rest_err = accurate_sum(np.concatenate(g_rows))
            g_sum, both_err = accurate_sum(np.stack([g_sum, rest_sum]))
            g_err = g_err + rest_err + both_err
        return PassSums(self.m, float(total), float(error), g_sum, g_err, float(beta_sum), float(beta_err),
                        rows_g, rows_beta)

    def lipschitz_bound(self) -> float:
        """A bound on ``F``'s Lipschitz constant on ``U``: ``C + λ (diam U + dist(w₀, U))``."""
        c, r = self.feasible_set.bounding_ball()
        reach = float(np.linalg.norm(self.w0 - c)) + r
        return self.C + self.lam * reach


@dataclass(frozen=True)
class PassSums:
    """One oracle pass at ``w`` over some rows (a problem's, or a partition's), as sums: of the certified
    upper bounds of ``f_{C,U}(w, z_i) − κ_i``, and of the minorants' slopes ``g`` and intercepts ``β``
    over the rows the cut covers — each within its ``*_err`` of the exact sum (per coordinate for
    ``g``; :func:`~cvxdp.numerics.accurate_sum`).  Only these travel from a partition."""

    m: int
    upper: float
    upper_err: float
    g: np.ndarray
    g_err: np.ndarray
    beta: float
    beta_err: float
    #: The minorants ``<g_i, u> + β_i ≤ f_{C,U}(u, z_i)`` of the rows left out of the cut, in their order
    #: (``(k, d)`` and ``(k,)``; ``None`` when none were): the bundle method's kink rows' own cuts.
    rows_g: np.ndarray | None = None
    rows_beta: np.ndarray | None = None


def reduce_pass(problem: object, parts: list[PassSums], w: np.ndarray) -> tuple[float, Cut]:
    """The certified upper bound of ``F(w)`` and the averaged cut from the passes of a problem's rows.

    The parts' sums are summed again by :func:`~cvxdp.numerics.accurate_sum` (its error added to the
    parts' own), so the bound holds whatever the partitioning.  Fails closed: a non-finite sum or bound
    gives an infinite upper bound or a vacuous cut (``β = −∞``).
    """
    m, d = problem.m, problem.dim
    if sum(p.m for p in parts) != m:
        return math.inf, Cut(g=np.zeros(d), beta=-math.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        uppers, upper_errs = accurate_sum(np.array([p.upper for p in parts]))
        betas, beta_errs = accurate_sum(np.array([p.beta for p in parts]))
        gs, g_errs = accurate_sum(np.stack([np.asarray(p.g, float) for p in parts]))
        upper_err = float(upper_errs) + sum(p.upper_err for p in parts)
        beta_err = float(beta_errs) + sum(p.beta_err for p in parts)
        g_err = g_errs + np.sum(np.stack([np.asarray(p.g_err, float) for p in parts]), axis=0)
    # the errors were added in float: grown by the few additions' rounding
    grow = 1.0 + (len(parts) + 4.0) * EPS
    reg = problem.regularizer(w)
    upper = float(uppers) / m + reg
    upper += upper_err * grow / m + float(rounding_margin(float(uppers) / m, reg))
    if not math.isfinite(upper):
        upper = math.inf
    return upper, cut_from_sums(problem, gs, g_err * grow, float(betas), beta_err * grow)


@dataclass
class _TightPassData:
    """Per-problem arrays of the sums-only pass: the GLM form, ``fl(||a_i||)``, the rows that may be
    tight (generalized linear, no level offset) and ``max_j |a_ij|`` per row."""

    a: np.ndarray
    b: np.ndarray
    link: object
    a_norm: np.ndarray
    candidates: np.ndarray
    scales: np.ndarray
    kinks: tuple[np.ndarray, np.ndarray] | None = None
    smoothing: SmoothingRows | None = None
    #: ``stride -> (a, smoothing)`` of every ``stride``-th row (contiguous copies; the smoothed start's
    #: coarse stages)
    coarse: dict = field(default_factory=dict)


@dataclass
class Cut:
    """An aggregated minorant ``ℓ(w) = <g, w> + β + (λ/2)||w − w₀||² ≤ F(w)`` on ``U``."""

    g: np.ndarray
    beta: float


@dataclass
class ERMCertificate:
    """What a certified solve proves about its point ``w``.

    Attributes
    ----------
    required:
        The accuracy ``α`` the caller's sensitivity bound assumes.
    gap:
        Certified ``F(w) − min_U F ≤ gap``.
    upper, lower:
        The evaluated bounds behind ``gap``.
    method:
        Which solver produced the point (``"conic"``, ``"cutting-plane"``,
        ``"adaptive-subgradient"``) and any refinement steps, in order.
    iterations, seconds:
        Work done.
    iteration_bound:
        The a-priori iteration bound of the deterministic cutting-plane mode
        (``⌈2d² ln(2ρL/ε)⌉``, fixed before the first step), else ``None``.
    """

    required: float
    gap: float
    upper: float
    lower: float
    method: str
    iterations: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    iteration_bound: int | None = None

    @property
    def certified(self) -> bool:
        return bool(self.gap <= self.required)


def model_minimum(problem: RegularizedERM, g: np.ndarray, beta: float) -> float:
    """Certified lower bound on ``min_{w∈U} <g, w> + β + (λ/2)||w − w₀||²``.

    Fails closed: a cut with a non-finite slope or intercept (``β = −∞`` is the oracle's honest
    "no minorant"; NaN or ``+∞`` is no cut at all) and any non-finite result give ``−∞`` — a valid,
    vacuous lower bound — never NaN or ``+∞``, which would make a certified gap NaN or ``−∞``.
    """
    lam, w0 = problem.lam, problem.w0
    g = np.asarray(g, dtype=float)
    if not (np.all(np.isfinite(g)) and math.isfinite(beta)):
        return -math.inf
    d = g.size
    center = w0 - g / lam
    dist = distance_lower_bound(problem.feasible_set, center)
    gw0 = float(g @ w0)
    gg = float(g @ g) / (2.0 * lam)
    val = gw0 - gg + beta + 0.5 * lam * dist * dist
    # dot products err by d ε times their terms, not their (possibly cancelled) values; the rounded
    # center moves the distance by at most (d + 4) ε (||w₀|| + ||g||/λ)
    shift = (d + 4.0) * EPS * float(np.linalg.norm(w0) + np.linalg.norm(g) / lam)
    margin = float(rounding_margin(gw0, gg, beta, 0.5 * lam * dist * dist)) + (d + 64.0) * EPS * float(
        np.linalg.norm(g) * np.linalg.norm(w0) + gg) + lam * (dist + shift) * shift
    bound = val - margin
    return bound if math.isfinite(bound) else -math.inf


def evaluate_upper(problem: RegularizedERM, w: np.ndarray, tolerance: float,
                   exclude: np.ndarray | None = None) -> tuple[float, Cut]:
    """Certified ``F(w)`` upper bound at a point of the feasible set, and the oracle's cut at ``w``
    (one aggregated oracle pass: :meth:`RegularizedERM.upper_and_cut`, or a partitioned problem's),
    the cut leaving out the rows ``exclude``."""
    if exclude is None:
        return problem.upper_and_cut(w, tolerance)
    return problem.upper_and_cut(w, tolerance, exclude=exclude)


def average_cut(problem: RegularizedERM, g: np.ndarray, beta: np.ndarray) -> Cut:
    """The mean of per-example minorants ``<g_i, w> + β_i`` as one cut, rounded down safely.

    Sums come with a certified error bound (:func:`~cvxdp.numerics.accurate_sum`, about ``ε`` of
    their own size); the division by ``m`` adds ``ε/2``; the slope's error ``δg`` costs at most
    ``||δg|| max_U ||w||``, which is taken off the intercept with the intercept's own error.
    """
    sums, errors = accurate_sum(np.column_stack([np.asarray(g, float), np.asarray(beta, float)]))
    return cut_from_sums(problem, sums[:-1], errors[:-1], float(sums[-1]), float(errors[-1]))


def cut_from_sums(problem: RegularizedERM, g_sum: np.ndarray, g_err: np.ndarray, beta_sum: float,
                  beta_err: float) -> Cut:
    """The averaged cut from the sums ``Σ g_i`` and ``Σ β_i`` and bounds on their errors (per
    coordinate for the slopes): the slope's error costs ``||δg|| max_U ||w||`` on ``U``, which is
    taken off the intercept with the intercept's own error and the division's rounding."""
    m = problem.m
    with np.errstate(over="ignore", invalid="ignore"):
        g_bar, beta_bar = np.asarray(g_sum, float) / m, float(beta_sum) / m
        g_err, beta_err = float(np.linalg.norm(g_err)) / m * (1.0 + 4.0 * EPS), float(beta_err) / m
    if not (np.all(np.isfinite(g_bar)) and math.isfinite(beta_bar) and math.isfinite(g_err)
            and math.isfinite(beta_err)):  # sums beyond float range: no usable cut
        return Cut(g=np.zeros(np.shape(g_bar)[0]), beta=-math.inf)
    reach = problem.feasible_set.norm_bound()
    margin = (beta_err + g_err * reach
              + 4.0 * EPS * (abs(beta_bar) + float(np.linalg.norm(g_bar)) * reach))
    if not math.isfinite(beta_bar - margin):  # a margin beyond float range: no usable cut
        return Cut(g=np.zeros_like(g_bar), beta=-math.inf)
    return Cut(g=g_bar, beta=beta_bar - margin)


def bundle_lower_bound(problem: RegularizedERM, cuts: list[Cut]) -> tuple[float, np.ndarray]:
    """The best certified lower bound from a convex combination of cuts, and the weights ``θ``
    (see :func:`bundle_master`, which also returns the master program's minimizer)."""
    master = bundle_master(problem, cuts)
    return master.lower, master.theta


class BundleMaster(NamedTuple):
    """What :func:`bundle_master` returns: the certified lower bound, the weights ``θ`` over the given
    cuts, the master program's minimizer (a proposal, possibly a rounding outside ``U``; ``None`` if
    the solver gave none) and the aggregated cut ``Σθ_j ℓ_j`` with its rounding taken off the
    intercept (a valid minorant, ``None`` when no cut was usable)."""

    lower: float
    theta: np.ndarray
    point: np.ndarray | None
    aggregate: Cut | None


def bundle_master(problem: RegularizedERM, cuts: list[Cut], kinks: KinkRows | None = None,
                  prox: tuple[float, np.ndarray] | None = None) -> BundleMaster:
    """The best certified lower bound from a convex combination of cuts, with the master program's
    minimizer (the next point of :func:`~cvxdp.erm.bundle.bundle_method`) and the aggregated cut.

    Solves ``min_{w ∈ U'} max_j <g_j, w> + β_j + (λ/2)||w − w₀||²`` (``U'`` a
    ball or the region's own rows) with Clarabel to get weights ``θ`` (the
    multipliers of the cut rows), projects ``θ`` onto the simplex, and
    evaluates ``min_U Σ θ_j ℓ_j`` with :func:`model_minimum`.  The solver only
    proposes ``θ``; the bound is ours.

    With ``kinks`` (:class:`~cvxdp.erm.kinks.KinkRows`), the cuts leave those rows out and the model
    adds ``(1/m) Σ_{i∈K} max_j p_ij(w)``, each row's exact pieces; the bound then combines the cuts
    with weights ``θ`` and each kink row's pieces with weights ``ρ_i`` in its own simplex (the
    multipliers of its piece rows, times ``m``, projected), so it is again one affine minorant of
    ``F`` plus the regularizer, minimized in closed form.

    With ``prox = (μ, c)`` the program adds ``(μ/2)||w − c||²``: its minimizer is the proposal of a
    proximal bundle step, and its weights are combined and bounded exactly as above, *without* that
    term — any weights give a valid bound, so it stays one.

    Fails closed.  A cut with a non-finite intercept or slope is dropped *before* the
    combination: ``β_j = −∞`` is a vacuous minorant (the oracle could not certify one), and
    ``θ_j · β_j`` with ``θ_j = 0`` would be ``0 · (−∞) = NaN``.  Dropping a cut only shrinks the
    set of combinations, so the bound stays valid.  With no usable cut the bound is ``−∞``; a
    non-finite combination falls back to the best single cut (without kink rows); the result is
    never NaN.  Returns a :class:`BundleMaster`; ``θ`` is over *all* the given cuts (zero on
    dropped ones; all zero when no cut is usable).
    """
    theta_all = np.zeros(len(cuts))
    usable = [j for j, c in enumerate(cuts)
              if math.isfinite(float(c.beta)) and np.all(np.isfinite(np.asarray(c.g, dtype=float)))]
    if not usable:
        return BundleMaster(-math.inf, theta_all, None, None)
    if kinks is not None and kinks.count == 0:
        kinks = None
    if len(usable) == 1 and kinks is None and prox is None:
        theta_all[usable[0]] = 1.0
        c = cuts[usable[0]]
        point = problem.feasible_set.project((problem.w0 - c.g / problem.lam)[None, :])[0]
        return BundleMaster(model_minimum(problem, c.g, c.beta), theta_all, point, c)
    cuts = [cuts[j] for j in usable]
    import scipy.sparse as sp

    from cvxdp.conic.cones import Cone
    from cvxdp.conic.program import ConicSettings, ProgramBuilder, solve
    from cvxdp.geometry import project_onto_simplex

    d, m = problem.dim, problem.m
    G = np.stack([c.g for c in cuts])
    B = np.array([c.beta for c in cuts])
    nk = 0 if kinks is None else kinks.count
    k = len(cuts)
    # the master's minimizer inside U: its dual, solved here, is the program (else the conic solver)
    if not nk:
        dense = simplex_master(problem, G, B, prox)
        if dense is not None:
            theta, point = dense
            return _finish_master(problem, cuts, usable, G, B, theta, None, None, point, theta_all)
    else:
        dense = product_simplex_master(problem, G, B, kinks.g, kinks.beta, prox)
        if dense is not None:
            theta, rho, point = dense
            theta = project_onto_simplex(np.maximum(theta, 0.0)[None, :])[0]
            rho = project_onto_simplex(np.maximum(rho, 0.0))
            return _finish_master(problem, cuts, usable, G, B, theta, rho, kinks, point, theta_all)
    rows = problem.feasible_set.cone_rows()
    n = d + 1 + nk + rows.n_aux
    aux0 = d + 1 + nk
    builder = ProgramBuilder(n)
    # s_j = s − g_jᵀ w − β_j ≥ 0   →  A x = g_jᵀ w − s, b = −β_j
    rr = np.concatenate([np.repeat(np.arange(k), d), np.arange(k)])
    cc = np.concatenate([np.tile(np.arange(d), k), np.full(k, d)])
    vv = np.concatenate([G.ravel(), -np.ones(k)])
    builder.add_rows(rr, cc, vv, -B, [Cone("nonneg", k)])
    J = 0 if kinks is None else kinks.g.shape[1]
    if nk:
        # t_i − g_ijᵀ w − β_ij ≥ 0 for each kink row i and piece j (rows J i .. J i + J − 1)
        Gk = kinks.g.reshape(J * nk, d)
        piece = np.arange(J * nk)
        rr = np.concatenate([np.repeat(piece, d), piece])
        cc = np.concatenate([np.tile(np.arange(d), J * nk), d + 1 + piece // J])
        vv = np.concatenate([Gk.ravel(), -np.ones(J * nk)])
        builder.add_rows(rr, cc, vv, -kinks.beta.ravel(), [Cone("nonneg", J * nk)])
    ar, ac = np.nonzero(rows.A_y)
    extra_r, extra_c, extra_v = [ar], [ac], [rows.A_y[ar, ac]]
    if rows.n_aux:
        xr, xc = np.nonzero(rows.A_aux)
        extra_r.append(xr)
        extra_c.append(aux0 + xc)
        extra_v.append(rows.A_aux[xr, xc])
    builder.add_rows(np.concatenate(extra_r), np.concatenate(extra_c), np.concatenate(extra_v),
                     rows.b, rows.cones)
    q = np.zeros(n)
    q[:d] = -problem.lam * problem.w0
    q[d] = 1.0
    q[d + 1:d + 1 + nk] = 1.0 / m
    mu = 0.0
    if prox is not None:
        mu = float(prox[0])
        q[:d] -= mu * np.asarray(prox[1], float)
    P = sp.diags(np.concatenate([np.full(d, problem.lam + mu), np.zeros(n - d)]), format="csc")
    sol = solve(builder.build(q, P), ConicSettings(tol=1e-11, max_iter=300))
    theta = rho = None
    if sol.usable and np.all(np.isfinite(sol.z[:k + J * nk])):
        theta = project_onto_simplex(np.maximum(sol.z[:k], 0.0)[None, :])[0]
        total = math.fsum(theta)
        theta = theta / total if total > 0 and np.all(np.isfinite(theta)) else None
        if nk:
            rho = project_onto_simplex(np.maximum(m * sol.z[k:k + J * nk], 0.0).reshape(nk, J))
    if theta is None:  # no usable weights: the best single cut (model_minimum is never NaN)
        theta = np.eye(k)[int(np.argmax([model_minimum(problem, c.g, c.beta) for c in cuts]))]
    if nk and (rho is None or not np.all(np.isfinite(rho))):
        rho = np.full((nk, J), 1.0 / J)  # any weights in each row's simplex give a valid bound
    point = sol.x[:d].copy() if sol.usable and np.all(np.isfinite(sol.x[:d])) else None
    return _finish_master(problem, cuts, usable, G, B, theta, rho, kinks, point, theta_all)


def _finish_master(problem: RegularizedERM, cuts: list[Cut], usable: list[int], G: np.ndarray,
                   B: np.ndarray, theta: np.ndarray, rho: np.ndarray | None, kinks: KinkRows | None,
                   point: np.ndarray | None, theta_all: np.ndarray) -> BundleMaster:
    """The certified bound of the weights ``θ`` (and ``ρ``), the aggregate, and the proposal."""
    m, k = problem.m, len(cuts)
    nk = 0 if kinks is None else kinks.count
    # Σθ_j ℓ_j is a minorant when Σθ = 1; after rounding Σθ = 1 + δ, which moves the combination
    # by |δ| times the cuts' size on U — charged below, with the rounding of θ·G and θ·B
    g = theta @ G
    beta = float(theta @ B)
    reach = problem.feasible_set.norm_bound()
    size = (float(np.abs(theta) @ np.abs(B)) + float(np.abs(theta) @ np.linalg.norm(G, axis=1)) * reach
            + problem.lam * (reach + float(np.linalg.norm(problem.w0))) ** 2)
    if nk:
        # each row's pieces weighted in its simplex (Σ_j ρ_ij = 1 up to rounding, charged like θ's)
        g = g + np.einsum("kj,kjd->d", rho, kinks.g) / m
        beta = beta + float(np.einsum("kj,kj->", rho, kinks.beta)) / m
        size += (float(np.einsum("kj,kj->", rho, np.abs(kinks.beta)))
                 + float(np.einsum("kj,kj->", rho, np.linalg.norm(kinks.g, axis=2))) * reach) / m
    slack = (k + (0 if rho is None else rho.size) + 64.0) * EPS * size
    bound = model_minimum(problem, g, beta - slack)
    # a single cut is sometimes better than a poorly solved combination (not a minorant of F alone
    # when kink rows are left out of the cuts)
    singles = [] if nk else [model_minimum(problem, c.g, c.beta) for c in cuts[-3:]]
    theta_all[usable] = theta
    # every candidate is a valid lower bound or −∞ (model_minimum is never NaN); drop NaN anyway,
    # since Python's max keeps a leading NaN
    candidates = [v for v in (bound, *singles) if not math.isnan(v)]
    # the aggregate of the cuts alone (a minorant of the rows the cuts cover), for the bundle's memory
    g_cuts, beta_cuts = theta @ G, float(theta @ B)
    slack_cuts = (k + 64.0) * EPS * (float(np.abs(theta) @ np.abs(B))
                                     + float(np.abs(theta) @ np.linalg.norm(G, axis=1)) * reach
                                     + problem.lam * (reach + float(np.linalg.norm(problem.w0))) ** 2)
    usable_sum = np.all(np.isfinite(g_cuts)) and math.isfinite(beta_cuts - slack_cuts)
    aggregate = Cut(g=g_cuts, beta=beta_cuts - slack_cuts) if usable_sum else None
    return BundleMaster(max(candidates) if candidates else -math.inf, theta_all, point, aggregate)
