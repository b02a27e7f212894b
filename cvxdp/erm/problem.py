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

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from cvxdp._validation import finite_array, positive_finite
from cvxdp.error import DataError
from cvxdp.extension import LipschitzExtension
from cvxdp.extension.affine_reduction import AffineReduction, affine_reduction
from cvxdp.extension.record_scaling import RecordScaling, scale_steep_records
from cvxdp.geometry import Domain
from cvxdp.geometry.certified import distance_lower_bound
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.numerics import EPS, rounding_margin


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

    def upper_and_cut(self, w: np.ndarray, tolerance: float) -> tuple[float, Cut]:
        """One oracle pass at ``w``: the certified upper bound of ``F(w)`` and the averaged minorant."""
        ev = self.extension.evaluate(w, self.examples, tolerance=tolerance, offsets=self.offsets)
        reg = self.regularizer(w)
        upper = float(np.mean(ev.upper)) + reg
        upper += float(rounding_margin(np.sum(np.abs(ev.upper)) / self.m, reg))
        return upper, average_cut(self, ev.subgradient, ev.intercept)

    def lipschitz_bound(self) -> float:
        """A bound on ``F``'s Lipschitz constant on ``U``: ``C + λ (diam U + dist(w₀, U))``."""
        c, r = self.feasible_set.bounding_ball()
        reach = float(np.linalg.norm(self.w0 - c)) + r
        return self.C + self.lam * reach


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


def evaluate_upper(problem: RegularizedERM, w: np.ndarray, tolerance: float) -> tuple[float, Cut]:
    """Certified ``F(w)`` upper bound at a point of the feasible set, and the oracle's cut at ``w``
    (one aggregated oracle pass: :meth:`RegularizedERM.upper_and_cut`, or a partitioned problem's)."""
    return problem.upper_and_cut(w, tolerance)


def average_cut(problem: RegularizedERM, g: np.ndarray, beta: np.ndarray) -> Cut:
    """The mean of per-example minorants ``<g_i, w> + β_i`` as one cut, rounded down safely.

    Sums are exactly rounded (``math.fsum``), so the mean's error is about ``2ε`` of
    its own size; the slope's error ``δg`` costs at most ``||δg|| max_U ||w||``,
    which is taken off the intercept.
    """
    m = problem.m
    try:
        g_bar = np.array([math.fsum(col) for col in np.asarray(g, float).T]) / m
        beta_bar = math.fsum(np.asarray(beta, float)) / m
    except (OverflowError, ValueError):  # sums beyond float range: no usable cut
        return Cut(g=np.zeros(np.shape(g)[1]), beta=-math.inf)
    if not (np.all(np.isfinite(g_bar)) and math.isfinite(beta_bar)):
        return Cut(g=np.zeros_like(g_bar), beta=-math.inf)
    reach = problem.feasible_set.norm_bound()
    margin = 4.0 * EPS * (abs(beta_bar) + float(np.linalg.norm(g_bar)) * reach)
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


def bundle_master(problem: RegularizedERM, cuts: list[Cut]) -> BundleMaster:
    """The best certified lower bound from a convex combination of cuts, with the master program's
    minimizer (the next point of :func:`~cvxdp.erm.bundle.bundle_method`) and the aggregated cut.

    Solves ``min_{w ∈ U'} max_j <g_j, w> + β_j + (λ/2)||w − w₀||²`` (``U'`` a
    ball or the region's own rows) with Clarabel to get weights ``θ`` (the
    multipliers of the cut rows), projects ``θ`` onto the simplex, and
    evaluates ``min_U Σ θ_j ℓ_j`` with :func:`model_minimum`.  The solver only
    proposes ``θ``; the bound is ours.

    Fails closed.  A cut with a non-finite intercept or slope is dropped *before* the
    combination: ``β_j = −∞`` is a vacuous minorant (the oracle could not certify one), and
    ``θ_j · β_j`` with ``θ_j = 0`` would be ``0 · (−∞) = NaN``.  Dropping a cut only shrinks the
    set of combinations, so the bound stays valid.  With no usable cut the bound is ``−∞``; a
    non-finite combination falls back to the best single cut; the result is never NaN.
    Returns a :class:`BundleMaster`; ``θ`` is over *all* the given cuts (zero on dropped ones; all
    zero when no cut is usable).
    """
    theta_all = np.zeros(len(cuts))
    usable = [j for j, c in enumerate(cuts)
              if math.isfinite(float(c.beta)) and np.all(np.isfinite(np.asarray(c.g, dtype=float)))]
    if not usable:
        return BundleMaster(-math.inf, theta_all, None, None)
    if len(usable) == 1:
        theta_all[usable[0]] = 1.0
        c = cuts[usable[0]]
        point = problem.feasible_set.project((problem.w0 - c.g / problem.lam)[None, :])[0]
        return BundleMaster(model_minimum(problem, c.g, c.beta), theta_all, point, c)
    cuts = [cuts[j] for j in usable]
    from cvxdp.conic.cones import Cone
    from cvxdp.conic.program import ConicSettings, ProgramBuilder, solve
    from cvxdp.geometry import project_onto_simplex

    d = problem.dim
    G = np.stack([c.g for c in cuts])
    B = np.array([c.beta for c in cuts])
    rows = problem.feasible_set.cone_rows()
    n = d + 1 + rows.n_aux
    builder = ProgramBuilder(n)
    # s_j = s − g_jᵀ w − β_j ≥ 0   →  A x = g_jᵀ w − s, b = −β_j
    k = len(cuts)
    rr = np.concatenate([np.repeat(np.arange(k), d), np.arange(k)])
    cc = np.concatenate([np.tile(np.arange(d), k), np.full(k, d)])
    vv = np.concatenate([G.ravel(), -np.ones(k)])
    builder.add_rows(rr, cc, vv, -B, [Cone("nonneg", k)])
    ar, ac = np.nonzero(rows.A_y)
    extra_r, extra_c, extra_v = [ar], [ac], [rows.A_y[ar, ac]]
    if rows.n_aux:
        xr, xc = np.nonzero(rows.A_aux)
        extra_r.append(xr)
        extra_c.append(d + 1 + xc)
        extra_v.append(rows.A_aux[xr, xc])
    builder.add_rows(np.concatenate(extra_r), np.concatenate(extra_c), np.concatenate(extra_v),
                     rows.b, rows.cones)
    q = np.zeros(n)
    q[:d] = -problem.lam * problem.w0
    q[d] = 1.0
    import scipy.sparse as sp

    P = sp.diags(np.concatenate([np.full(d, problem.lam), np.zeros(n - d)]), format="csc")
    sol = solve(builder.build(q, P), ConicSettings(tol=1e-11, max_iter=300))
    theta = None
    if sol.usable and np.all(np.isfinite(sol.z[:k])):
        theta = project_onto_simplex(np.maximum(sol.z[:k], 0.0)[None, :])[0]
        total = math.fsum(theta)
        theta = theta / total if total > 0 and np.all(np.isfinite(theta)) else None
    if theta is None:  # no usable weights: the best single cut (model_minimum is never NaN)
        theta = np.eye(k)[int(np.argmax([model_minimum(problem, c.g, c.beta) for c in cuts]))]
    # Σθ_j ℓ_j is a minorant when Σθ = 1; after rounding Σθ = 1 + δ, which moves the combination
    # by |δ| times the cuts' size on U — charged below, with the rounding of θ·G and θ·B
    g = theta @ G
    beta = float(theta @ B)
    reach = problem.feasible_set.norm_bound()
    slack = (k + 64.0) * EPS * (float(np.abs(theta) @ np.abs(B))
                                + float(np.abs(theta) @ np.linalg.norm(G, axis=1)) * reach
                                + problem.lam * (reach + float(np.linalg.norm(problem.w0))) ** 2)
    bound = model_minimum(problem, g, beta - slack)
    # a single cut is sometimes better than a poorly solved combination
    singles = [model_minimum(problem, c.g, c.beta) for c in cuts[-3:]]
    theta_all[usable] = theta
    # every candidate is a valid lower bound or −∞ (model_minimum never returns NaN); drop NaN anyway,
    # since Python's max keeps a leading NaN
    candidates = [v for v in (bound, *singles) if not math.isnan(v)]
    point = sol.x[:d].copy() if sol.usable and np.all(np.isfinite(sol.x[:d])) else None
    usable_sum = np.all(np.isfinite(g)) and math.isfinite(beta - slack)
    aggregate = Cut(g=g, beta=beta - slack) if usable_sum else None
    return BundleMaster(max(candidates) if candidates else -math.inf, theta_all, point, aggregate)
