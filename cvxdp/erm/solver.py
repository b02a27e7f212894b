"""The certified regularized-ERM solver: propose, certify, refine — never release uncertified.

``solve_certified(problem, α)`` returns a point ``w ∈ U`` with a certificate
``F(w) − min_U F ≤ gap ≤ α`` or raises :class:`~cvxdp.error.CertificationError`.

Methods (``ERMSettings.method``):

``"auto"`` (default)
    ``"bundle"`` where the oracle has its closed form for every example — a generalized-linear loss
    (hinge, absolute value, pinball, affine; Huber, squared, logistic) on a ball or a lens — and
    ``"conic"`` elsewhere: a rule on the loss's expression and the set's type, both public
    (:func:`default_method`).  Measured in ``benchmarks/bench_erm_solvers.py``: with the
    closed-form passes and the kink rows, the bundle method is several times faster than the joint
    program there, and its memory does not grow with the program's size.
``"conic"``
    Lemma 2.6's joint program with Clarabel, certified from its repaired
    multipliers plus the oracle's cut at the point; if the gap exceeds ``α``
    (or a solver fails): a tighter Clarabel solve, then ECOS (the quadratic as a
    second-order cone), then the cutting-plane method started from the ball
    ``B(w, sqrt(2·gap/λ))`` that provably contains the minimizer (strong
    convexity) — or from a ball around ``U`` if no solver produced a point —
    then an error.  Solver failures and time-outs are never released: they
    only move the ladder on.
``"cutting-plane"``
    The deterministic ellipsoid method over the certified oracle from a ball
    around ``U``, with its a-priori iteration bound (the paper's E.3 mode).
``"bundle"``
    The bundle method of :mod:`cvxdp.erm.bundle` from ``w₀``: one aggregated oracle pass per
    iteration (only sums over examples), the same certificate; if it misses ``α`` (``refine=True``),
    the joint program when every example is in this process, then the cutting-plane refinement.
    The method for data that are not in one process, and ``"auto"``'s choice where the oracle has a
    closed form.
``"adaptive-subgradient"``
    Algorithm 4, faithfully, until Proposition 2.8's stopping rule holds (or the
    iteration cap is reached); the average iterate is then released only if its
    *evaluated* certificate (the
    oracle's certified bracket at that point) is ``≤ α`` — the rule's bound holds
    for exact arithmetic on the joint iterate, not for the float point released —
    else the cutting-plane refinement takes over (``refine=True``) or nothing is
    released.  The reported gap is the evaluated one.

**Failing closed.** Every gate compares a *certified* gap — ``+∞`` whenever
``upper − lower`` is NaN, negative, or belongs to a non-finite point
(:func:`certified_gap`) — and refuses with ``not (gap <= α)``, so a NaN from a
solver, an oracle or a ``0·∞`` in a bound leads to refinement or to no release,
never to a release.  Refusal messages quote only public quantities (``α``, the
method and settings); the certified gaps go to the DEBUG log.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from cvxdp._validation import positive_finite, positive_int
from cvxdp.conic.program import ConicSettings
from cvxdp.erm.adaptive_subgradient import adaptive_subgradient
from cvxdp.erm.bundle import bundle_method
from cvxdp.erm.cutting_plane import ellipsoid_method
from cvxdp.erm.joint import solve_joint
from cvxdp.erm.problem import ERMCertificate, RegularizedERM, bundle_lower_bound, evaluate_upper
from cvxdp.erm.translation import TranslatedERM
from cvxdp.error import CertificationError, ParameterError, SolverError
from cvxdp.geometry import Ball, Lens
from cvxdp.run.blas import DEFAULT_THREADS, limited_blas
from cvxdp.structure import PiecewiseLinearStructure, SmoothGLMStructure

logger = logging.getLogger(__name__)

METHODS = ("auto", "conic", "cutting-plane", "adaptive-subgradient", "bundle")


@dataclass(frozen=True)
class ERMSettings:
    """How the certified ERM solver works.

    Attributes
    ----------
    method:
        One of :data:`METHODS`.
    conic:
        Solver settings of the joint program.
    refine:
        Try the refinement ladder when the first certificate misses ``α`` (for
        ``"adaptive-subgradient"``: the cutting-plane refinement).
    cutting_plane_iterations:
        Cap on ellipsoid steps (the a-priori bound is used when smaller).
    subgradient_iterations:
        Cap on Algorithm 4's steps.
    bundle_iterations:
        Cap on the bundle method's oracle passes.
    oracle_tolerance:
        Bracket width asked of the extension oracle, as a fraction of ``α``.
    subsample_rows:
        Problems with at least this many rows start the bundle method from a subsample's point
        (:mod:`cvxdp.erm.bundle`); ``None`` (default): the bundle method's ``WARM_ROWS`` (2²⁰).  A
        public knob of the route only — the released point is certified either way.
    smoothed_start_rows:
        Two-piece generalized-linear problems (hinge, absolute value, pinball) with at least this many
        rows start the bundle method from Newton's method on a smoothing (:mod:`cvxdp.erm.smoothed_start`);
        ``None`` (default): the bundle method's ``SMOOTH_ROWS`` (2048).  A public knob of the route only.
    smoothed_coarse_rows:
        The smoothed start's first stages sum every ``COARSE_STRIDE``-th row (8) where that leaves at least
        this many rows (:data:`cvxdp.erm.smoothed_start.COARSE_ROWS`, 4096, by default).  A public knob
        of the route only.
    blas_threads:
        Threads the BLAS library may use during the fit (:mod:`cvxdp.run.blas`: one by default, as
        cvxdp's products are tall and thin and a second thread costs much on shared cores); ``None``
        leaves the process's setting.
    """

    method: str = "auto"
    conic: ConicSettings = field(default_factory=lambda: ConicSettings(tol=1e-10, max_iter=200))
    refine: bool = True
    cutting_plane_iterations: int = 5000
    subgradient_iterations: int = 200_000
    bundle_iterations: int = 200
    oracle_tolerance: float = 0.02
    subsample_rows: int | None = None
    smoothed_start_rows: int | None = None
    smoothed_coarse_rows: int | None = None
    blas_threads: int | None = DEFAULT_THREADS

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ParameterError(f"ERMSettings.method must be one of {METHODS}, got {self.method!r}.")
        if not isinstance(self.conic, ConicSettings):
            raise ParameterError(f"ERMSettings.conic must be a cvxdp.ConicSettings, got "
                                 f"{type(self.conic).__name__}.")
        if not isinstance(self.refine, bool | np.bool_):
            raise ParameterError("ERMSettings.refine must be True or False.")
        tol = positive_finite("ERMSettings.oracle_tolerance", self.oracle_tolerance)
        if not tol < 1.0:
            raise ParameterError("ERMSettings.oracle_tolerance is a fraction of α and must lie in (0, 1).")
        for name, value in (("cutting_plane_iterations", positive_int("ERMSettings.cutting_plane_iterations",
                                                                       self.cutting_plane_iterations)),
                            ("subgradient_iterations", positive_int("ERMSettings.subgradient_iterations",
                                                                     self.subgradient_iterations)),
                            ("bundle_iterations", positive_int("ERMSettings.bundle_iterations",
                                                               self.bundle_iterations)),
                            ("oracle_tolerance", tol)):
            object.__setattr__(self, name, value)  # frozen: store the validated Python scalar
        if self.subsample_rows is not None:
            object.__setattr__(self, "subsample_rows",
                               positive_int("ERMSettings.subsample_rows", self.subsample_rows))
        for name in ("smoothed_start_rows", "smoothed_coarse_rows"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, positive_int(f"ERMSettings.{name}", getattr(self, name)))
        if self.blas_threads is not None:
            object.__setattr__(self, "blas_threads",
                               positive_int("ERMSettings.blas_threads", self.blas_threads))


def default_method(problem: object) -> str:
    """What ``method="auto"`` runs on ``problem``: ``"bundle"`` where every example's oracle pass has the
    closed form — a loss whose expression is generalized linear (a smooth link of one affine argument,
    or at most two affine pieces: hinge, absolute value, pinball, affine) on a ball or a lens with the
    closed form switched on — or when the examples are in partitions; ``"conic"`` otherwise.

    Public: it reads the loss's expression, the set's type and the settings, never the data (a
    two-piece loss whose pieces are not parallel for some example still runs the bundle method, with
    that example on the oracle's conic path).
    """
    if isinstance(problem, TranslatedERM):
        problem = problem.inner
    if not isinstance(problem, RegularizedERM):
        return "bundle"  # partitioned examples: the joint program needs them all in one process
    ext = problem.extension
    structure = problem.model.loss.structure
    glm_form = isinstance(structure, SmoothGLMStructure) or (
        isinstance(structure, PiecewiseLinearStructure) and len(structure.pieces) <= 2)
    closed = ext.certification == "E.3 dual" and ext.settings.closed_form and isinstance(problem.region,
                                                                                         Ball | Lens)
    return "bundle" if glm_form and closed else "conic"


def _certify(problem: RegularizedERM, w: np.ndarray, cuts: list, alpha: float, tol: float
             ) -> tuple[float, float, list]:
    upper, cut = evaluate_upper(problem, w, tol)
    all_cuts = [*cuts, cut]
    lower, _ = bundle_lower_bound(problem, all_cuts)
    return upper, lower, all_cuts


def certified_gap(upper: float, lower: float, w: np.ndarray) -> float:
    """``upper − lower`` as a certified gap, failing closed: ``+∞`` unless it is a number ``≥ 0`` at a
    finite point.

    NaN (``0·∞`` in a bound, a solver's NaN point) passes no comparison, so ``gap > α`` would be
    False and an uncertified point would slip through; a negative gap (lower above upper) can only
    come from an invalid bound.  Both become ``+∞``: a failure that leads to refinement or to no
    release, never to a release.
    """
    gap = float(upper) - float(lower)
    if not (gap >= 0.0) or not np.all(np.isfinite(np.asarray(w, dtype=float))):
        return math.inf
    return gap


def _failure(alpha: float, settings: ERMSettings) -> CertificationError:
    # α, the method and the settings are public; the certified gap and the steps taken depend on the
    # data, so they go to the DEBUG log (see the caller), not into the message
    ladder = settings.method == "conic" and settings.refine
    advice = "raise cutting_plane_iterations" if ladder else "use method='conic' with refine=True"
    return CertificationError(
        f"could not certify an α-minimizer for α = {alpha:.3e} with method={settings.method!r}"
        f"{' and its refinement' if settings.refine else ' (refine=False)'}; nothing was released. "
        f"To fix: {advice}, or choose a larger α (a public choice: it enters the sensitivity)."
    )


def _solve_translated(problem: TranslatedERM, alpha: float, settings: ERMSettings
                      ) -> tuple[np.ndarray, ERMCertificate]:
    inner_alpha = problem.inner_accuracy(alpha)
    if inner_alpha is None:
        # α is below float64's resolution at the origin (public inputs only): solve as given
        if isinstance(problem.inner, RegularizedERM):
            plain = RegularizedERM(problem.model, problem.examples, problem.region, problem.C, problem.lam,
                                   problem.w0, w_domain=problem.w_domain)
            return solve_certified(plain, alpha, settings)
        raise CertificationError(f"α = {alpha:.3e} is below float64's resolution at this region's distance "
                                 "from the origin; nothing was released. Choose a larger α or a domain "
                                 "centred nearer the origin.")
    v, cert = solve_certified(problem.inner, inner_alpha, settings)
    return problem.to_outer(v), problem.outer_certificate(cert, alpha)


def solve_certified(problem: RegularizedERM, alpha: float, settings: ERMSettings | None = None
                    ) -> tuple[np.ndarray, ERMCertificate]:
    """A point of ``U`` certified to be an ``α``-minimizer of the regularized extension ERM.

    Every gate fails closed: a gap is :func:`certified_gap` (NaN, negative or at a non-finite point:
    ``+∞``), the best point is the one with the smallest such gap, and the point is released only if
    ``gap ≤ α`` holds — written ``not (gap <= α)`` for the refusal, so NaN can never pass.

    A :class:`~cvxdp.erm.translation.TranslatedERM` (a set far from the origin) is solved in its
    translated coordinates to the smaller accuracy that leaves room for the return's rounding
    (:func:`~cvxdp.erm.translation.translated_accuracy`), and its point is returned in the caller's.

    BLAS runs with ``settings.blas_threads`` threads meanwhile, as in a fit (:mod:`cvxdp.run.blas`),
    also when this is called outside one.
    """
    settings = settings or ERMSettings()
    with limited_blas(settings.blas_threads):
        return _solve_certified(problem, alpha, settings)


def _solve_certified(problem: RegularizedERM, alpha: float, settings: ERMSettings
                     ) -> tuple[np.ndarray, ERMCertificate]:
    alpha = positive_finite("alpha", alpha)
    if settings.method == "auto":
        settings = replace(settings, method=default_method(problem))
    if isinstance(problem, TranslatedERM):
        return _solve_translated(problem, alpha, settings)
    t0 = time.perf_counter()
    tol = settings.oracle_tolerance * alpha
    steps: list[str] = []
    notes: list[str] = []
    iterations = 0
    bound: int | None = None
    best: tuple[float, np.ndarray, float, float] | None = None  # (gap, w, upper, lower)

    def record(w: np.ndarray, upper: float, lower: float, label: str) -> float:
        nonlocal best
        gap = certified_gap(upper, lower, w)
        steps.append(label)
        notes.append(f"{label}: gap {gap:.3e}")
        if best is None or gap < best[0]:
            best = (gap, w, upper, lower)
        return gap

    def refine() -> None:
        """The cutting-plane method from a ball that provably contains the minimizer."""
        nonlocal iterations
        # the minimizer lies within sqrt(2·gap/λ) of any point with that certified gap (strong
        # convexity); without a certified gap, search a ball around the whole region
        if best is not None and math.isfinite(best[0]):
            center = best[1]
            radius = math.sqrt(2.0 * max(best[0], alpha) / problem.lam) * (1.0 + 1e-6)
        else:
            center, radius = problem.feasible_set.bounding_ball()
        try:
            res = ellipsoid_method(problem, alpha, center, radius,
                                   max_iterations=settings.cutting_plane_iterations, oracle_tolerance=tol)
            iterations += res.iterations
            record(res.w, res.upper, res.lower, f"cutting-plane refinement ({res.iterations} steps)")
        except (SolverError, CertificationError) as exc:
            notes.append(f"cutting-plane refinement failed: {exc}")

    if settings.method == "conic":
        cuts: list = []
        ladder = [settings.conic]
        if settings.refine:
            ladder += [settings.conic.tightened(100.0),
                       ConicSettings(solver="ecos", tol=max(settings.conic.tol, 1e-9),
                                     max_iter=settings.conic.max_iter,
                                     time_limit=settings.conic.time_limit)]
        for conic in ladder:
            try:
                sol = solve_joint(problem, conic)
                iterations += sol.iterations
                upper, lower, cuts = _certify(problem, sol.w, [*cuts, sol.cut], alpha, tol)
            except (SolverError, CertificationError) as exc:
                notes.append(f"{conic.solver}(tol={conic.tol:.0e}) failed: {exc}")
                continue
            if record(sol.w, upper, lower, f"{conic.solver}(tol={conic.tol:.0e})") <= alpha:
                break
        if settings.refine and (best is None or not (best[0] <= alpha)):
            refine()
    elif settings.method == "bundle":
        try:
            res = bundle_method(problem, alpha, problem.w0, max_iterations=settings.bundle_iterations,
                                oracle_tolerance=tol, warm_rows=settings.subsample_rows,
                                smooth_rows=settings.smoothed_start_rows,
                                coarse_rows=settings.smoothed_coarse_rows)
        except (SolverError, CertificationError) as exc:
            notes.append(f"bundle method failed: {exc}")
        else:
            iterations += res.iterations
            warm = f" from a subsample's point ({res.warm_passes} passes over it)" if res.warm_passes else ""
            if res.smoothed_passes:
                warm = f" from the smoothed Newton point, after {res.smoothed_passes} smoothed passes"
            record(res.w, res.upper, res.lower, f"bundle ({res.iterations} passes{warm})")
        missed = best is None or not (best[0] <= alpha)
        if settings.refine and missed and isinstance(problem, RegularizedERM):
            # every example is in this process: the joint program, as the "conic" ladder's first rung
            try:
                sol = solve_joint(problem, settings.conic)
                iterations += sol.iterations
                upper, lower, _ = _certify(problem, sol.w, [sol.cut], alpha, tol)
                record(sol.w, upper, lower, f"{settings.conic.solver}(tol={settings.conic.tol:.0e})")
            except (SolverError, CertificationError) as exc:
                notes.append(f"{settings.conic.solver}(tol={settings.conic.tol:.0e}) failed: {exc}")
        if settings.refine and (best is None or not (best[0] <= alpha)):
            refine()
    elif settings.method == "cutting-plane":
        c, r = problem.feasible_set.bounding_ball()
        res = ellipsoid_method(problem, alpha, c, r * (1.0 + 1e-9),
                               max_iterations=settings.cutting_plane_iterations, oracle_tolerance=tol)
        iterations += res.iterations
        bound = res.bound
        notes.append(f"a-priori iteration bound {res.bound}")
        record(res.w, res.upper, res.lower, f"cutting-plane ({res.iterations} steps)")
    else:
        res = adaptive_subgradient(problem, alpha, settings.subgradient_iterations)
        iterations += res.iterations
        # whether the rule is met within the cap depends on the data: an unmet rule is not a refusal,
        # only a proposal with no claim — certified like any other, and refined if it misses α
        notes.append(f"stopping rule {'met' if res.converged else 'not met'} after {res.iterations} steps")
        # Proposition 2.8's rule is a proposal, not a certificate: it holds for exact subgradients and
        # projections in exact arithmetic, and for the joint iterate, not for the float point we
        # release. The point is released only if its *evaluated* certificate reaches α; otherwise
        # the cutting-plane refinement takes over from the ball the evaluated gap allows, or nothing
        # is released.
        try:
            upper, lower, _ = _certify(problem, res.w, [], alpha, tol)
        except (SolverError, CertificationError) as exc:
            notes.append(f"certificate of Algorithm 4's point failed: {exc}")
        else:
            record(res.w, upper, lower, "adaptive-subgradient (Prop. 2.8)")
        if settings.refine and (best is None or not (best[0] <= alpha)):
            refine()
    if best is None:
        raise CertificationError("no solver produced a point; nothing was released. Use method='conic' "
                                 "with refine=True.")
    gap, w, upper, lower = best
    method = " → ".join(steps)
    if not (gap <= alpha):
        logger.debug("certification failed: best certified gap %.3e > α %.3e via %s", gap, alpha, method)
        raise _failure(alpha, settings)
    cert = ERMCertificate(required=alpha, gap=gap, upper=upper, lower=lower, method=method,
                          iterations=iterations, seconds=time.perf_counter() - t0, notes=notes,
                          iteration_bound=bound)
    logger.debug("certified ERM: gap %.3e ≤ α %.3e via %s", gap, alpha, cert.method)
    return w, cert
