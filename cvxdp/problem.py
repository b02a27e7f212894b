"""The public API: a private learning problem stated in CVXPY, solved with pure ε-DP.

    problem = cvxdp.PrivateProblem(cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w) <= 2]))
    result = problem.solve({"x": X, "y": y}, epsilon=1.0, moment_k=4, G_k=6.0)
    result.w          # the private model
    result.ledger     # every release, and the total ε spent

Algorithms (``algorithm=``):

``"population"`` (default)
    Algorithm 1 over Algorithm 3 over Algorithm 2 — the paper's method, with the
    optimal heavy-tailed rate.
``"recursive"``
    Algorithm 3 on all the data (one regularized ERM, localized).
``"output-perturbation"``
    One round of Algorithm 2 on ``U = W`` — the plain-extension ablation.

Every argument is validated before any data is touched or noise drawn; the
ledger is checked against ``ε`` before each release and again at the end.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from cvxdp._validation import MOMENT_MAX, at_least, positive_finite, privacy_epsilon, probability
from cvxdp.accountant import BudgetAccountant
from cvxdp.erm.solver import ERMSettings
from cvxdp.error import ParameterError, UncertifiableLossError
from cvxdp.extension import LipschitzExtension
from cvxdp.ledger import PrivacyLedger, budget_remainder
from cvxdp.localization import (
    LocalizationStep,
    Profile,
    TightProfile,
    get_profile,
    initial_lambda,
    phase_schedule,
    population_localization,
    recursive_localization,
)
from cvxdp.localization.population import PhaseSchedule, choose_schedule, phase_radius, spread_over_phases
from cvxdp.model import Model
from cvxdp.moments import CombinedTail, private_tail_profile
from cvxdp.random import noise_source
from cvxdp.structure import GenericStructure

ALGORITHMS = ("population", "recursive", "output-perturbation")


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
        otherwise.
    diagnostics_enabled:
        Whether ``solve(..., diagnostics=True)`` was asked for (a public choice).
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
        lines = [f"private model ({self.algorithm}, profile {self.profile}): "
                 f"ε spent {self.ledger.spent:.4g} of {self.epsilon:.4g}, "
                 f"{len(self.steps)} releases",
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
        with np.errstate(all="ignore"):
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
              G_2: float | None = None, algorithm: str = "population", profile: str | Profile = "tight",
              delta: float = 0.1, localize: bool = True, random_state: object = None,
              erm: ERMSettings | None = None, tail_share: float | None = None,
              tail_range: tuple[float, float] | None = None,
              lambda_scale: float | None = None, lambda_growth: float | None = None,
              max_phases: int | None = None, lam: float | None = None,
              boosting_groups: int | None = None, progress: bool = False,
              diagnostics: bool = False, accountant: BudgetAccountant | None = None) -> PrivateResult:
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
            see :mod:`cvxdp.moments` for what such an estimate can and cannot promise).
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
            default 0.1 when the loss allows it, 0 for the paper profile).
        tail_range:
            Public range ``(low, high)`` of the per-example Lipschitz constants for
            the histogram's geometric grid.  Default ``(1e-4 G_k, 1e4 G_k)``, or
            ``(1e-6, 1e10)`` with ``G_k="auto"``.  A narrower range (from units and
            domain knowledge, never from the data) means fewer bins, so small data
            sets still see their tail above the noise.
        lambda_scale, lambda_growth, max_phases:
            Algorithm 1's schedule ``λ_t = scale·λ₁·growth^{t−1}``.  Default: the
            paper profile uses scale 1, growth 8 and every phase; the tight profile
            picks all three by minimizing the public excess-risk proxy of
            :func:`~cvxdp.localization.population.schedule_proxy`.
        lam:
            A fixed ``λ`` for the single-ERM algorithms.
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
            A :class:`~cvxdp.accountant.BudgetAccountant` shared by several calls on the same data.
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
        """
        t0 = time.perf_counter()
        if not isinstance(diagnostics, bool):
            raise ParameterError(f"diagnostics must be True or False, got {type(diagnostics).__name__}.")
        eps = privacy_epsilon(epsilon)
        k = at_least("moment_k", moment_k, 2.0)
        if k > MOMENT_MAX:
            raise ParameterError(f"moment_k = {k:g} exceeds {MOMENT_MAX:g}; such a moment bound is a "
                                 "worst-case Lipschitz bound: pass k = 1000 with G_k = that bound.")
        auto = isinstance(G_k, str)
        if auto and G_k != "auto":
            raise ParameterError(f"G_k must be a positive number or 'auto', got {G_k!r}.")
        if not auto:
            G_k = positive_finite("G_k", G_k)
        if G_2 is not None:
            G_2 = positive_finite("G_2", G_2)
            if not auto and G_2 > G_k * (1 + 1e-12):
                raise ParameterError(f"G_2 = {G_2} exceeds G_k = {G_k}, impossible for k ≥ 2 "
                                     "(moments are monotone); check the moment bounds.")
        delta = probability("delta", delta)
        for name, value in (("lambda_scale", lambda_scale), ("lambda_growth", lambda_growth)):
            if value is not None:
                positive_finite(name, value)
        if lam is not None:
            lam = positive_finite("lam", lam)
        if max_phases is not None and (isinstance(max_phases, bool) or not isinstance(max_phases, int)
                                       or max_phases < 1):
            raise ParameterError("max_phases must be a positive integer.")
        if algorithm not in ALGORITHMS:
            raise ParameterError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}.")
        prof = get_profile(profile)
        structured = not isinstance(self.model.loss.structure, GenericStructure)
        if tail_share is None:
            tail_share = 0.1 if (prof.name == "tight" and structured) or auto else 0.0
        tail_share = float(tail_share)
        if not 0.0 <= tail_share < 1.0 or math.isnan(tail_share):
            raise ParameterError(f"tail_share must lie in [0, 1), got {tail_share}.")
        if tail_range is not None:
            if tail_share == 0.0:
                raise ParameterError("tail_range sets the grid of the private tail histogram, which "
                                     "tail_share = 0 turns off; drop tail_range or pass tail_share > 0.")
            if not isinstance(tail_range, tuple | list) or len(tail_range) != 2:
                raise ParameterError(f"tail_range must be a pair (low, high), got {tail_range!r}.")
            low = positive_finite("tail_range low", tail_range[0])
            high = positive_finite("tail_range high", tail_range[1])
            if high <= low:
                raise ParameterError(f"tail_range needs low < high, got {tail_range!r}.")
            tail_range = (low, high)
        if auto and tail_share == 0.0:
            raise ParameterError("G_k='auto' needs a positive tail_share of ε to estimate it.")
        if tail_share > 0 and not structured:
            raise UncertifiableLossError("a private tail estimate needs per-example Lipschitz constants, "
                                         "which cvxdp has for structured losses only; pass G_k and "
                                         "tail_share=0.")
        erm = erm or ERMSettings()
        if erm.method == "adaptive-subgradient" and not structured:
            raise UncertifiableLossError(
                "Algorithm 4 (method='adaptive-subgradient') needs an exact subgradient oracle, which "
                "cvxdp has for piecewise-linear and generalized-linear losses only; use method='conic'."
            )
        LipschitzExtension(self.model, 1.0)  # refuses uncertifiable losses before any work
        if boosting_groups is not None and (isinstance(boosting_groups, bool)
                                            or not isinstance(boosting_groups, int)
                                            or boosting_groups < 1):
            raise ParameterError("boosting_groups must be a positive integer.")
        if accountant is not None:
            if not isinstance(accountant, BudgetAccountant):
                raise ParameterError(f"accountant must be a cvxdp.BudgetAccountant or None, got "
                                     f"{type(accountant).__name__}.")
            noise_source(random_state, warn=False)  # a bad random_state is refused before the charge
            # sequential composition across calls: the whole ε, before any data is read or noise drawn
            accountant.spend(eps, label=f"PrivateProblem.solve(algorithm={algorithm!r})")
        examples = self.model.bind(data)
        n, d, D = examples.m, self.model.dim, self.model.diameter
        if n < max(10, 2 * d):
            raise ParameterError(f"n = {n} examples are too few; at least {max(10, 2 * d)} needed.")
        if algorithm == "population":
            # the schedule's feasibility depends on n only: refuse before any noise is drawn
            phase_schedule(n, d, eps, k, 1.0, 1.0, D, boosting_groups or 1)
        source = noise_source(random_state)
        ledger = PrivacyLedger(n, eps)
        schedule: PhaseSchedule | None = None
        timings: dict[str, float] = {"validation": time.perf_counter() - t0}
        t1 = time.perf_counter()
        eps_fit = eps
        if tail_share > 0:
            eps_tail = tail_share * eps
            if tail_range is not None:
                grid = {"low": tail_range[0], "high": tail_range[1]}
            else:
                grid = {"low": 1e-6, "high": 1e10} if auto else {"low": 1e-4 * G_k, "high": 1e4 * G_k}
            tail = private_tail_profile(self.model, examples, epsilon=eps_tail, ledger=ledger,
                                        source=source, **grid)
            eps_fit = budget_remainder(eps, eps_tail)  # rounded down: eps_tail + eps_fit ≤ eps exactly
            if auto:
                G_k = tail.moment(k)
                G_2 = min(G_2, G_k) if G_2 is not None else tail.moment(2.0)
            if isinstance(prof, TightProfile):
                prof = TightProfile(prof.kappa, tail=CombinedTail(tail, k, G_k), clip=prof.clip)
        G_2 = G_k if G_2 is None else min(G_2, G_k)
        timings["tail"] = time.perf_counter() - t1
        if algorithm == "population":
            groups = boosting_groups
            if groups is None:
                provisional = phase_schedule(n, d, eps_fit, k, G_k, G_2, D, 1)
                groups = prof.boosting_groups(provisional.phases, delta)
            beta_guess = delta / (4.0 * groups * 10.0)
            if isinstance(prof, TightProfile) and lambda_scale is None and lambda_growth is None:
                schedule = choose_schedule(n, d, eps_fit, k, G_k, G_2, D, prof, groups=groups,
                                           beta=beta_guess)
                if max_phases is not None and schedule.phases > max_phases:
                    schedule = spread_over_phases(replace(schedule, sizes=schedule.sizes[:max_phases],
                                                          lambdas=schedule.lambdas[:max_phases]), n)
            else:
                schedule = phase_schedule(n, d, eps_fit, k, G_k, G_2, D, groups,
                                          lambda_scale=lambda_scale or 1.0,
                                          growth=lambda_growth or 8.0, max_phases=max_phases)
            beta = delta / (2.0 * schedule.phases * groups * 2.0)
            timings["schedule"] = time.perf_counter() - t1 - timings["tail"]
            bar = _progress(progress, schedule.phases * groups)
            try:
                res = population_localization(self.model, examples, epsilon=eps_fit, k=k, G_k=G_k,
                                              G_2=G_2, schedule=schedule, beta=beta, profile=prof,
                                              ledger=ledger, source=source, erm=erm, localize=localize,
                                              progress=bar)
            finally:
                if bar is not None:
                    bar.close()
            w, steps = res.w, res.steps
        else:
            use_loc = localize and algorithm == "recursive"
            if lam is not None:
                lam_used = lam
            elif lambda_scale is not None or not isinstance(prof, TightProfile):
                lam_used = initial_lambda(n, d, eps_fit, k, G_k, G_2, D, lambda_scale or 1.0)
            else:
                lam_used = choose_single_lambda(n, d, eps_fit, k, G_k, G_2, D, prof, beta=delta / 2.0,
                                                localize=use_loc)
            w0 = self.model.domain.make_feasible(self.model.domain.interior_point())
            res = recursive_localization(
                self.model, examples, epsilon=eps_fit, lam=lam_used, w0=w0, k=k, G_k=G_k,
                beta=delta / 2.0, profile=prof, ledger=ledger, batch="all", batch_indices=np.arange(n),
                source=source, erm=erm, localize=use_loc)
            w, steps = res.center, res.steps
        timings["fit"] = time.perf_counter() - t1
        ledger.verify()
        if not diagnostics:  # keep only public constants and released centers on the result
            steps = [replace(s, certificate=None) for s in steps]
        return PrivateResult(w=np.asarray(w, float), ledger=ledger, steps=steps, epsilon=eps,
                             algorithm=algorithm, profile=prof.name, schedule=schedule,
                             moment_bound=float(G_k), diagnostics_enabled=diagnostics,
                             _timings=timings if diagnostics else None)


def choose_single_lambda(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float,
                         profile, *, beta: float, localize: bool = True) -> float:
    """``λ`` for a single regularized ERM minimizing ``λ(D/2)²/2 + 2G₂²/(λn) + G₂ R(λ)`` (public)."""
    best_val, best_lam = math.inf, initial_lambda(n, d, epsilon, k, G_k, G_2, D)
    for scale in np.logspace(-1, 2, 13):
        lam = float(scale) * initial_lambda(n, d, epsilon, k, G_k, G_2, D)
        if localize:
            R = phase_radius(profile, m=n, d=d, epsilon=epsilon, lam=lam, k=k, G_k=G_k, D=D, beta=beta)
        else:
            R = min(profile.plan(R=D, lam=lam, m=n, d=d, eps=float(profile.round_epsilons(
                epsilon, np.ones(1))[0]), beta=beta, k=k, G_k=G_k).radius_plus, D)
        val = lam * (D / 2.0) ** 2 / 2.0 + 2.0 * G_2 * G_2 / (lam * n) + G_2 * R
        if val < best_val:
            best_val, best_lam = val, lam
    return best_lam


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency, but stay usable without it
        return None
    return tqdm(total=total, desc="private fit (phases × groups)", unit="call", leave=False)


def excess_rate(n: int, d: int, epsilon: float, k: float, G_k: float, G_2: float, D: float) -> float:
    """``G_k D (d/(nε))^{1−1/k} + G_2 D/√n``: the optimal heavy-tailed rate (Theorem 3.1, no logs)."""
    return G_k * D * (d / (n * epsilon)) ** (1.0 - 1.0 / k) + G_2 * D / math.sqrt(n)
