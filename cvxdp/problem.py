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

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cvxdp._validation import MOMENT_MAX, at_least, positive_finite, privacy_epsilon, probability
from cvxdp.erm.solver import ERMSettings
from cvxdp.error import ParameterError, UncertifiableLossError
from cvxdp.extension import LipschitzExtension
from cvxdp.ledger import PrivacyLedger
from cvxdp.localization import (
    LocalizationStep,
    get_profile,
    initial_lambda,
    phase_schedule,
    population_localization,
    recursive_localization,
)
from cvxdp.localization.population import PhaseSchedule
from cvxdp.model import Model
from cvxdp.random import noise_source
from cvxdp.structure import GenericStructure

ALGORITHMS = ("population", "recursive", "output-perturbation")


@dataclass
class PrivateResult:
    """The outcome of a private solve.

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
        sensitivity, noise scale, radii) and the ERM certificate.
    diagnostics:
        Data-dependent figures (certified gaps, timings).  They are *not*
        covered by the privacy guarantee: do not publish them.
    """

    w: np.ndarray
    ledger: PrivacyLedger
    steps: list[LocalizationStep]
    epsilon: float
    algorithm: str
    profile: str
    schedule: PhaseSchedule | None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def epsilon_spent(self) -> float:
        return self.ledger.spent

    @property
    def certificates(self) -> list[dict]:
        """Per ERM call: required ``α``, certified gap, sensitivity, noise scale (diagnostics)."""
        return [{
            "phase": s.phase, "group": s.group, "round": s.round, "m": s.m, "C": s.plan.C,
            "lambda": s.lam, "epsilon": s.epsilon, "alpha": s.plan.alpha,
            "certified_gap": s.certificate.gap, "sensitivity": s.plan.sensitivity,
            "noise_scale": s.plan.noise_scale, "radius": s.radius, "radius_plus": s.plan.radius_plus,
            "method": s.certificate.method,
        } for s in self.steps]

    @property
    def diagnostics(self) -> dict:
        return {"certificates": self.certificates, "timings": dict(self.timings)}

    def summary(self) -> str:
        lines = [f"private model ({self.algorithm}, profile {self.profile}): "
                 f"ε spent {self.ledger.spent:.4g} of {self.epsilon:.4g}, "
                 f"{len(self.steps)} releases",
                 "w = " + np.array2string(self.w, precision=4, max_line_width=100)]
        return "\n".join(lines)


class PrivateProblem:
    """A :class:`~cvxdp.model.Model` to be solved under pure ε-differential privacy."""

    def __init__(self, model: Model) -> None:
        if not isinstance(model, Model):
            raise ParameterError(f"PrivateProblem needs a cvxdp.Model, got {type(model).__name__}.")
        self.model = model

    def solve(self, data: Mapping, *, epsilon: float, moment_k: float, G_k: float,
              G_2: float | None = None, algorithm: str = "population", profile: str = "tight",
              delta: float = 0.1, localize: bool = True, random_state: object = None,
              erm: ERMSettings | None = None, lambda_scale: float = 1.0,
              lam: float | None = None, boosting_groups: int | None = None,
              progress: bool = False) -> PrivateResult:
        """Fit an ε-DP model.

        Parameters
        ----------
        data:
            ``placeholder name -> array`` with one row per example.
        epsilon:
            Total privacy budget (finite, > 0).
        moment_k, G_k:
            The public moment bound ``E sup_{w∈W} ||∂f(w, z)||^k ≤ G_k^k`` (``k ≥ 2``).
        G_2:
            Second-moment bound (defaults to ``G_k``, valid since ``G_2 ≤ G_k``).
        algorithm:
            One of :data:`ALGORITHMS`.
        profile:
            ``"tight"`` (default) or ``"paper"``: same ε-DP guarantee, different constants.
        delta:
            Failure probability of the utility guarantee (not of privacy).
        localize:
            ``False`` runs the plain-extension ablation (one round on ``U = W``).
        random_state:
            ``None`` for secure noise; a seed or Generator for reproducible (not
            production) noise, with a :class:`~cvxdp.error.PrivacyLeakWarning`.
        erm:
            :class:`~cvxdp.erm.solver.ERMSettings` (solver method and accuracy ladder).
        lambda_scale, lam:
            Scale of Algorithm 1's ``λ₁``; or a fixed ``λ`` for the single-ERM algorithms.
        boosting_groups:
            ``J`` of Algorithm 1's majority vote (default: the profile's).
        progress:
            Show a progress bar over Algorithm 1's phases.
        """
        t0 = time.perf_counter()
        eps = privacy_epsilon(epsilon)
        k = at_least("moment_k", moment_k, 2.0)
        if k > MOMENT_MAX:
            raise ParameterError(f"moment_k = {k:g} exceeds {MOMENT_MAX:g}; such a moment bound is a "
                                 "worst-case Lipschitz bound: pass k = 1000 with G_k = that bound.")
        G_k = positive_finite("G_k", G_k)
        G_2 = G_k if G_2 is None else positive_finite("G_2", G_2)
        if G_2 > G_k * (1 + 1e-12):
            raise ParameterError(f"G_2 = {G_2} exceeds G_k = {G_k}, impossible for k ≥ 2 "
                                 "(moments are monotone); check the moment bounds.")
        delta = probability("delta", delta)
        lambda_scale = positive_finite("lambda_scale", lambda_scale)
        if lam is not None:
            lam = positive_finite("lam", lam)
        if algorithm not in ALGORITHMS:
            raise ParameterError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}.")
        prof = get_profile(profile)
        erm = erm or ERMSettings()
        if erm.method == "adaptive-subgradient" and isinstance(self.model.loss.structure,
                                                                 GenericStructure):
            raise UncertifiableLossError(
                "Algorithm 4 (method='adaptive-subgradient') needs an exact subgradient oracle, which "
                "cvxdp has for piecewise-linear and generalized-linear losses only; use method='conic'."
            )
        LipschitzExtension(self.model, 1.0)  # refuses uncertifiable losses before any work
        if boosting_groups is not None and (isinstance(boosting_groups, bool)
                                            or not isinstance(boosting_groups, int)
                                            or boosting_groups < 1):
            raise ParameterError("boosting_groups must be a positive integer.")
        examples = self.model.bind(data)
        n, d, D = examples.m, self.model.dim, self.model.diameter
        source = noise_source(random_state)
        ledger = PrivacyLedger(n, eps)
        schedule: PhaseSchedule | None = None
        timings: dict[str, float] = {"validation": time.perf_counter() - t0}
        t1 = time.perf_counter()
        if algorithm == "population":
            groups = boosting_groups
            if groups is None:
                provisional = phase_schedule(n, d, eps, k, G_k, G_2, D, 1, lambda_scale=lambda_scale)
                groups = prof.boosting_groups(provisional.phases, delta)
            schedule = phase_schedule(n, d, eps, k, G_k, G_2, D, groups, lambda_scale=lambda_scale)
            beta = delta / (2.0 * schedule.phases * groups * 2.0)
            bar = _progress(progress, schedule.phases * groups)
            try:
                res = population_localization(self.model, examples, epsilon=eps, k=k, G_k=G_k, G_2=G_2,
                                              schedule=schedule, beta=beta, profile=prof, ledger=ledger,
                                              source=source, erm=erm, localize=localize, progress=bar)
            finally:
                if bar is not None:
                    bar.close()
            w, steps = res.w, res.steps
        else:
            if n < max(10, 2 * d):
                raise ParameterError(f"n = {n} examples are too few; at least {max(10, 2 * d)} needed.")
            lam_used = lam if lam is not None else initial_lambda(n, d, eps, k, G_k, G_2, D, lambda_scale)
            w0 = self.model.domain.make_feasible(self.model.domain.interior_point())
            res = recursive_localization(
                self.model, examples, epsilon=eps, lam=lam_used, w0=w0, k=k, G_k=G_k, beta=delta / 2.0,
                profile=prof, ledger=ledger, batch="all", batch_indices=np.arange(n), source=source,
                erm=erm, localize=localize and algorithm == "recursive")
            w, steps = res.center, res.steps
        timings["fit"] = time.perf_counter() - t1
        ledger.verify()
        return PrivateResult(w=np.asarray(w, float), ledger=ledger, steps=steps, epsilon=eps,
                             algorithm=algorithm, profile=prof.name, schedule=schedule, timings=timings)


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
