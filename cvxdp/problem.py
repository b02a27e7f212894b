"""The public API: a private learning problem stated in CVXPY, solved with pure ε-DP.

    problem = cvxdp.PrivateProblem(cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 2]))
    result = problem.solve({"x": X, "y": y}, epsilon=1.0, moment_k=4, G_k=6.0)
    result.w          # the private model
    result.ledger     # every release, and the total ε spent

Algorithms (``algorithm=``):

``"auto"`` (default)
    A public choice (:mod:`cvxdp.plan.auto`): ``"recursive"`` with the clip rule's constants
    ``C = G₂ min(1, (nε/(1000 d))^{1/(2k)})`` (:func:`~cvxdp.plan.auto.clip_level`),
    ``λ = 4C sqrt(d/(nε))/D`` when a public ``G_2 ≤ 0.85 G_k`` (at ``k = 4``; wider for
    ``2 < k < 4``: :func:`~cvxdp.plan.auto.clip_tail_ratio`) declares a heavy tail and
    ``n ε / d <`` :data:`~cvxdp.plan.auto.POPULATION_FROM` (where Algorithm 1's adaptive constants
    cannot yet pay for their worst-case bounds), ``"recursive"`` when a fixed ``lam`` is given or
    ``n`` is too small for Algorithm 1's phases, ``"population"`` otherwise — and, before all of these,
    ``"mean-gradient"`` when the loss is affine in ``w`` (unless an option only the localization
    algorithms read is given; with ``G_k="auto"`` its tail histogram estimates ``G_k``).
    ``result.algorithm`` and the plan say which ran and why.
``"population"``
    Algorithm 1 over Algorithm 3 over Algorithm 2 — the paper's method, with the
    optimal heavy-tailed rate.
``"recursive"``
    Algorithm 3 on all the data (one regularized ERM, localized).
``"output-perturbation"``
    One round of Algorithm 2 on ``U = W`` — the plain-extension ablation.
``"mean-gradient"``
    For a loss affine in ``w`` only (:mod:`cvxdp.plan.mean_gradient`): one ℓ2-Laplace release of the
    mean of the per-example gradients clipped to ``C = G_k((k−1)nε/(2d))^{1/k}``, then the minimizer
    of the released linear function over ``W`` — the heavy-tailed rate with no ``λ`` to shrink it.

Every argument is validated before any data is touched or noise drawn; the
ledger is checked against ``ε`` before each release and again at the end.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from cvxdp.conic.program import SOLVERS
from cvxdp.erm.solver import ERMSettings
from cvxdp.error import ParameterError, PrivacyLeakWarning, UncertifiableLossError
from cvxdp.extension import LipschitzExtension
from cvxdp.model import Model
from cvxdp.plan.inputs import PublicInputs
from cvxdp.plan.planner import Planner, ReleasePlan
from cvxdp.plan.profiles import Profile
from cvxdp.plan.schedule import PhaseSchedule
from cvxdp.privacy.accountant import BudgetAccountant
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.mechanisms import release_box_edge
from cvxdp.privacy.random import noise_source
from cvxdp.run.blas import DEFAULT_THREADS, limited_blas
from cvxdp.run.executor import Executor, get_executor
from cvxdp.run.fit import run_fit
from cvxdp.run.partitions import Partitions
from cvxdp.run.release import LocalizationStep
from cvxdp.structure import GenericStructure, is_affine


@dataclass
class PrivateResult:
    """The outcome of a private solve.

    What the privacy guarantee covers is ``w``; every other attribute is a public input, a function
    of public inputs, or a function of earlier ε-DP releases (the centers of earlier rounds, and ``C``
    and ``moment_bound`` when they come from the private tail histogram) — unless ``solve`` was asked
    for ``diagnostics=True``, which adds the data-dependent figures described below.

    Attributes
    ----------
    w:
        The ε-DP model (in ``W``).  Together with the public inputs, this is what
        the privacy guarantee covers.
    ledger:
        Every release with its ``ε``, sensitivity, noise scale and batch; the
        total is at most the requested ``ε``.
    steps:
        One record per Algorithm 2 call: public constants (``C``, ``λ``, ``α``,
        sensitivity, noise scale, radii) and the released center.  Its
        ``certificate`` (the certified gap, its bounds, the solver path, seconds —
        data-dependent) is kept only with ``diagnostics=True`` and is ``None``
        otherwise.  Empty when no fit ran (``release_plan.fallback == "centre"``: ``w`` is then the
        domain's public centre).
    moment_bound:
        The ``G_k`` the fit planned for (the private estimate with ``G_k="auto"``); NaN when no fit
        ran.
    release_plan:
        The :class:`~cvxdp.plan.planner.ReleasePlan` the fit ran (print it with ``describe()``): a
        function of the public inputs and, with the tail histogram, of that release.
    diagnostics_enabled:
        Whether ``solve(..., diagnostics=True)`` was asked for (a public choice).
    released_mean:
        The affine plan's release (``algorithm="mean-gradient"``): the noisy mean of the per-example
        gradients clipped to ``C``, snapped into its public box — ε-DP, and ``w`` is its linear
        minimizer over ``W``.  For the affine loss :func:`cvxdp.losses.affine` the gradient of an
        example is its ``x``, so this is a private mean of the rows (what the estimators' private
        feature centring reads, :mod:`cvxdp.centring`).  ``None`` for every other plan and when no fit
        ran.
    certificates, timings, diagnostics:
        Data-dependent figures (certified gaps, solver methods, wall-clock times), available only
        with ``diagnostics=True``; otherwise reading them raises
        :class:`~cvxdp.error.ParameterError` (nothing data-dependent was kept to read).  They are
        *not* covered by the privacy guarantee: do not publish them.
    """

    w: np.ndarray
    ledger: PrivacyLedger
    steps: list[LocalizationStep]
    epsilon: float
    algorithm: str
    profile: str
    schedule: PhaseSchedule | None
    moment_bound: float = float("nan")
    diagnostics_enabled: bool = False
    _timings: dict[str, float] | None = field(default=None, repr=False)
    release_plan: ReleasePlan | None = field(default=None, repr=False)
    released_mean: np.ndarray | None = field(default=None, repr=False)

    @property
    def epsilon_spent(self) -> float:
        return self.ledger.spent

    def _require_diagnostics(self, name: str) -> None:
        if not self.diagnostics_enabled:
            raise ParameterError(
                f"result.{name} is a diagnostic and was not kept: pass diagnostics=True to "
                "PrivateProblem.solve (or to the estimator) to keep certificates and timings. They "
                "depend on the data and are not covered by the privacy guarantee; do not publish them."
            )

    @property
    def certificates(self) -> list[dict]:
        """Per ERM call: required ``α``, certified gap, sensitivity, noise scale (diagnostics only)."""
        self._require_diagnostics("certificates")
        return [{
            "phase": s.phase, "group": s.group, "round": s.round, "m": s.m, "C": s.plan.C,
            "lambda": s.lam, "epsilon": s.epsilon, "alpha": s.plan.alpha,
            "certified_gap": s.certificate.gap, "sensitivity": s.plan.sensitivity,
            "noise_scale": s.plan.noise_scale, "radius": s.radius, "radius_plus": s.plan.radius_plus,
            "method": s.certificate.method,
        } for s in self.steps]

    @property
    def timings(self) -> dict[str, float]:
        """Wall-clock seconds per stage (diagnostics only: solve times depend on the data)."""
        self._require_diagnostics("timings")
        return dict(self._timings or {})

    @property
    def diagnostics(self) -> dict:
        """``{"certificates": ..., "timings": ...}`` (diagnostics only; not private)."""
        self._require_diagnostics("diagnostics")
        return {"certificates": self.certificates, "timings": self.timings}

    def summary(self) -> str:
        """The algorithm, the ε spent, the number of releases and ``w``: public or private figures only."""
        rounds = len(self.steps)
        gradient = self.release_plan is not None and self.release_plan.gradient is not None
        extra = len(self.ledger.entries) - rounds - gradient
        what = ("a noisy clipped mean of the gradients" if gradient
                else "no fit: the domain's centre" if self.algorithm == "mean-gradient"
                else f"{rounds} localization rounds")
        lines = [f"private model ({self.algorithm}, profile {self.profile}): "
                 f"ε spent {self.ledger.spent:.4g} of {self.epsilon:.4g}, "
                 f"{len(self.ledger.entries)} releases ({what}"
                 + (" and the private tail histogram" if extra else "") + ")",
                 "w = " + np.array2string(self.w, precision=4, max_line_width=100)]
        return "\n".join(lines)


def _no_floating_point_warnings(method):
    """Run ``method`` with numpy's floating-point warnings off.

    Privacy: a warning printed during a fit is an observable output, and numpy's "overflow" /
    "invalid value" warnings fire on the data's magnitudes (a record of ``10¹⁰⁰``, a bracket
    overflowing beside a large ``C``) — one record would decide whether a line appears.  Every such
    result is handled where it arises by a gate that fails closed (a non-finite bound is vacuous,
    a non-finite bracket takes the exact path or is uncertified), so the warning carries no
    information cvxdp needs; cvxdp's own warnings (``UtilityWarning`` from the private tail
    histogram, ``PrivacyLeakWarning`` from public settings) are unaffected.
    """
    @functools.wraps(method)
    def quiet(*args, **kwargs):
        erm = kwargs.get("erm")
        threads = erm.blas_threads if isinstance(erm, ERMSettings) else DEFAULT_THREADS
        with np.errstate(all="ignore"), limited_blas(threads):  # BLAS threads: cvxdp.run.blas
            return method(*args, **kwargs)

    return quiet


class PrivateProblem:
    """A :class:`~cvxdp.model.Model` to be solved under pure ε-differential privacy."""

    def __init__(self, model: Model) -> None:
        if not isinstance(model, Model):
            raise ParameterError(f"PrivateProblem needs a cvxdp.Model, got {type(model).__name__}.")
        self.model = model

    @_no_floating_point_warnings
    def solve(self, data: Mapping, *, epsilon: float, moment_k: float, G_k: float | str,
              G_2: float | None = None, algorithm: str = "auto", profile: str | Profile = "tight",
              delta: float = 0.1, localize: bool = True, random_state: object = None,
              erm: ERMSettings | None = None, tail_share: float | None = None,
              tail_range: tuple[float, float] | None = None,
              lambda_scale: float | None = None, lambda_growth: float | None = None,
              max_phases: int | None = None, lam: float | None = None,
              boosting_groups: int | None = None, progress: bool = False,
              diagnostics: bool = False, accountant: BudgetAccountant | None = None,
              executor: Executor | None = None, solver: str | None = None,
              verbose: bool = False) -> PrivateResult:
        """Fit an ε-DP model.

        Parameters
        ----------
        data:
            ``placeholder name -> array`` with one row per example.
        epsilon:
            Total privacy budget (finite, > 0): everything below is paid from it.
        moment_k, G_k:
            The public moment bound ``E sup_{w∈W} ||∂f(w, z)||^k ≤ G_k^k`` (``k ≥ 2``), or
            ``G_k="auto"`` to estimate it privately (a ``tail_share`` of ε, default 0.1;
            see :mod:`cvxdp.privacy.tail` for what such an estimate can and cannot promise).
            If that histogram sees nothing above its noise (small ``n ε``), there is no scale to
            plan for: the fit releases the domain's public centre and spends no more of ε, or, with
            a declared ``tail_range``, plans for its top as a public ``G_k``
            (``result.release_plan.fallback`` says which; a :class:`~cvxdp.error.UtilityWarning`
            names the remedies).
        G_2:
            Second-moment bound (defaults to ``G_k``, valid since ``G_2 ≤ G_k``).
        algorithm:
            One of :data:`ALGORITHMS`.
        profile:
            ``"tight"`` (default) or ``"paper"``: same ε-DP guarantee, different constants;
            or a profile object, e.g. ``TightProfile(clip=C)`` to fix the extension
            constant ``C`` of every round from public knowledge (never from ``data``).
        delta:
            Failure probability of the utility guarantee (not of privacy).
        localize:
            ``False`` runs the plain-extension ablation (one round on ``U = W``).
        random_state:
            ``None`` for secure noise; a seed or Generator for reproducible (not
            production) noise, with a :class:`~cvxdp.error.PrivacyLeakWarning`.
        erm:
            :class:`~cvxdp.erm.solver.ERMSettings` (solver method and accuracy ladder).
        tail_share:
            Share of ε spent on a private histogram of the per-example Lipschitz
            constants, which calibrates the extension's bias (tight profile;
            default 0.1 when the loss allows it, 0 for the paper profile, and 0 when
            ``algorithm="auto"`` runs the clip rule, unless ``tail_range`` is declared: see
            :mod:`cvxdp.plan.auto`; with a public ``G_k`` the affine plan runs no histogram, and a
            positive ``tail_share`` asks ``"auto"`` for the localization algorithms instead).
        tail_range:
            Public range ``(low, high)`` of the per-example Lipschitz constants for
            the histogram's geometric grid.  Default ``(1e-4 G_k, 1e4 G_k)``, or
            ``(1e-6, 1e10)`` with ``G_k="auto"``.  A narrower range (from units and
            domain knowledge, never from the data) means fewer bins, so small data
            sets still see their tail above the noise; a declared range's top is also the
            public ``G_k`` a ``G_k="auto"`` fit falls back to when the histogram sees nothing.
        lambda_scale, lambda_growth, max_phases:
            Algorithm 1's schedule ``λ_t = scale·λ₁·growth^{t−1}``.  Default: the
            paper profile uses scale 1, growth 8 and every phase; the tight profile
            picks all three by minimizing the public excess-risk proxy of
            :func:`~cvxdp.plan.schedule.schedule_proxy`, with the growth held to 4 where
            the first round of the proxy's own schedule clips at ``C ≥ 2.5 G₂`` with ``G₂ < G_k``
            (:func:`~cvxdp.plan.schedule.choose_schedule`).
        lam:
            A fixed ``λ`` for the single-ERM algorithms (refused with ``"population"``, whose schedule
            sets λ per phase: use ``lambda_scale`` there).
        boosting_groups:
            ``J`` of Algorithm 1's majority vote (default: the profile's).
        progress:
            Show a progress bar over Algorithm 1's phases.
        diagnostics:
            ``True`` keeps data-dependent figures on the result — each step's ERM certificate (certified
            gap, bounds, solver path, seconds), ``result.certificates``, ``result.timings`` — for
            debugging and research.  They are **not private**: do not publish them.  ``False``
            (default) stores none of them (``step.certificate`` is ``None``) and reading them raises
            :class:`~cvxdp.error.ParameterError`; the released point and its distribution are the same
            either way.
        accountant:
            A :class:`~cvxdp.privacy.accountant.BudgetAccountant` shared by several calls on the same data.
            This call charges it the whole ``epsilon`` after validating its arguments and *before*
            reading the data or drawing any noise; if the charge would exceed the accountant's total
            (exact arithmetic) the call raises :class:`~cvxdp.error.PrivacyBudgetError`, touches no
            data and spends nothing — a decision that depends on public budgets only.  A call that
            fails later (e.g. on invalid data) keeps its charge.  To spend one budget ``ε`` over
            several fits of the same data (sequential composition: all their outputs together are
            ``ε``-DP), pass one accountant to every call, e.g.
            ``acc = BudgetAccountant(1.0)`` and ``epsilon=acc.split(4)`` for four equal fits, or
            ``GridSearchCV(PrivateLADRegressor(accountant=acc), {"epsilon": [...]}, n_jobs=1,
            error_score="raise")`` with ``acc`` sized for every fit of the search (grid × folds,
            plus the refit).  ``None`` (default): only this call's own ledger, which caps this call.
        solver, verbose:
            CVXPY's habits: ``solver=cp.CLARABEL`` (default) or ``cp.ECOS`` chooses the conic solver of
            the certified ERM (other solvers are refused: the certificate repairs the conic duals of
            cvxdp's own direct Clarabel or ECOS calls); ``verbose=True`` prints the solver's log.
            Both override ``erm.conic``.  Neither changes what is released, only how it is computed —
            but the log is a **diagnostic**: its objective values and iteration counts depend on the
            data and are not covered by the privacy guarantee (a :class:`~cvxdp.error.PrivacyLeakWarning`
            says so); do not publish it.
        executor:
            Where the independent groups of a phase of Algorithm 1 run: ``None`` (default) serially
            in this process, or e.g. :class:`~cvxdp.run.executor.ProcessExecutor` ``(workers=2)``.
            Each group draws from its own noise source, spawned from the main one, so for a given
            seed the released model is the same either way.

        The order of work is: validate the public inputs (:meth:`plan` returns the plan of this
        step without data) → charge ``accountant`` → bind the data → the private tail release →
        plan → charge the ledger for every release of the plan → run → result.
        """
        t0 = time.perf_counter()
        if not isinstance(diagnostics, bool | np.bool_) or not isinstance(progress, bool | np.bool_):
            raise ParameterError("diagnostics and progress must be True or False.")
        diagnostics = bool(diagnostics)
        erm = solver_settings(erm, solver, verbose)
        warn_if_debug_log()
        inputs = self._inputs(epsilon=epsilon, moment_k=moment_k, G_k=G_k, G_2=G_2, algorithm=algorithm,
                              profile=profile, delta=delta, localize=localize, tail_share=tail_share,
                              tail_range=tail_range, lambda_scale=lambda_scale, lambda_growth=lambda_growth,
                              max_phases=max_phases, lam=lam, boosting_groups=boosting_groups, erm=erm)
        executor = get_executor(executor)
        if executor.data_parallel and erm is not None and erm.method == "adaptive-subgradient":
            raise ParameterError("a data-parallel executor runs the ERM on partition sums: use "
                                 "ERMSettings(method='bundle') (its default here) or 'cutting-plane'; "
                                 "'adaptive-subgradient' needs every example in this process.")
        if executor.remote and not executor.data_parallel and not noise_source(
                random_state, warn=False).spawns_independent:
            raise ParameterError("this noise source cannot make independent sources for groups run in "
                                 "other processes; use random_state=None, a seed, or the serial executor.")
        if accountant is not None:
            _charge_accountant(accountant, inputs, random_state)
        if executor.data_parallel:  # bound and validated where the rows live (cvxdp.run.partitions)
            examples = Partitions.from_data(self.model, data, executor)
            inputs = inputs.with_n(examples.n)
        else:
            examples = self.model.bind(data)
            inputs = inputs.with_n(examples.m)
        source = noise_source(random_state)
        ledger = PrivacyLedger(inputs.n, inputs.epsilon)
        timings: dict[str, float] = {"validation": time.perf_counter() - t0}
        w, steps, plan, released = run_fit(self.model, examples, Planner(inputs), ledger=ledger,
                                           source=source, erm=erm or ERMSettings(), executor=executor,
                                           progress=progress, timings=timings)
        ledger.verify()
        if not diagnostics:  # keep only public constants and released centers on the result
            steps = [replace(s, certificate=None) for s in steps]
        return PrivateResult(w=np.asarray(w, float), ledger=ledger, steps=steps, epsilon=inputs.epsilon,
                             algorithm=inputs.algorithm, profile=plan.profile_name, schedule=plan.schedule,
                             moment_bound=float(plan.G_k), diagnostics_enabled=diagnostics,
                             _timings=timings if diagnostics else None, release_plan=plan,
                             released_mean=None if released is None else np.asarray(released, float))

    @_no_floating_point_warnings
    def plan(self, *, n: int, epsilon: float, moment_k: float, G_k: float | str, **options) -> ReleasePlan:
        """The dry run: the :class:`~cvxdp.plan.planner.ReleasePlan` of :meth:`solve` for ``n`` examples.

        Takes ``solve``'s arguments (those that shape the plan) and no data; print it with
        ``.describe()``.  With the private tail histogram on (``tail_share > 0``, the default for
        structured losses) the plan is *provisional*: the histogram's ε is fixed, and ``C``, the
        schedule and the radii (and ``G_k`` with ``G_k="auto"``) are shown for the public worst case
        and set by the release in the fit.
        """
        inputs = self._inputs(epsilon=epsilon, moment_k=moment_k, G_k=G_k, **options).with_n(n)
        return Planner(inputs).plan()

    def _inputs(self, *, erm: ERMSettings | None = None, **options) -> PublicInputs:
        """Validate the options, then the loss and solver settings they need (public values only)."""
        structure = self.model.loss.structure
        structured = not isinstance(structure, GenericStructure)
        centre, radius = self.model.domain.bounding_ball()
        inputs = PublicInputs.from_options(d=self.model.dim, D=self.model.diameter, structured=structured,
                                           affine=is_affine(structure),
                                           box_edge=release_box_edge(centre, radius),
                                           **options)
        if erm is not None and not isinstance(erm, ERMSettings):
            raise ParameterError(f"erm must be a cvxdp.ERMSettings (e.g. ERMSettings(method='conic')) or "
                                 f"None, got {type(erm).__name__}.")
        erm = erm or ERMSettings()
        if erm.method == "adaptive-subgradient" and not structured:
            raise UncertifiableLossError(
                "Algorithm 4 (method='adaptive-subgradient') needs an exact subgradient oracle, which "
                "cvxdp has for piecewise-linear and generalized-linear losses only; use method='conic'."
            )
        LipschitzExtension(self.model, 1.0)  # refuses uncertifiable losses before any work
        return inputs


def debug_log_enabled() -> bool:
    """Whether any of cvxdp's loggers (``cvxdp`` or a module's, ``cvxdp.*``, each with its own level) would
    record a DEBUG message."""
    # the loggers that exist (placeholders for names without a logger of their own are skipped, not made)
    loggers = [logger for name, logger in list(logging.Logger.manager.loggerDict.items())
               if (name == "cvxdp" or name.startswith("cvxdp.")) and isinstance(logger, logging.Logger)]
    return any(logger.isEnabledFor(logging.DEBUG) for logger in [logging.getLogger("cvxdp"), *loggers])


def warn_if_debug_log(stacklevel: int = 3) -> None:
    """A :class:`~cvxdp.error.PrivacyLeakWarning` when cvxdp's loggers would record DEBUG messages (a
    logging configuration: public).  Those messages — certified gaps, solver steps, counts of brackets
    above their share of α, one block per trial of a private selection — depend on the data: a
    diagnostic like ``diagnostics=True``, not covered by the guarantee."""
    if debug_log_enabled():
        warnings.warn("cvxdp's DEBUG log is on: its messages (certified gaps, solver steps, bracket counts, "
                      "and one block per trial of a private selection) depend on the data: a diagnostic, "
                      "not covered by the privacy guarantee; do not publish it (set the 'cvxdp' loggers "
                      "to INFO or above to turn it off).", PrivacyLeakWarning, stacklevel=stacklevel)


def solver_settings(erm: ERMSettings | None, solver: str | None, verbose: bool) -> ERMSettings | None:
    """``erm`` with CVXPY's ``solver=`` / ``verbose=`` applied to its conic settings (validated); a named
    solver also turns ``method="auto"`` into ``"conic"``, the joint program it solves."""
    if not isinstance(verbose, bool | np.bool_):
        raise ParameterError(f"verbose must be True or False, got {verbose!r}.")
    if verbose:
        warnings.warn("verbose=True prints the conic solver's log, whose objective values and iteration "
                      "counts depend on the data: a diagnostic, not covered by the privacy guarantee; do "
                      "not publish it.", PrivacyLeakWarning, stacklevel=3)
    if solver is None and not verbose:
        return erm
    if erm is not None and not isinstance(erm, ERMSettings):
        return erm  # refused with its own message by _inputs
    base = erm or ERMSettings()
    conic = base.conic
    if solver is not None:
        if not isinstance(solver, str) or solver.lower() not in SOLVERS:
            raise ParameterError(
                f"solver {solver!r} is not supported: cvxdp certifies every release from the conic duals "
                f"of its own direct Clarabel or ECOS calls; pass solver=cp.CLARABEL (default) or cp.ECOS.")
        conic = replace(conic, solver=solver.lower())
        if base.method == "auto":  # a named solver asks for the joint program that solver runs
            base = replace(base, method="conic")
    return replace(base, conic=replace(conic, verbose=bool(verbose) or conic.verbose))


def _charge_accountant(accountant: BudgetAccountant, inputs: PublicInputs, random_state: object) -> None:
    """Sequential composition across calls: the whole ε, before any data is read or noise drawn."""
    if not isinstance(accountant, BudgetAccountant):
        raise ParameterError(f"accountant must be a cvxdp.BudgetAccountant or None, got "
                             f"{type(accountant).__name__}.")
    noise_source(random_state, warn=False)  # a bad random_state is refused before the charge
    accountant.spend(inputs.epsilon, label=f"PrivateProblem.solve(algorithm={inputs.algorithm!r})")
