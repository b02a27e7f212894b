"""The certified Lipschitz-extension oracle (the paper's Appendix E.3 and Lemma 2.7).

    f_{C,U}(w, z) = min_{y ∈ U} f(y, z) + C ||w − y||,        U = W ∩ B(c, r)

:class:`LipschitzExtension` evaluates this for many examples and query points
and returns, per example, a *certified* bracket ``lower ≤ f_{C,U}(w, z) ≤ upper``
and a global affine minorant ``u ↦ <g, u> + β`` (``||g|| ≤ C``) that touches
the bracket at ``w`` — so ``g`` is a ``(upper − lower)``-approximate subgradient.

Three evaluation paths, chosen per example (from that example and public inputs only):

``closed-form``
    Generalized-linear examples (hinge, absolute, pinball, affine, Huber,
    square, logistic; ``Examples.glm().is_glm``) on a ball or lens ``U``: exact
    reduction to a 1-D problem, vectorized over examples
    (:mod:`cvxdp.extension.reduced`).
``conic``
    Piecewise-linear and smooth-GLM losses on any ``U``: conic programs solved
    by Clarabel/ECOS, certified by the explicit E.3 dual.
``conic-dual``
    Generic DPP losses: CVXPY-compiled once, certified from the repaired
    conic dual.
``exact``
    Generalized-linear examples with a piecewise-linear, Huber, square or logistic link on a
    ball or lens whose float bracket is too wide for the tolerance, or that carry
    an offset: bracketed in exact rational arithmetic (:mod:`cvxdp.extension.exact`).

(Examples that are one affine piece on ``U`` with a huge level reach the oracle
already substituted by that piece at a small level — see
:mod:`cvxdp.extension.affine_reduction`.)

Losses that are neither structured nor DPP are refused with
:class:`~cvxdp.error.UncertifiableLossError` — the oracle never reports a
bracket it did not certify.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from cvxdp._validation import finite_array, positive_finite
from cvxdp.conic.program import ConicSettings
from cvxdp.error import CertificationError, DataError, ParameterError, SolverError, UncertifiableLossError
from cvxdp.extension.blocks import structured_block
from cvxdp.extension.conic_path import generic_bracket, solve_extension_programs, structured_bracket
from cvxdp.extension.exact import exact_brackets, exact_levels
from cvxdp.extension.reduced import BracketResult, evaluate_on_balls
from cvxdp.geometry import Ball, Domain, Lens, localize
from cvxdp.links import HuberLink, LogisticLink, PiecewiseLinearLink, SquareLink
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.numerics import EPS, row_dot, row_max, row_norm
from cvxdp.structure import GenericStructure

logger = logging.getLogger(__name__)
#: The margin of :meth:`LipschitzExtension._small_levels` over the rounding estimate of a row's bracket.
SMALL_LEVEL_FACTOR = 64.0

METHODS = ("closed-form", "conic", "conic-dual", "exact")
#: Rows per block of :meth:`LipschitzExtension.level_offsets` (its temporaries are several arrays of
#: a block's rows by ``d``; the offsets do not depend on it).
OFFSET_BLOCK = 16384


@dataclass(frozen=True)
class ExtensionSettings:
    """Accuracy and solver settings of the extension oracle.

    Attributes
    ----------
    tolerance:
        Default requested bracket width ``B`` per example (absolute).
    conic:
        Settings of the conic solver used by the ``conic`` paths.
    closed_form:
        Use the vectorized closed-form path where it applies.
    iterations:
        Golden-section iterations of the closed-form path.
    chunk:
        Examples per block-diagonal conic program.
    """

    tolerance: float = 1e-9
    conic: ConicSettings = field(default_factory=ConicSettings)
    closed_form: bool = True
    iterations: int = 80
    chunk: int = 1000


@dataclass
class ExtensionEvaluation:
    """Certified evaluation of ``f_{C,U}(w_i, z_i)`` for ``m`` examples.

    Attributes
    ----------
    upper, lower:
        ``(m,)`` certified bracket of the extension's value.
    subgradient:
        ``(m, d)`` slopes ``g_i`` with ``||g_i|| ≤ C``.
    intercept:
        ``(m,)`` intercepts ``β_i``: ``f_{C,U}(u, z_i) ≥ <g_i, u> + β_i`` for all
        ``u ∈ R^d`` (and ``<g_i, w_i> + β_i = lower_i``).
    inner_point:
        ``(m, d)`` points ``y_i ∈ U`` with ``f(y_i) + C||w_i − y_i|| = upper_i``
        (up to the rounding margin); for ``method == "exact"`` a float point of ``U`` next to
        the rational point that certifies ``upper_i``.
    method:
        ``(m,)`` path that certified each example (see :data:`METHODS`).
    certified:
        ``(m,)`` whether ``upper − lower ≤ tolerance``.
    """

    upper: np.ndarray
    lower: np.ndarray
    subgradient: np.ndarray
    intercept: np.ndarray
    inner_point: np.ndarray
    method: np.ndarray
    certified: np.ndarray
    tolerance: float

    @property
    def gap(self) -> np.ndarray:
        """``upper − lower``: the certified accuracy of each example."""
        return self.upper - self.lower

    @property
    def value(self) -> np.ndarray:
        """Midpoint of the bracket (within ``gap/2`` of the true value)."""
        return 0.5 * (self.upper + self.lower)

    def minorant(self, u: np.ndarray) -> np.ndarray:
        """``<g_i, u_i> + β_i``: the certified lower bound at other points ``u`` (``(d,)`` or ``(m, d)``)."""
        u = np.asarray(u, float)
        return row_dot(self.subgradient, u) + self.intercept


class LipschitzExtension:
    """The localized Lipschitz extension ``f_{C,U}`` of a model's loss.

    Parameters
    ----------
    model:
        The :class:`~cvxdp.model.Model` (loss and domain ``W``).
    C:
        Lipschitz constant of the extension (finite, > 0).
    region:
        ``U``; default ``W`` (the un-localized ``f_C``).  Use
        :meth:`localized` for ``U = W ∩ B(c, r)``.
    settings:
        :class:`ExtensionSettings`.

    Raises
    ------
    UncertifiableLossError
        The loss has no recognized structure and is not DPP.
    ParameterError
        ``C`` is not a finite positive number.
    """

    def __init__(self, model: Model, C: float, region: Domain | None = None,
                 settings: ExtensionSettings | None = None) -> None:
        self.model = model
        self.C = positive_finite("C", C)
        self.region = model.domain if region is None else region
        if self.region.dim != model.dim:
            raise DataError(f"region has dimension {self.region.dim}, model {model.dim}.")
        self.settings = settings or ExtensionSettings()
        self._template = None
        if isinstance(model.loss.structure, GenericStructure):
            from cvxdp.extension.template import ConicTemplate

            self._template = ConicTemplate(model.loss)  # raises UncertifiableLossError

    @classmethod
    def localized(cls, model: Model, C: float, center: np.ndarray, radius: float,
                  settings: ExtensionSettings | None = None) -> LipschitzExtension:
        """``f_{C,U}`` with ``U = W ∩ B(center, radius)`` (``center`` must lie in ``W``)."""
        return cls(model, C, localize(model.domain, center, radius), settings)

    @property
    def certification(self) -> str:
        """How this loss is certified: ``"E.3 dual"`` (structured) or ``"conic dual"`` (generic)."""
        return "conic dual" if self._template is not None else "E.3 dual"

    # ------------------------------------------------------------------
    def evaluate(self, w: np.ndarray, examples: Examples, tolerance: float | None = None,
                 require: bool = False, offsets: np.ndarray | None = None) -> ExtensionEvaluation:
        """Certified brackets, minorants and inner points at ``w`` for every example.

        Parameters
        ----------
        w:
            Query point ``(d,)`` shared by all examples, or ``(m, d)`` one per example.
        examples:
            Data bound to the model's loss (:meth:`Model.bind`).
        tolerance:
            Requested bracket width ``B`` (default: the settings' tolerance).
        require:
            Raise :class:`CertificationError` if any example misses ``B``.
        offsets:
            Per-example constants ``κ_i`` (from :meth:`level_offsets`; exact rationals or floats): the
            brackets, minorants
            and intercepts returned are those of ``f_{C,U}(·, z_i) − κ_i``.  Subtracting a
            constant from an example's loss moves no minimizer, and keeps the rounded values of
            a huge-level example small.
        """
        if examples.loss is not self.model.loss:
            raise DataError("examples were bound to a different loss; use model.bind(data).")
        m, d = examples.m, self.model.dim
        W = finite_array("query point w", w)
        if W.shape == (d,):
            W = np.broadcast_to(W, (m, d))
        elif W.shape != (m, d):
            raise DataError(f"query point w must have shape ({d},) or ({m}, {d}), got {W.shape}.")
        W = np.ascontiguousarray(W)
        tol = self.settings.tolerance if tolerance is None else positive_finite("tolerance",
                                                                                 tolerance)
        C = self.C
        method = np.full(m, "", dtype=object)
        res = BracketResult(upper=np.full(m, np.inf), lower=np.full(m, -np.inf),
                            g=np.zeros((m, d)), beta=np.full(m, -np.inf), y=np.zeros((m, d)),
                            pi=np.zeros(m))
        todo = np.arange(m)
        glm = None if self._template is not None else examples.glm()
        closed = (self.settings.closed_form and glm is not None and np.any(glm.is_glm)
                  and isinstance(self.region, Ball | Lens))
        # the examples the exact path can take: generalized-linear with a piecewise-linear link on a
        # ball or lens (the other rows of (a, b, link) are stand-ins, not those examples' losses)
        exactable = (glm.is_glm if closed and _exact_link(glm.link) else np.zeros(m, dtype=bool))
        shifted = np.zeros(m, dtype=bool) if offsets is None else np.asarray(offsets != 0, dtype=bool)
        if np.any(shifted & ~exactable):
            raise ParameterError("per-example offsets are applied by the exact path only, which needs a "
                                 "generalized linear loss with a piecewise-linear or smooth link on "
                                 "a ball or lens; "
                                 "take them from level_offsets() of the same extension and examples.")
        if closed:
            # per example: the generalized-linear examples take the closed form, the others the
            # conic path.  It runs on all rows at their own positions (so no example's bits depend
            # on which others are GLM) and keeps the GLM rows only; the rest hold stand-ins.
            a, b, link = glm
            r = evaluate_on_balls(W, a, b, link, C, self.region, self.settings.iterations)
            _store(res, r, todo, glm.is_glm)
            method[glm.is_glm] = "closed-form"
            todo = todo[~(glm.is_glm & (res.upper - res.lower <= tol))]
            # the float bracket of these examples is too wide for their share of the accuracy (or they
            # carry an offset, which only exact arithmetic applies without rounding their level):
            # evaluate them exactly — a decision on each example's own numbers
            exact = np.union1d(todo, np.nonzero(shifted)[0]).astype(int)
            exact = exact[exactable[exact]]
            if exact.size:
                off = np.zeros(m, dtype=object) if offsets is None else offsets
                r_exact = exact_brackets(W, a, b, link, C, self.region, exact,
                                         off, tol, self.settings.iterations, r)
                _store(res, r_exact, exact)
                method[exact] = "exact"
                todo = todo[~exactable[todo]]
        if todo.size:
            self._conic(W, examples, todo, res, method, glm, tol)
        # fail closed: a lower bound above the upper bound proves one of them wrong, so that example's
        # lower bound and minorant are voided — a net (it caught the generic conic path's uncharged
        # auxiliary residual, found by review, before that residual was made exactly zero)
        crossed = ~(res.lower <= res.upper)  # NaN too
        res.lower[crossed], res.beta[crossed] = -np.inf, -np.inf
        # a bracket is certified only with both ends finite and a width ≤ B (NaN fails)
        width = res.upper - res.lower
        certified = np.isfinite(res.upper) & np.isfinite(res.lower) & (width <= tol)
        if require and not np.all(certified):
            # how many examples missed B and by how much depend on the data: DEBUG log only
            logger.debug("extension: %d of %d brackets above B = %.3g (worst %.3g)",
                         int(np.sum(~certified)), m, tol, float(np.nanmax(width, initial=-np.inf)))
            raise CertificationError(
                f"some examples could not be certified to the bracket width B = {tol:.3g}; nothing "
                "was released. Raise the tolerance (a public choice) or tighten the conic settings."
            )
        return ExtensionEvaluation(upper=res.upper, lower=res.lower, subgradient=res.g,
                                   intercept=res.beta, inner_point=res.y,
                                   method=method.astype(str), certified=certified, tolerance=tol)

    def level_offsets(self, examples: Examples, point: np.ndarray | None = None) -> np.ndarray:
        """Per-example constants ``κ_i`` that remove each example's *level* on ``U`` (see :meth:`evaluate`).

        ``κ_i = 0`` where the float bracket at the public ``point`` (default: an interior point of
        ``U``) is already within ``2⁻⁴⁰ (1 + C·diam U)`` — or, for a piecewise-linear link, where the
        example is small enough on ``U`` for that to hold at every point (:meth:`_small_levels`, a
        test on the row's own numbers that spares such rows the exact path); otherwise ``κ_i`` is the exact
        bracket's midpoint there, an exact rational (an ``object`` array of
        :class:`~fractions.Fraction`) — so ``f_{C,U}(w, z_i) − κ_i`` is at most
        ``C||w − point||`` plus that bracket in size for every ``w``.  Each ``κ_i`` is a function
        of its own example, ``C``, ``U`` and ``point`` only; any constant keeps the minimizer, so
        the offsets are invisible to the sensitivity argument.
        """
        m = examples.m
        out = np.zeros(m, dtype=object)
        glm = None if self._template is not None else examples.glm()
        if (glm is None or not _exact_link(glm[2]) or not self.settings.closed_form
                or not isinstance(self.region, Ball | Lens)):
            return out
        c = self.region.make_feasible(self.region.interior_point()) if point is None else point
        c = np.asarray(c, float)
        if c.shape != (self.model.dim,):  # one public point for every row (the blocks broadcast it)
            raise ParameterError(f"point must be one point of shape ({self.model.dim},), got shape "
                                 f"{c.shape}.")
        tol = 2.0**-40 * (1.0 + self.C * self.region.diameter)
        a, b, link = glm
        small = self._small_levels(a, b, link, tol, glm.a_norm())
        # in blocks of rows: the brackets are computed row by row (the same bits in any block), and a
        # block's query points, minorants and inner points are arrays of its size, not m's
        for start in range(0, m, OFFSET_BLOCK):
            stop = min(start + OFFSET_BLOCK, m)
            # generalized-linear examples only (the conic path of the others applies no offset), and of
            # those only the ones whose size does not already settle their offset at 0 (with heavy-tailed
            # features, a few in a thousand): the float pass and the exact path run on those rows alone.
            # Each row's bracket is a function of that row (cvxdp.numerics.row_dot; the 1-D searches run
            # a fixed number of steps per row), so which other rows are in the pass cannot move it
            need = start + np.nonzero(glm.is_glm[start:stop] & ~small[start:stop])[0]
            if not need.size:
                continue
            ab, bb, lk = a[need], b[need], link.subset(need)
            # the point shared by every row: one membership test, not one per row
            r = evaluate_on_balls(c, ab, bb, lk, self.C, self.region, self.settings.iterations)
            rows = np.nonzero(~(r.upper - r.lower <= tol))[0]
            if rows.size:
                W = np.broadcast_to(c, (need.size, self.model.dim)).copy()
                out[need[rows]] = exact_levels(W, ab, bb, lk, self.C, self.region, rows, tol,
                                               self.settings.iterations, r)
        return out

    def _small_levels(self, a: np.ndarray, b: np.ndarray, link: object, tol: float,
                      a_norm: np.ndarray | None = None) -> np.ndarray:
        """Rows of a piecewise-linear link small enough on ``U`` that their offset is 0 without the exact
        path: a row at a time, from the row's own numbers and the public ``U``, ``d``.

        The closed form's and the clipped rows' brackets are rounding margins proportional to the terms
        they charge — ``|κ_j| (||a|| ||y|| + |b|)`` and ``|e_j|``, and ``C`` times a distance in ``U``,
        whose share is covered by the ``C diam U`` in ``tol`` — so a row whose size ``S = max_j |κ_j|
        (||a|| N + |b|) + max_j |e_j|`` (``N`` bounding ``||y||`` on ``U``) satisfies
        ``SMALL_LEVEL_FACTOR (2d + 64) ε S ≤ tol`` has such a bracket well inside ``tol``
        (at most ``0.06 tol`` measured over 60 random batches of LAD, pinball and hinge rows, balls and
        lenses, ``C`` from 0.1 to 1000; ``0.21 tol`` at a quarter of this margin).  A row the 1-D search
        brackets (neither tight nor clipped) may get a wider float bracket there (5× ``tol`` found by
        review on a lens with ``C = 89``); its offset is 0 all the same, which is valid — any per-row
        constant keeps the minimizer and the gaps, so this decides which rows pay for the exact path,
        never soundness — and a row of this size needs no offset: its values on ``U`` are already of
        the size an offset would leave.  Other links: no row is settled here."""
        m, d = a.shape
        if not isinstance(link, PiecewiseLinearLink):
            return np.zeros(m, dtype=bool)
        kappa = np.broadcast_to(link.slopes, (m, link.slopes.shape[-1]))
        levels = np.broadcast_to(link.intercepts, kappa.shape)
        with np.errstate(invalid="ignore", over="ignore"):
            norms = row_norm(a) if a_norm is None else a_norm
            size = (row_max(np.abs(kappa)) * (norms * self.region.norm_bound() + np.abs(b))
                    + row_max(np.abs(levels)))
            return size * (SMALL_LEVEL_FACTOR * (2.0 * d + 64.0) * EPS) <= tol  # NaN: not settled

    def _conic(self, W: np.ndarray, examples: Examples, todo: np.ndarray, res: BracketResult,
               method: np.ndarray, glm: tuple | None, tol: float) -> None:
        settings = self.settings.conic
        for attempt in range(3):
            sub = examples.subset(todo)
            Wt = W[todo]
            try:
                if self._template is not None:
                    block = self._template.block(sub)
                    batch = solve_extension_programs(block, self.region, Wt, self.C, settings,
                                                     self.settings.chunk if attempt == 0 else 1)
                    r, _ = generic_bracket(sub, block, self.region, Wt, self.C, batch)
                    label = "conic-dual"
                else:
                    block = structured_block(sub)
                    batch = solve_extension_programs(block, self.region, Wt, self.C, settings,
                                                     self.settings.chunk if attempt == 0 else 1)
                    sub_glm = sub.glm() if block.pi_rows is None else None
                    r = structured_bracket(sub, block, self.region, Wt, self.C, batch, sub_glm,
                                           self.settings.iterations)
                    label = "conic"
                # an upper bound of +inf is an honest "no certified inner point" for that example;
                # NaN or a non-finite subgradient means the solver's points are unusable -- for that
                # example only: its bracket becomes vacuous and it is retried, the others are kept
                unusable = np.isnan(r.upper) | ~np.all(np.isfinite(r.g), axis=1)
                if np.all(unusable):
                    raise SolverError("non-finite points from the conic solver")
                if np.any(unusable):
                    r.upper[unusable], r.lower[unusable] = np.inf, -np.inf
                    r.g[unusable], r.beta[unusable] = 0.0, -np.inf
            except SolverError as exc:
                logger.debug("extension: conic attempt %d failed: %s", attempt, exc)
                settings = ConicSettings(solver="ecos" if settings.solver == "clarabel" else "clarabel",
                                         tol=settings.tol, max_iter=settings.max_iter)
                continue
            better = ((r.upper - r.lower) < (res.upper[todo] - res.lower[todo])) | (
                method[todo] == "")
            _store(res, r, todo, better)
            method[todo[better]] = label
            todo = todo[~(res.upper[todo] - res.lower[todo] <= tol)]
            if not todo.size:
                return
            logger.debug("extension: %d examples above tolerance after attempt %d", todo.size,
                         attempt)
            settings = settings.tightened(100.0) if attempt == 0 else ConicSettings(
                solver="ecos" if settings.solver == "clarabel" else "clarabel",
                tol=settings.tol, max_iter=settings.max_iter)


def _exact_link(link: object) -> bool:
    """Links the exact path bounds rigorously: piecewise linear, Huber, square, logistic."""
    return isinstance(link, PiecewiseLinearLink | HuberLink | SquareLink | LogisticLink)


def _store(res: BracketResult, r: BracketResult, idx: np.ndarray,
           mask: np.ndarray | None = None) -> None:
    if mask is None:
        mask = np.ones(idx.size, dtype=bool)
    sel = idx[mask]
    res.upper[sel] = r.upper[mask]
    res.lower[sel] = r.lower[mask]
    res.g[sel] = r.g[mask]
    res.beta[sel] = r.beta[mask]
    res.y[sel] = r.y[mask]
    res.pi[sel] = r.pi[mask]


__all__ = ["METHODS", "ExtensionEvaluation", "ExtensionSettings", "LipschitzExtension",
           "UncertifiableLossError"]
