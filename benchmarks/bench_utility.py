"""Utility: excess population risk of cvxdp and the pure-ε-DP baselines on heavy-tailed data.

Studies (d = 10, k = 4, ε = 1 unless varied; several seeds, medians with the
25–75% spread):

* ``n``       — n from 10^3 to 10^5 on the *high-leverage-tail* LAD instance
  (one-shot clipping is biased there) and on the Student-t LAD control (ν = 5,
  where clipping is unbiased); every method, baselines by their public rule
  and best in hindsight.  The slope of cvxdp's median excess risk in n is fitted
  in the privacy-dominated regime (where the rate's private term
  ``G_k D (d/(nε))^{1−1/k}`` exceeds ``G₂ D/√n``) and over all sizes, and
  reported beside ``−(1 − 1/k)``.
* ``ceiling`` — cvxdp's own tuning in hindsight on both instances of the ``n`` study:
  one batch of Algorithm 3 with a public ``TightProfile(clip=C)`` and a fixed λ,
  the best of a grid of C (multiples of G₂) and λ (multiples of the rate's λ₁)
  by the population risk.  Not private: how far a better choice of C and λ could
  take cvxdp, and what slope in n that ceiling itself has (reported beside the
  default's).  Its cells are filed under the ``n`` study's tables.
* ``epsilon`` — ε from 0.1 to 10 on the high-leverage instance at n = 3·10^4.
* ``k``       — Student-t LAD with ν = k + 1 for k = 2.5, 4, 8: slope in n per k.
* ``lower-bound`` — the paper's lower-bound instance (:func:`cvxdp.datasets.linear_lower_bound`,
  ``f(w, z) = −<w, z>`` on the unit ball, ``z = a v`` with probability ``p``, else 0) for k = 2.5, 4, 8,
  as the family the private term of Theorem 4.1 is witnessed by: ``p = c d/(nε)`` (about ``c d/ε``
  rare examples, ``c = 16``; at ``c = 1`` every method sits at the trivial excess ``p a``) and
  ``a = p^{−1/k}``, so ``G_k = 1`` at every n and the centre's excess ``p a = (c d/(nε))^{1−1/k}``
  falls exactly at the rate.  cvxdp (whose ``"auto"`` runs the affine plan on this affine loss,
  :mod:`cvxdp.plan.mean_gradient`), Algorithm 1 alone, clipped output perturbation by its public rule,
  the centre ``w = 0``, the tight profile's public excess-risk bound for Algorithm 1's plan
  (:func:`~cvxdp.plan.schedule.schedule_proxy` at the final phase, the telescoped Theorem 3.1 bound
  with the tight constants) and the affine plan's public bound on its expected excess
  (:func:`affine_bound`).
* ``lower-bound-ceiling`` — the ceiling above on the lower-bound family (the same cells, filed under its
  tables).  The family at ``c = 16`` is learnable far below the centre's excess: about ``16 d/ε`` rare
  examples all point one way, so a private mean finds ``v``, and the ceiling shows that one batch gets
  at least this far (the grid's λ floor binds in most cells, so a smaller λ may get further) — a λ
  shrinks an affine fit, which is why the default runs the affine plan, with no λ, on this loss.
* ``lower-bound-crossed`` — the lower-bound family at ``k = 4`` plus, with probability 0.3, a light
  gradient across ``v`` carrying 3× the rare atom's mass (:data:`LOWER_BOUND_CROSS`): there clipping at
  ``G₂`` turns the mean, so a clip level tuned to the collinear family pays in bias (cvxdp, the noisy
  clipped mean, ``w = 0``).
* ``bias``    — the clipping bias: excess risk of the population minimizer of the
  C-clipped problem against C (exact quadrature, no sampling).
* ``real``    — test loss at ε ∈ {0.5, 1, 4} on the real data sets, cvxdp as its estimator with
  ``G_k="auto"`` and its defaults (private feature centring from 10% of ε), the same fit on the
  features as given (``PrivateProblem`` on the loader's design), and the baselines with a private
  ``Ĝ₂`` bought with 10% of ε.

Methods: ``cvxdp`` (defaults: ``algorithm="auto"``, tight profile), ``cvxdp,
algorithm='population'`` (Algorithm 1 whatever ``"auto"`` would choose: the plan the rate is proved
for), ``cvxdp (paper)`` (the published constants), ``cvxdp ablation`` (one round of extension
output perturbation on U = W) — each given the public ``G_k`` and ``G₂`` the
baselines' rules read —, clipped output perturbation and noisy clipped GD
(public rule; and *in hindsight*: the best of a grid by the population risk —
not private, a ceiling for the tuned baseline), and the non-private ERM.  On the lower-bound
family (an affine loss) also ``noisy clipped mean, linear minimizer``: noisy clipped GD with one step
long enough to leave the ball, ``C = G₂`` — the ℓ2-Laplace mean of the clipped gradients (which for an
affine loss do not depend on ``w``), clamped and snapped as every release is, followed by the ball's
linear minimizer: a standard private linear optimization.

Population risks are exact (quadrature; :meth:`cvxdp.datasets.Task.excess_risk`).
The noise is seeded so the figures reproduce — seeded noise is NOT private, which
is fine for a benchmark and never for a release.  On real data the noise seed is spawned apart from the
split's (:func:`real_noise_seed`), so the held-out rows and the noise are independent draws.

``python benchmarks/bench_utility.py`` runs everything (about two and a half hours on two
cores; ``--studies lower-bound`` alone about 7) and writes
``benchmarks/results/utility.{json,csv}``, the figures ``benchmarks/results/*.png`` and the results
section of ``README.md``.
``--methods cvxdp`` reruns only the named methods (short names in :data:`METHOD_KEYS`) and keeps every
other figure from the existing ``utility.json`` — for a change to cvxdp's defaults, whose baselines
are the same code and seeds; the results' header says which methods were rerun and when.
``--quick`` checks only the headline ordering at n = 10^5 (cvxdp < clipped output
perturbation by its public rule on the high-leverage instance, every seed).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import re
import time
import warnings
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
D_FEATURES = 10
K = 4.0

CVXDP = "cvxdp"
CVXDP_PAPER = "cvxdp (paper constants)"
CVXDP_ABLATION = "cvxdp ablation: extension OP"
CVXDP_CEILING = "cvxdp, C and λ in hindsight (one batch)"
CVXDP_POPULATION = "cvxdp, algorithm='population'"
OP_RULE = "clipped OP (public rule)"
OP_HINDSIGHT = "clipped OP (hindsight)"
GD_RULE = "noisy clipped GD (public rule)"
GD_HINDSIGHT = "noisy clipped GD (hindsight)"
OBJ_PERT = "objective perturbation (public rule)"
NONPRIVATE = "non-private ERM"
#: The real-data studies' cvxdp without the estimators' private feature centring: ``PrivateProblem`` on
#: the loader's design ``(x, 1)`` (what the "cvxdp" column was before the estimators centred).
CVXDP_AS_GIVEN = "cvxdp, features as given"
#: For an affine loss only: one noisy clipped gradient step from the ball's centre, long enough to leave
#: the ball (:func:`linear_minimizer_step`), so that the projection is the linear minimizer
#: ``−R m̃/||m̃||`` of the released clipped mean gradient ``m̃`` (``C = G₂``).
NOISY_MEAN = "noisy clipped mean, linear minimizer (public rule)"
ALL_METHODS = (CVXDP, CVXDP_POPULATION, CVXDP_CEILING, CVXDP_PAPER, CVXDP_ABLATION, OP_RULE, OP_HINDSIGHT,
               GD_RULE, GD_HINDSIGHT, OBJ_PERT, NONPRIVATE)
HUBER_M = 1.0
MC_SAMPLES = 2_000_000
STUDIES = ("n", "ceiling", "epsilon", "k", "smooth", "real", "lower-bound", "lower-bound-ceiling",
           "lower-bound-crossed")
#: The lower-bound family's ``c`` in ``p = c d/(nε)``: the expected number of rare examples over ``d/ε``.
LOWER_BOUND_C = 16.0
#: The crossed variant's frequent light gradients across ``v``: their rate ``q`` and their mass over the
#: rare atom's (:func:`cvxdp.datasets.linear_lower_bound`'s ``cross_rate``, ``cross_share``).
LOWER_BOUND_CROSS = (0.3, 3.0)
TRIVIAL = "w = 0 (no fit)"
NOISE_STREAM = 0x6E6F697365  # "noise": the real protocol's noise stream, spawned apart from the split's
GD_C_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
GD_STEP_FACTORS = (0.25, 1.0)
CEILING_C_FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)  # C = factor · G₂
CEILING_LAMBDA_FACTORS = (1.0, 2.0, 4.0, 8.0, 16.0)  # λ = factor · λ₁ of the rate


def make_task(kind: str, n: int, seed: int, k: float = K, n_test: int = 10):
    from cvxdp.datasets import high_leverage_tail, student_t_lad

    if kind in ("high-leverage", "high-leverage-huber"):
        return high_leverage_tail(n=n, d=D_FEATURES, n_test=n_test, seed=seed)
    if kind == "student-t":
        return student_t_lad(n=n, d=D_FEATURES, nu=k + 1.0, n_test=10, seed=seed)
    if kind == "lower-bound":  # ε = 1: p = c d/n, a = p^{-1/k} (G_k = 1)
        from cvxdp.datasets import linear_lower_bound

        p = min(0.5, LOWER_BOUND_C * D_FEATURES / n)
        return linear_lower_bound(n=n, d=D_FEATURES, p=p, magnitude=p ** (-1.0 / k), n_test=n_test,
                                  seed=seed)
    if kind == "lower-bound-crossed":  # the same rare atom, plus frequent light gradients across it
        from cvxdp.datasets import linear_lower_bound

        p = min(0.5, LOWER_BOUND_C * D_FEATURES / n)
        rate, share = LOWER_BOUND_CROSS
        return linear_lower_bound(n=n, d=D_FEATURES, p=p, magnitude=p ** (-1.0 / k), n_test=n_test,
                                  seed=seed, cross_rate=rate, cross_share=share)
    raise ValueError(kind)


def make_model(instance: str, task):
    """The LAD model on an ℓ2 ball, or the Huber model for the smooth study; and its G_k factor."""
    import cvxpy as cp

    import cvxdp

    w = cp.Variable(task.d)
    if instance.startswith("lower-bound"):
        return cvxdp.Model(cvxdp.losses.affine(w), [cp.norm(w, 2) <= task.radius]), 1.0
    if instance.endswith("-huber"):
        # CVXPY's huber(r, M) has slope 2M outside [−M, M]: A(z) = 2M ||x||
        return cvxdp.Model(cvxdp.losses.huber(w, HUBER_M), [cp.norm(w, 2) <= task.radius]), 2.0 * HUBER_M
    return cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= task.radius]), 1.0


def monte_carlo_huber_risk(task) -> tuple:
    """``(F, F*)`` for the Huber loss, which has no quadrature: the risk on the task's held-out sample.

    The smooth study draws 2·10^6 held-out examples from the same law as the training set (the
    same ``w₁, w₂``); every ``w`` is scored on that one sample (common random numbers), so excess
    risks are accurate far below the sampling error of either term.  ``F*`` is minimized with
    L-BFGS from the LAD minimizer.
    """
    from scipy.optimize import minimize

    X, y, M = task.X_test, task.y_test, HUBER_M

    def risk_grad(w):
        r = y - X @ w
        inside = np.abs(r) <= M
        val = np.where(inside, r * r, 2.0 * M * np.abs(r) - M * M).mean()
        dr = np.where(inside, 2.0 * r, 2.0 * M * np.sign(r))
        return val, -(X.T @ dr) / r.size

    res = minimize(risk_grad, task.w_star, jac=True, method="L-BFGS-B", options={"gtol": 1e-12})
    if np.linalg.norm(res.x) > task.radius:  # pragma: no cover - the minimizer lies well inside W
        raise RuntimeError("the Huber population minimizer left the domain; the excess risk needs a "
                           "constrained minimization")
    return (lambda w: risk_grad(np.asarray(w, float))[0]), float(res.fun)


def linear_minimizer_step(n: int, epsilon: float, D: float, C: float) -> float:
    """A step size that carries the centre of a ball of diameter ``D`` at least ``1000 D`` past its edge
    along any nonzero released mean: the release snaps to a grid of spacing at least ``2C/(nε)``, so a
    nonzero ``m̃`` has ``||m̃|| ≥ 2C/(nε)`` (public)."""
    return 1e3 * D * n * epsilon / C


def best_in_hindsight(grid: list[dict], fit, excess) -> tuple[np.ndarray, dict]:
    """The fit of ``grid`` with the smallest population excess risk, and its parameters.

    Not private: the choice reads the population risk.  A ceiling for a tuned method.
    """
    trials = [(p, fit(p)) for p in grid]
    i = int(np.argmin([excess(w) for _, w in trials]))
    return trials[i][1], trials[i][0]


def run_cell(spec: dict) -> dict:
    """All requested methods on one (instance, n, ε, seed): excess population risks and seconds."""
    import cvxdp
    from cvxdp.baselines import (
        clipped_output_perturbation,
        noisy_clipped_gd,
        nonprivate_erm,
        objective_perturbation,
    )
    from cvxdp.baselines.tuning import (
        hindsight_grid,
        noisy_gd_rule,
        objective_perturbation_rule,
        output_perturbation_rule,
    )

    warnings.simplefilter("ignore")
    k = spec.get("k", K)
    instance = spec["instance"]
    huber = instance.endswith("-huber")
    task = make_task(instance, spec["n"], 1000 + spec["seed"], k, n_test=MC_SAMPLES if huber else 10)
    model, factor = make_model(instance, task)
    data = {"x": task.X_train, "y": task.y_train}
    n, d, eps, seed = spec["n"], task.d, spec["epsilon"], spec["seed"]
    D, G_k, G_2 = model.diameter, factor * task.G(k), factor * task.G(2.0)
    if huber:
        risk, risk_min = monte_carlo_huber_risk(task)

        def excess(w):
            return risk(w) - risk_min
    else:
        excess = task.excess_risk
    out: dict = {"excess": {}, "seconds": {}, "params": {}}

    def record(name, fn):
        t0 = time.perf_counter()
        w, params = fn()
        out["seconds"][name] = time.perf_counter() - t0
        out["excess"][name] = excess(w)
        out["params"][name] = params

    def private(**kw):
        def fn():
            r = cvxdp.PrivateProblem(model).solve(data, epsilon=eps, moment_k=k, G_k=G_k, G_2=G_2,
                                                  random_state=seed, **kw)
            plan = r.release_plan
            if plan.gradient is not None:  # the affine plan: one release of the clipped mean gradient
                return r.w, {"C_first": plan.gradient.C, "releases": plan.releases}
            return r.w, {"C_first": r.steps[0].plan.C, "releases": len(r.steps)}
        return fn

    methods = spec["methods"]
    if CVXDP in methods:
        record(CVXDP, private())
    if TRIVIAL in methods:
        record(TRIVIAL, lambda: (np.zeros(d), {}))
    if spec.get("part", spec["study"]) == "lower-bound":  # once per cell of the study, not per part
        out["bound"] = tight_bound(model, n, eps, k, G_k)
        out["affine_bound"] = affine_bound(model, n, eps, k, G_k, G_2)
    if CVXDP_POPULATION in methods:
        record(CVXDP_POPULATION, private(algorithm="population"))
    if CVXDP_PAPER in methods:
        record(CVXDP_PAPER, private(profile="paper"))
    if CVXDP_ABLATION in methods:
        record(CVXDP_ABLATION, private(algorithm="output-perturbation"))
    if CVXDP_CEILING in methods:
        def ceiling():
            from cvxdp.plan.profiles import TightProfile
            from cvxdp.plan.schedule import initial_lambda

            lam_rate = initial_lambda(n, d, eps, k, G_k, G_2, D)
            grid = [{"C": a * G_2, "lam": b * lam_rate}
                    for a in CEILING_C_FACTORS for b in CEILING_LAMBDA_FACTORS]
            return best_in_hindsight(grid, lambda p: cvxdp.PrivateProblem(model).solve(
                data, epsilon=eps, moment_k=k, G_k=G_k, G_2=G_2, random_state=seed, algorithm="recursive",
                lam=p["lam"], profile=TightProfile(clip=p["C"]), tail_share=0.0).w, excess)
        record(CVXDP_CEILING, ceiling)
    op_rule = output_perturbation_rule(n, d, eps, D, G_2)
    if OP_RULE in methods:
        record(OP_RULE, lambda: (clipped_output_perturbation(model, data, epsilon=eps, random_state=seed,
                                                             **op_rule).w, op_rule))
    if OP_HINDSIGHT in methods:
        def op_fit(p):
            return clipped_output_perturbation(model, data, epsilon=eps, random_state=seed, **p).w
        record(OP_HINDSIGHT, lambda: best_in_hindsight(hindsight_grid(op_rule), op_fit, excess))
    gd_rule = noisy_gd_rule(n, d, eps, D, G_2)
    if GD_RULE in methods:
        record(GD_RULE, lambda: (noisy_clipped_gd(model, data, epsilon=eps, random_state=seed, **gd_rule).w,
                                 gd_rule))
    if GD_HINDSIGHT in methods:
        def gd_best():
            grid = [{"C": gd_rule["C"] * a, "steps": max(1, round(gd_rule["steps"] * b))}
                    for a in GD_C_FACTORS for b in GD_STEP_FACTORS]
            return best_in_hindsight(
                grid, lambda p: noisy_clipped_gd(model, data, epsilon=eps, random_state=seed, **p).w, excess)
        record(GD_HINDSIGHT, gd_best)
    if OBJ_PERT in methods:
        obj_rule = objective_perturbation_rule(n, d, eps, D, task.G(2.0))  # clips ||x|| at B = G₂(x)
        record(OBJ_PERT, lambda: (objective_perturbation(model, data, epsilon=eps, random_state=seed,
                                                         **obj_rule).w, obj_rule))
    if NOISY_MEAN in methods:
        # noisy clipped GD with one step: the step only has to carry the point past the ball, whose
        # projection is then the linear minimizer (post-processing of the one noisy mean)
        step = linear_minimizer_step(n, eps, D, G_2)
        record(NOISY_MEAN, lambda: (noisy_clipped_gd(model, data, epsilon=eps, C=G_2, steps=1, step_size=step,
                                                     random_state=seed).w, {"C": G_2, "step_size": step}))
    if NONPRIVATE in methods:
        record(NONPRIVATE, lambda: (nonprivate_erm(model, model.bind(data)), {}))
    return {**{key: spec[key] for key in ("study", "instance", "n", "epsilon", "seed")}, "k": k,
            "part": spec.get("part", spec["study"]), **out}


def tight_bound(model, n: int, eps: float, k: float, G_k: float) -> float:
    """The tight profile's public excess-risk bound for Algorithm 1's plan (before its tail release: the
    public worst case), at the final phase: :func:`~cvxdp.plan.schedule.schedule_proxy` with the
    schedule, ``ε_fit``, ``G₂`` and ``β`` the planner used — the telescoped Theorem 3.1 bound, which
    the default's fit is compared with whichever plan ``algorithm="auto"`` ran."""
    import cvxdp
    from cvxdp.plan.planner import schedule_beta
    from cvxdp.plan.schedule import schedule_proxy

    plan = cvxdp.PrivateProblem(model).plan(n=n, epsilon=eps, moment_k=k, G_k=G_k, algorithm="population")
    inp = plan.inputs
    return float(schedule_proxy(plan.schedule, inp.profile, d=inp.d, epsilon=plan.epsilon_fit, k=k,
                                G_k=plan.G_k, G_2=plan.G_2, D=inp.D,
                                beta=schedule_beta(inp.delta, plan.schedule.groups))[-1])


def affine_bound(model, n: int, eps: float, k: float, G_k: float, G_2: float) -> float:
    """The affine plan's public bound on its expected excess risk, ``D (G_k^k/C^{k−1} + d s + G₂/√n)``
    (:meth:`~cvxdp.plan.mean_gradient.MeanGradientPlan.bound`): the plan ``algorithm="auto"`` runs on
    the lower-bound family's affine loss."""
    import cvxdp

    plan = cvxdp.PrivateProblem(model).plan(n=n, epsilon=eps, moment_k=k, G_k=G_k, G_2=G_2,
                                            algorithm="mean-gradient")
    return float(plan.gradient.bound(k, plan.G_k, plan.G_2, plan.inputs.D))


def real_noise_seed(split_seed: int) -> int:
    """The privacy-noise seed of the real-data protocol's split ``split_seed``.

    The split is drawn from ``default_rng(split_seed)``; seeding the noise with the same integer would
    replay the split's own bits as noise, coupling which rows were held out with the noise's draws.
    Spawning from ``SeedSequence([split_seed, NOISE_STREAM])`` gives a stream independent of the split's
    (and still reproducible).  Every method of a cell shares it (common random numbers across methods).
    """
    state = np.random.SeedSequence([split_seed, NOISE_STREAM]).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))  # a non-negative int63: random_state's contract


def run_real(spec: dict) -> dict:
    """Test loss of every method on a real data set at one ε and one split seed.

    The noise is seeded by :func:`real_noise_seed` of the split's seed, independent of the split.
    """
    import cvxpy as cp

    import cvxdp
    from cvxdp.baselines import clipped_output_perturbation, noisy_clipped_gd, nonprivate_erm
    from cvxdp.baselines.tuning import noisy_gd_rule, output_perturbation_rule
    from cvxdp.datasets import REAL
    from cvxdp.privacy.ledger import PrivacyLedger
    from cvxdp.privacy.random import noise_source
    from cvxdp.privacy.tail import estimate_moment_bound

    warnings.simplefilter("ignore")
    task = REAL[spec["dataset"]](seed=spec["seed"], **spec.get("loader", {}))
    w = cp.Variable(task.d)
    loss = (cvxdp.losses.pinball(w, task.meta["quantile"]) if task.loss == "pinball"
            else getattr(cvxdp.losses, task.loss)(w))
    model = cvxdp.Model(loss, [cp.norm(w, 2) <= task.radius])
    data = {"x": task.X_train, "y": task.y_train}
    test = model.bind({"x": task.X_test, "y": task.y_test})
    n, d, eps, seed = task.X_train.shape[0], task.d, spec["epsilon"], real_noise_seed(spec["seed"])
    D = model.diameter
    risks: dict = {}
    # cvxdp as a user runs it: the estimator for the task's loss, its defaults (private feature
    # centring), G_k="auto"; the loaders' last column is the intercept, which the estimator appends itself
    assert np.all(task.X_train[:, -1] == 1.0), "the real loaders end with an intercept column"
    est = _estimator(task, epsilon=eps, moment_k=K, G_k="auto", radius=task.radius, random_state=seed,
                     diagnostics=True).fit(task.X_train[:, :-1], task.y_train)
    risks[CVXDP] = model.empirical_risk(np.r_[est.coef_, est.intercept_], test)
    r = est.result_
    given = cvxdp.PrivateProblem(model).solve(data, epsilon=eps, moment_k=K, G_k="auto", random_state=seed)
    risks[CVXDP_AS_GIVEN] = model.empirical_risk(given.w, test)
    # the baselines learn their scale privately too: Ĝ₂ from 10% of ε, the rest for the fit
    source = noise_source(seed, warn=False)
    ledger = PrivacyLedger(n, eps)
    G2_hat, profile = estimate_moment_bound(model, data, k=2.0, epsilon=0.1 * eps, ledger=ledger,
                                            source=source)
    rest = 0.9 * eps
    centre = np.zeros(d)
    if profile.seen:
        op = output_perturbation_rule(n, d, rest, D, G2_hat)
        risks[OP_RULE] = model.empirical_risk(
            clipped_output_perturbation(model, data, epsilon=rest, random_state=seed, **op).w, test)
        gd = noisy_gd_rule(n, d, rest, D, G2_hat)
        risks[GD_RULE] = model.empirical_risk(
            noisy_clipped_gd(model, data, epsilon=rest, random_state=seed, **gd).w, test)
    else:  # the same public rule as cvxdp's: a histogram that saw nothing gives no scale; keep the centre
        risks[OP_RULE] = risks[GD_RULE] = model.empirical_risk(centre, test)
    risks[NONPRIVATE] = model.empirical_risk(nonprivate_erm(model, model.bind(data)), test)
    risks["w = 0"] = model.empirical_risk(np.zeros(d), test)
    return {"study": "real", "dataset": spec["dataset"], "loader": spec.get("loader", {}), "name": task.name,
            "n": n, "d": d, "epsilon": eps,
            "seed": spec["seed"], "noise_seed": seed, "test_loss": risks, "fallback": r.release_plan.fallback,
            "G_k_auto": r.moment_bound if math.isfinite(r.moment_bound) else None,
            "feature_center": [float(v) for v in est.feature_center_],
            "G2_hat": G2_hat if profile.seen else None}


def _estimator(task, **params):
    """The cvxdp estimator for a real task's loss (hinge labels are ±1, the default declared classes)."""
    from cvxdp.estimators import PrivateLADRegressor, PrivateLinearSVM, PrivateQuantileRegressor

    if task.loss == "hinge":
        return PrivateLinearSVM(**params)
    if task.loss == "pinball":
        return PrivateQuantileRegressor(quantile=task.meta["quantile"], **params)
    if task.loss == "absolute":
        return PrivateLADRegressor(**params)
    raise ValueError(f"no cvxdp estimator for the loss {task.loss!r}")


def rate_terms(instance: str, n: float, eps: float, k: float = K) -> tuple[float, float]:
    """The optimal rate's two terms ``G_k D (d/(nε))^{1−1/k}`` and ``G₂ D/√n`` for an instance."""
    # the lower-bound family's law depends on n (its G₂ does); the others' do not
    task = make_task(instance, int(n) if instance == "lower-bound" else 100, 0, k)
    D = 2.0 * task.radius
    return (task.G(k) * D * (D_FEATURES / (n * eps)) ** (1.0 - 1.0 / k), task.G(2.0) * D / math.sqrt(n))


def fitted_slope(ns, values) -> float:
    ns, values = np.asarray(ns, float), np.asarray(values, float)
    ok = values > 0
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(ns[ok]), np.log(values[ok]), 1)[0])


def summarize(cells: list[dict]) -> dict:
    """Medians and quartiles per (study, instance, k, n, ε, method); slopes of cvxdp in n.  The ceiling
    counts only from its own parts (:func:`without_stray_ceilings`)."""
    cells = without_stray_ceilings(cells)
    groups: dict = defaultdict(list)
    for c in cells:
        for m, v in c["excess"].items():
            groups[(c["study"], c["instance"], c["k"], c["n"], c["epsilon"], m)].append(v)
    rows = []
    for (study, inst, k, n, eps, m), vals in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        q = np.percentile(vals, [25, 50, 75])
        rows.append({"study": study, "instance": inst, "k": k, "n": n, "epsilon": eps, "method": m,
                     "median": float(q[1]), "q25": float(q[0]), "q75": float(q[2]), "seeds": len(vals)})
    slopes = []
    studies = sorted({(r["study"], r["instance"], r["k"]) for r in rows
                      if r["study"] in ("n", "k", "lower-bound")})
    for study, inst, k in studies:
        for m in (CVXDP, CVXDP_POPULATION, CVXDP_CEILING, OP_RULE, NOISY_MEAN):
            pts = sorted((r["n"], r["median"]) for r in rows
                         if (r["study"], r["instance"], r["k"], r["method"]) == (study, inst, k, m))
            if len(pts) < 2:
                continue
            eps = next(r["epsilon"] for r in rows if r["study"] == study)
            private = [(n, v) for n, v in pts
                       if rate_terms(inst, n, eps, k)[0] >= rate_terms(inst, n, eps, k)[1]]
            slopes.append({"study": study, "instance": inst, "k": k, "method": m,
                           "slope_all": fitted_slope(*zip(*pts, strict=True)),
                           "slope_private_regime": fitted_slope(*zip(*private, strict=True))
                           if len(private) >= 2 else float("nan"),
                           "private_regime_sizes": [n for n, _ in private],
                           "theory": -(1.0 - 1.0 / k)})
    bounds: dict = defaultdict(list)
    affine: dict = defaultdict(list)
    for c in cells:
        if "bound" in c:
            bounds[(c["k"], c["n"])].append(c["bound"])
        if "affine_bound" in c:
            affine[(c["k"], c["n"])].append(c["affine_bound"])
    lower = [{"k": k, "n": n, "bound": float(np.median(v)),
              **({"affine_bound": float(np.median(affine[(k, n)]))} if affine.get((k, n)) else {})}
             for (k, n), v in sorted(bounds.items())]
    return {"rows": rows, "slopes": slopes, "lower_bound": lower}


def lower_bound_targets(summary: dict) -> list[dict]:
    """Per k on the lower-bound family and per cvxdp row (the default, and Algorithm 1 alone — the plan
    the rate is proved for): the fitted slope in n against −(1 − 1/k) (within 0.15), and the median
    excess risk against the tight profile's bound at every n."""
    out = []
    ks = sorted({b["k"] for b in summary.get("lower_bound", [])})
    for k in ks:
        for method in (CVXDP, CVXDP_POPULATION):
            slope = next((s for s in summary["slopes"] if (s["study"], s["method"], s["k"]) ==
                          ("lower-bound", method, k)), None)
            med = {r["n"]: r["median"] for r in summary["rows"]
                   if (r["study"], r["method"], r["k"]) == ("lower-bound", method, k)}
            if not med:
                continue
            below = [med[b["n"]] <= b["bound"] for b in summary["lower_bound"]
                     if b["k"] == k and b["n"] in med]
            value = None if slope is None else slope["slope_private_regime"]
            out.append({"k": k, "method": method, "slope_private_regime": value, "theory": -(1.0 - 1.0 / k),
                        "slope_within_0.15": value is not None and abs(value + 1.0 - 1.0 / k) <= 0.15,
                        "below_bound_every_n": bool(below) and all(below)})
    return out


def targets(summary: dict) -> dict:
    """The issue's targets on the high-leverage instance at n = 10^5 (d = 10, ε = 1, k = 4)."""
    med = {(r["instance"], r["n"], r["method"]): r["median"] for r in summary["rows"]
           if r["study"] == "n" and r["epsilon"] == 1.0}
    inst, n = "high-leverage", 100_000
    if (inst, n, CVXDP) not in med:
        return {}
    ours = med[(inst, n, CVXDP)]
    public = min(med.get((inst, n, m), math.inf) for m in (OP_RULE, GD_RULE))
    hindsight = min(med.get((inst, n, m), math.inf) for m in (OP_HINDSIGHT, GD_HINDSIGHT))
    slope = next((s for s in summary["slopes"]
                  if (s["study"], s["instance"], s["method"]) == ("n", inst, CVXDP)), None)
    out = {"cvxdp_median": ours, "best_public_baseline_median": public,
           "ratio_to_best_public": ours / public, "target_ratio": 0.5,
           "best_hindsight_baseline_median": hindsight, "beats_hindsight": ours <= hindsight}
    if slope is not None:
        out.update({"slope_private_regime": slope["slope_private_regime"], "slope_all": slope["slope_all"],
                    "slope_theory": slope["theory"],
                    "slope_within_0.15": abs(slope["slope_private_regime"] - slope["theory"]) <= 0.15})
    return out


# ----------------------------------------------------------------------------- plots and tables

def _series(summary, study, instance, method, key="n", k=K):
    pts = sorted((r[key], r["median"], r["q25"], r["q75"]) for r in summary["rows"]
                 if (r["study"], r["instance"], r["method"], r["k"]) == (study, instance, method, k))
    return [np.array(c) for c in zip(*pts, strict=True)] if pts else None


STYLE = {CVXDP: ("C0", "o", "-"), CVXDP_POPULATION: ("C5", "o", "--"), CVXDP_CEILING: ("C4", "o", ":"),
         CVXDP_PAPER: ("C0", "x", ":"),
         CVXDP_ABLATION: ("C9", "s", "--"),
         OP_RULE: ("C3", "^", "-"), OP_HINDSIGHT: ("C3", "^", ":"), GD_RULE: ("C2", "v", "-"),
         GD_HINDSIGHT: ("C2", "v", ":"), OBJ_PERT: ("C1", "P", "-"), NONPRIVATE: ("k", "D", "-")}


def _errorbars(ax, summary: dict, study: str, instance: str, key: str = "n") -> None:
    """Median with its 25–75% bar, per method, against ``key``."""
    for m in ALL_METHODS:
        s = _series(summary, study, instance, m, key=key)
        if s is None:
            continue
        color, marker, ls = STYLE[m]
        ax.errorbar(s[0], s[1], yerr=[s[1] - s[2], s[3] - s[1]], color=color, marker=marker, ls=ls,
                    label=m, capsize=2, ms=4)


def _finish(fig, ax, path: Path, files: list[str], legend: float | None = None,
            rect: tuple = (0, 0, 1, 1)) -> None:
    import matplotlib.pyplot as plt

    if ax is not None:
        ax.grid(alpha=0.3, which="both")
        if legend:
            ax.legend(fontsize=legend)
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files.append(path.name)


def plot(summary: dict, bias: dict, outdir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    titles = {"high-leverage": "high-leverage tail (clipping biased)", "student-t": "Student-t LAD (control)"}
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.4), sharey=True)
    for ax, inst in zip(axes, ("high-leverage", "student-t"), strict=True):
        _errorbars(ax, summary, "n", inst)
        ns = np.logspace(3, 5, 50)
        terms = np.array([rate_terms(inst, n, 1.0) for n in ns])
        ax.plot(ns, terms.sum(axis=1), color="0.5", ls="-.", label="rate G_k D (d/nε)^(1-1/k) + G_2 D/√n")
        s = _series(summary, "n", inst, CVXDP)
        if s is not None:
            ax.plot(ns, s[1][-1] * (ns / s[0][-1]) ** (-(1 - 1 / K)), color="C0", alpha=0.35, lw=4,
                    label="slope −(1−1/k), through cvxdp's last point")
        ax.set(xscale="log", yscale="log", xlabel="n", title=f"{titles[inst]}, d=10, ε=1, k=4")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("excess population risk (median, 25–75%)")
    legend: dict = {}  # label -> handle over both panels (a method drawn on one panel only is listed once)
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=4, fontsize=7.5, frameon=False)
    _finish(fig, None, outdir / "utility_vs_n.png", files, rect=(0, 0.13, 1, 1))

    if any(r["study"] == "epsilon" for r in summary["rows"]):
        fig, ax = plt.subplots(figsize=(6.2, 4.6))
        _errorbars(ax, summary, "epsilon", "high-leverage", key="epsilon")
        n_eps = next(r["n"] for r in summary["rows"] if r["study"] == "epsilon")
        es = np.logspace(-1, 1, 50)
        ax.plot(es, [sum(rate_terms("high-leverage", n_eps, e)) for e in es], color="0.5", ls="-.",
                label="rate")
        ax.set(xscale="log", yscale="log", xlabel="ε", ylabel="excess population risk",
               title=f"high-leverage tail, n={n_eps}, d=10, k=4")
        _finish(fig, ax, outdir / "utility_vs_epsilon.png", files, legend=7)

    ks = sorted({r["k"] for r in summary["rows"] if r["study"] == "k"})
    if ks:
        fig, ax = plt.subplots(figsize=(6.2, 4.6))
        for i, k in enumerate(ks):
            for m, ls in ((CVXDP, "-"), (OP_RULE, ":")):
                s = _series(summary, "k", "student-t", m, k=k)
                if s is None:
                    continue
                slope = fitted_slope(s[0], s[1])
                ax.plot(s[0], s[1], color=f"C{i}", marker="o" if m == CVXDP else "^", ls=ls,
                        label=f"k={k:g} {m} (slope {slope:.2f}; theory {-(1 - 1 / k):.2f})")
        ax.set(xscale="log", yscale="log", xlabel="n", ylabel="excess population risk (median)",
               title="Student-t LAD, ν = k + 1, d=10, ε=1")
        _finish(fig, ax, outdir / "utility_vs_k.png", files, legend=6.5)

    if bias:
        fig, ax = plt.subplots(figsize=(6.2, 4.2))
        ax.plot(bias["C"], bias["excess"], "o-", color="C3")
        ax.set(xscale="log", yscale="log", xlabel="clipping level C",
               ylabel="excess risk of the clipped population minimizer",
               title="clipping bias, high-leverage tail (quadrature)")
        _finish(fig, ax, outdir / "clipping_bias.png", files)
    return files


def clipping_bias_curve() -> dict:
    task = make_task("high-leverage", 100, 0)
    Cs = [1.0, 2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0, 128.0]
    return {"C": Cs, "excess": [max(task.excess_risk(task.meta["clipped_minimizer"](C)), 1e-12) for C in Cs]}


def _cell(r: dict) -> str:
    return f"{r['median']:.2g} [{r['q25']:.2g}, {r['q75']:.2g}]"


def _table(rows: list[dict], key: str) -> list[str]:
    """Markdown rows: one per method, one column per value of ``key`` (n or ε)."""
    cols = sorted({r[key] for r in rows})
    label = (lambda v: f"n = {v:,}") if key == "n" else (lambda v: f"ε = {v:g}")
    out = ["| method | " + " | ".join(label(v) for v in cols) + " |", "|---|" + "---|" * len(cols)]
    for m in ALL_METHODS:
        cells = {r[key]: r for r in rows if r["method"] == m}
        if cells:
            out.append(f"| {m} | " + " | ".join(_cell(cells[v]) if v in cells else "–" for v in cols) + " |")
    return out


def markdown(summary: dict, real: list[dict], tgt: dict, files: list[str], meta: dict,
             lower_tgt: list[dict] | None = None) -> str:
    # each rerun replaced its methods' figures in the studies it ran; every other figure is the full run's
    reruns = "; ".join(" and ".join(f"*{m}*" for m in r["methods"])
                       + f" on {r['date']} ({r['minutes']:.0f} min)" for r in meta.get("reruns", []))
    if reruns:
        reruns = f"; rerun with `--methods` since: {reruns}"
    lines = [f"Measured by `python benchmarks/bench_utility.py` on {meta['machine']} "
             f"({meta['seeds']} seeds per cell, {meta['minutes']:.0f} min{reruns}). Excess population risk, "
             "median [25%, 75%]; *hindsight* rows pick the best of a grid by the population risk "
             "(not private: a ceiling for a tuned baseline).", ""]
    tables = [("n", "high-leverage", "n", "**High-leverage tail** (d = 10, ε = 1, k = 4)"),
              ("n", "student-t", "n", "**Student-t LAD control** (ν = 5, d = 10, ε = 1, k = 4)"),
              ("epsilon", "high-leverage", "epsilon", "**High-leverage tail against ε** (n = 30,000)"),
              ("smooth", "high-leverage-huber", "n",
               "**Smooth loss: Huber (M = 1) on the high-leverage tail** (ε = 1; risk on 2·10⁶ fresh "
               "samples) — the one instance where objective perturbation applies")]
    for study, inst, key, title in tables:
        rows = [r for r in summary["rows"] if r["study"] == study and r["instance"] == inst]
        if rows:
            lines += [title, "", *_table(rows, key), ""]
    if summary["slopes"]:
        lines.append("Fitted slope of the median excess risk in n (log-log least squares), in the "
                     "privacy-dominated regime (sizes where the rate's private term exceeds its "
                     "statistical term) and over all sizes:")
        lines.append("")
        lines.append("| method | instance | k | privacy-dominated sizes | slope there | all sizes "
                     "| −(1−1/k) |")
        lines.append("|---|---|---|---|---|---|---|")
        seen = set()
        for s in summary["slopes"]:
            key = (s["method"], s["instance"], s["k"])
            if key in seen:  # the k = 4 control appears in both the n and the k study: same cells' kind
                continue
            seen.add(key)
            sizes = ", ".join(f"{n:,}" for n in s["private_regime_sizes"]) or "none"
            there = f"{s['slope_private_regime']:.2f}" if s["private_regime_sizes"] else "–"
            lines.append(f"| {s['method']} | {s['instance']} | {s['k']:g} | {sizes} | "
                         f"{there} | {s['slope_all']:.2f} | {s['theory']:.2f} |")
        lines.append("")
    if tgt:
        lines.append(
            f"Targets at n = 10^5 on the high-leverage instance: cvxdp {tgt['cvxdp_median']:.2g} vs the best "
            f"public-rule baseline {tgt['best_public_baseline_median']:.2g} (ratio "
            f"{tgt['ratio_to_best_public']:.2f}, target ≤ 0.5) and the best hindsight baseline "
            f"{tgt['best_hindsight_baseline_median']:.2g} (cvxdp ≤ it: {tgt['beats_hindsight']}); "
            "slope in the "
            f"privacy-dominated regime {tgt.get('slope_private_regime', float('nan')):.2f} vs "
            f"{tgt.get('slope_theory', float('nan')):.2f} (within 0.15: {tgt.get('slope_within_0.15')}).")
        lines.append("")
    if summary.get("lower_bound"):
        lines.append("**The paper's lower-bound instance** (`f(w, z) = −<w, z>` on the unit ball, "
                     f"d = 10, ε = 1; z = a v with probability p = {LOWER_BOUND_C:g} d/(nε), a = p^(−1/k), "
                     "so G_k = 1; the centre's excess p a is the rate's private term) — excess population "
                     "risk; the tight profile's public Theorem 3.1 bound for Algorithm 1's plan, and the "
                     "public bound of the affine plan `algorithm=\"auto\"` runs here "
                     "(`cvxdp.plan.mean_gradient`)")
        lines.append("")
        for k in sorted({b["k"] for b in summary["lower_bound"]}):
            rows = [r for r in summary["rows"] if r["study"] == "lower-bound" and r["k"] == k]
            ns = sorted({r["n"] for r in rows})
            lines.append(f"| k = {k:g} | " + " | ".join(f"n = {n:,}" for n in ns) + " |")
            lines.append("|---|" + "---|" * len(ns))
            for m in (CVXDP, CVXDP_POPULATION, CVXDP_CEILING, OP_RULE, NOISY_MEAN, TRIVIAL):
                cells_m = {r["n"]: r for r in rows if r["method"] == m}
                if cells_m:
                    lines.append(f"| {m} | " + " | ".join(_cell(cells_m[n]) if n in cells_m else "–"
                                                          for n in ns) + " |")
            bound = {b["n"]: b["bound"] for b in summary["lower_bound"] if b["k"] == k}
            lines.append("| tight-profile bound | " + " | ".join(f"{bound[n]:.2g}" if n in bound else "–"
                                                                 for n in ns) + " |")
            affine = {b["n"]: b["affine_bound"] for b in summary["lower_bound"]
                      if b["k"] == k and "affine_bound" in b}
            if affine:
                lines.append("| affine plan's bound (expected excess) | " + " | ".join(
                    f"{affine[n]:.2g}" if n in affine else "–" for n in ns) + " |")
            lines.append("")
        crossed = [r for r in summary["rows"] if r["study"] == "lower-bound-crossed"]
        if crossed:
            rate, share = LOWER_BOUND_CROSS
            lines.append(f"*Crossed* (k = 4): the same rare atom, plus with probability {rate:g} a light "
                         f"gradient across v carrying {share:g}× its mass (clipping at G₂ shrinks the atom "
                         "and turns the mean toward the light ones; `linear_lower_bound(cross_rate=, "
                         "cross_share=)`) — excess population risk")
            lines.append("")
            ns = sorted({r["n"] for r in crossed})
            lines.append("| crossed, k = 4 | " + " | ".join(f"n = {n:,}" for n in ns) + " |")
            lines.append("|---|" + "---|" * len(ns))
            for m in (CVXDP, NOISY_MEAN, TRIVIAL):
                cells_m = {r["n"]: r for r in crossed if r["method"] == m}
                if cells_m:
                    lines.append(f"| {m} | " + " | ".join(_cell(cells_m[n]) if n in cells_m else "–"
                                                          for n in ns) + " |")
            lines.append("")
        for t in lower_tgt or []:
            slope = "–" if t["slope_private_regime"] is None else f"{t['slope_private_regime']:.2f}"
            lines.append(f"- k = {t['k']:g}, {t.get('method', CVXDP)}: slope {slope} vs {t['theory']:.2f} "
                         "(within 0.15: "
                         f"{t['slope_within_0.15']}); at or below the bound at every n: "
                         f"{t['below_bound_every_n']}")
        lines.append("")
    if real:
        by: dict = defaultdict(list)
        for r in real:
            by[(r["name"], r["n"], r["epsilon"])].append(r["test_loss"])
        methods = [CVXDP, CVXDP_AS_GIVEN, OP_RULE, GD_RULE, NONPRIVATE, "w = 0"]
        methods = [m for m in methods if all(m in t for v in by.values() for t in v)]
        lines.append("**Real data** — test loss, median over splits (cvxdp: its estimator with "
                     "`G_k=\"auto\"` and its defaults — private feature centring from 10% of ε, then "
                     "10% of the rest for the tail histogram; features as given: the same fit on the "
                     "loader's design; baselines: a private Ĝ₂ from 10% of ε)")
        lines.append("")
        lines.append("| data (n train) | ε | " + " | ".join(methods) + " |")
        lines.append("|---|---|" + "---|" * len(methods))
        for (name, n, eps), losses in sorted(by.items()):
            lines.append(f"| {name} ({n}) | {eps:g} | " + " | ".join(
                f"{np.median([t[m] for t in losses]):.4g}" for m in methods) + " |")
        lines.append("")
    for f in files:
        lines.append(f"![{f}](benchmarks/results/{f})")
    return "\n".join(lines)


def replace_marked(path: Path, markers: tuple[str, str], text: str) -> bool:
    """Replace the text between a file's two ``markers`` (kept) by ``text``; ``False``, nothing written,
    when either marker is missing.  The benchmarks that write README sections share it."""
    start, end = markers
    readme = path.read_text()
    if start not in readme or end not in readme:
        return False
    path.write_text(re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: f"{start}\n{text}\n{end}",
                           readme, flags=re.S))
    return True


def update_readme(text: str) -> None:
    replace_marked(README, ("<!-- utility-results:start -->", "<!-- utility-results:end -->"), text)


# ----------------------------------------------------------------------------- driver

#: Short names for ``--methods``.
METHOD_KEYS = {"cvxdp": CVXDP, "population": CVXDP_POPULATION,
               "ceiling": CVXDP_CEILING, "paper": CVXDP_PAPER, "ablation": CVXDP_ABLATION,
               "op": OP_RULE, "op-hindsight": OP_HINDSIGHT, "gd": GD_RULE, "gd-hindsight": GD_HINDSIGHT,
               "objective": OBJ_PERT, "nonprivate": NONPRIVATE, "trivial": TRIVIAL, "noisy-mean": NOISY_MEAN}


def _cell_key(c: dict) -> tuple:
    return (c.get("part", c["study"]), c["instance"], c["n"], c["epsilon"], c["seed"], c["k"])


def kept_reruns(reruns: list[dict], studies: tuple[str, ...]) -> list[dict]:
    """The ``--methods`` reruns still in the file after ``studies`` were run whole: each keeps the
    studies it touched that were not rerun, and one with none left is dropped (superseded)."""
    out = []
    for r in reruns:
        left = [x for x in r["studies"] if x not in studies]
        if left:
            out.append({**r, "studies": left})
    return out


def replace_studies(kept: dict, cells: list[dict], real: list[dict], studies: tuple[str, ...],
                    meta: dict) -> tuple[list[dict], list[dict], dict]:
    """The results of a ``--studies`` run merged into ``kept`` (a results/utility.json): the run's
    study parts replace their kept cells, every other part stays, and the header keeps the time of each
    earlier run and each ``--methods`` rerun for the studies this run did not replace."""
    cells = [c for c in kept["cells"] if c.get("part", c["study"]) not in studies] + cells
    if "real" not in studies:
        real = kept.get("real", [])
    meta = {**meta, "minutes_by_studies": dict(meta.get("minutes_by_studies", {}))}
    # the time of every run whose studies are still in the file (a rerun replaces its own)
    earlier = kept["meta"].get("minutes_by_studies", {",".join(STUDIES): kept["meta"]["minutes"]})
    for key, value in earlier.items():
        left = [x for x in key.split(",") if x not in studies]
        if left:
            meta["minutes_by_studies"][",".join(left)] = value
    meta["reruns"] = kept_reruns(kept["meta"].get("reruns", []), studies)
    return cells, real, meta


def merge_methods(kept: list[dict], new: list[dict], methods: set[str]) -> list[dict]:
    """``kept`` with the figures of ``methods`` (and the lower-bound cells' bounds) replaced by ``new``'s.

    Every new cell must match a kept one (same study part, instance, n, ε, seed and k): a rerun of some
    methods never adds cells whose other methods were not measured.
    """
    index = {_cell_key(c): c for c in new}
    merged = []
    for c in kept:
        fresh = index.pop(_cell_key(c), None)
        if fresh is not None:
            c = {**c, **{key: fresh[key] for key in ("bound", "affine_bound") if key in fresh}}
            for field in ("excess", "seconds", "params"):
                c[field] = {**{m: v for m, v in c[field].items() if m not in methods}, **fresh[field]}
        merged.append(c)
    if index:
        raise SystemExit(f"{len(index)} rerun cells have no counterpart in results/utility.json; run "
                         "those studies whole")
    return merged


#: The study parts that measure :data:`CVXDP_CEILING` (their own cells: one grid per cell, run once).
CEILING_PARTS = ("ceiling", "lower-bound-ceiling")


def without_stray_ceilings(cells: list[dict]) -> list[dict]:
    """``cells`` with the ceiling's figures kept only in the parts of :data:`CEILING_PARTS`.

    Results written before the ceiling had its own part carried it in the ``n`` study's cells too; a
    kept copy there would count the same grid twice in a median and outlive a rerun of the ceiling.
    """
    out = []
    for c in cells:
        if c.get("part", c["study"]) not in CEILING_PARTS and CVXDP_CEILING in c["excess"]:
            c = {**c, **{f: {m: v for m, v in c[f].items() if m != CVXDP_CEILING}
                         for f in ("excess", "seconds", "params")}}
        out.append(c)
    return out


def specs_full(seeds: int, studies: tuple[str, ...] = STUDIES) -> list[dict]:
    specs = []
    # objective perturbation needs smoothness; the ceiling is its own part (the same cells, run once)
    lad_methods = tuple(m for m in ALL_METHODS if m not in (OBJ_PERT, CVXDP_CEILING))
    if "n" in studies:
        for inst in ("high-leverage", "student-t"):
            for n in (1_000, 3_000, 10_000, 30_000, 100_000):
                for s in range(seeds):
                    specs.append({"study": "n", "instance": inst, "n": n, "epsilon": 1.0, "seed": s,
                                  "methods": lad_methods})
    if "ceiling" in studies:
        for inst in ("high-leverage", "student-t"):
            for n in (1_000, 3_000, 10_000, 30_000, 100_000):
                for s in range(seeds):
                    specs.append({"study": "n", "part": "ceiling", "instance": inst, "n": n,
                                  "epsilon": 1.0, "seed": s, "methods": (CVXDP_CEILING,)})
    if "epsilon" in studies:
        for eps in (0.1, 0.3, 1.0, 3.0, 10.0):
            for s in range(seeds):
                specs.append({"study": "epsilon", "instance": "high-leverage", "n": 30_000, "epsilon": eps,
                              "seed": s, "methods": (CVXDP, CVXDP_ABLATION, OP_RULE, GD_RULE, NONPRIVATE)})
    if "k" in studies:
        for k in (2.5, 4.0, 8.0):
            for n in (1_000, 3_000, 10_000, 30_000, 100_000):
                for s in range(seeds):
                    specs.append({"study": "k", "instance": "student-t", "n": n, "epsilon": 1.0, "seed": s,
                                  "k": k, "methods": (CVXDP, OP_RULE)})
    if "lower-bound" in studies:
        for k in (2.5, 4.0, 8.0):
            for n in (1_000, 3_000, 10_000, 30_000, 100_000):
                for s in range(seeds):
                    specs.append({"study": "lower-bound", "instance": "lower-bound", "n": n, "epsilon": 1.0,
                                  "seed": s, "k": k,
                                  "methods": (CVXDP, CVXDP_POPULATION, OP_RULE, NOISY_MEAN, TRIVIAL)})
    if "lower-bound-ceiling" in studies:
        for k in (2.5, 4.0, 8.0):
            for n in (1_000, 3_000, 10_000, 30_000, 100_000):
                for s in range(seeds):
                    specs.append({"study": "lower-bound", "part": "lower-bound-ceiling",
                                  "instance": "lower-bound", "n": n, "epsilon": 1.0, "seed": s, "k": k,
                                  "methods": (CVXDP_CEILING,)})
    if "lower-bound-crossed" in studies:
        for n in (1_000, 3_000, 10_000, 30_000, 100_000):
            for s in range(seeds):
                specs.append({"study": "lower-bound-crossed", "instance": "lower-bound-crossed", "n": n,
                              "epsilon": 1.0, "seed": s, "k": 4.0, "methods": (CVXDP, NOISY_MEAN, TRIVIAL)})
    if "smooth" in studies:
        for n in (10_000, 100_000):
            for s in range(seeds):
                specs.append({"study": "smooth", "instance": "high-leverage-huber", "n": n, "epsilon": 1.0,
                              "seed": s, "methods": (CVXDP, OP_RULE, GD_RULE, OBJ_PERT, NONPRIVATE)})
    # the largest cells first, so the pool's two workers finish together
    cost = {CVXDP_CEILING: len(CEILING_C_FACTORS) * len(CEILING_LAMBDA_FACTORS)}
    return sorted(specs, key=lambda sp: -sp["n"] * sum(cost.get(m, 1) for m in sp["methods"]))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="headline ordering at n = 10^5 only")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=str, default=None)
    parser.add_argument("--no-readme", action="store_true")
    parser.add_argument("--replot", action="store_true",
                        help="redraw figures, tables and the README section from results/utility.json")
    parser.add_argument("--studies", type=str, default=",".join(STUDIES),
                        help="comma-separated subset of " + ", ".join(STUDIES) + "; a subset replaces "
                        "those studies in an existing benchmarks/results/utility.json and keeps the rest")
    parser.add_argument("--methods", type=str, default=None,
                        help="comma-separated subset of " + ", ".join(METHOD_KEYS) + ": rerun only these "
                        "methods in the chosen studies and keep every other method's figures from "
                        "benchmarks/results/utility.json (for a change that touches those methods only; "
                        "the real-data study is always rerun whole)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    if args.quick:
        seeds = args.seeds or 3
        specs = [{"study": "n", "instance": "high-leverage", "n": 100_000, "epsilon": 1.0, "seed": s,
                  "methods": (CVXDP, OP_RULE)} for s in range(seeds)]
        cells = [run_cell(sp) for sp in specs]
        gaps = [c["excess"][OP_RULE] / c["excess"][CVXDP] for c in cells]
        for c in cells:
            print(f"seed {c['seed']}: cvxdp {c['excess'][CVXDP]:.4g}  {OP_RULE} {c['excess'][OP_RULE]:.4g}")
        result = {"benchmark": "utility", "quick": True, "cells": cells,
                  "cvxdp_below_op_every_seed": all(g > 1 for g in gaps), "op_over_cvxdp": gaps}
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2, default=float))
        print(f"op/cvxdp excess ratio per seed: {', '.join(f'{g:.2f}' for g in gaps)}")
        return result
    seeds = args.seeds or 5
    studies = tuple(x.strip() for x in args.studies.split(",") if x.strip())
    unknown = set(studies) - set(STUDIES)
    if unknown:
        parser.error(f"unknown studies {sorted(unknown)}; choose from {', '.join(STUDIES)}")
    previous = RESULTS / "utility.json"
    meta = {"machine": f"{platform.processor() or platform.machine()}, {args.jobs} worker processes",
            "seeds": seeds, "minutes": 0.0}
    if args.replot:
        kept = json.loads(previous.read_text())
        cells, real, meta = kept["cells"], kept["real"], kept["meta"]
    else:
        specs = specs_full(seeds, studies)
        only = None
        if args.methods is not None:
            keys = [x.strip() for x in args.methods.split(",") if x.strip()]
            if set(keys) - set(METHOD_KEYS) or not previous.exists():
                parser.error(f"--methods takes {', '.join(METHOD_KEYS)} and needs an existing {previous}")
            only = {METHOD_KEYS[x] for x in keys}
            specs = [{**sp, "methods": tuple(m for m in sp["methods"] if m in only)} for sp in specs]
            specs = [sp for sp in specs if sp["methods"]]
            if not specs:
                parser.error(f"none of the chosen studies ({', '.join(studies)}) runs {', '.join(keys)}")
        real_specs = [{"dataset": ds, "epsilon": e, "seed": s} for ds in ("engel", "breast-cancer", "randhie")
                      for e in (0.5, 1.0, 4.0) for s in range(seeds)] if "real" in studies else []
        try:
            from tqdm import tqdm
        except ImportError:  # pragma: no cover
            def tqdm(x, **_):
                return x
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            cells = list(tqdm(pool.map(run_cell, specs), total=len(specs), desc="synthetic cells"))
            real = list(tqdm(pool.map(run_real, real_specs), total=len(real_specs), desc="real-data cells"))
        minutes = (time.perf_counter() - t0) / 60.0
        meta["minutes_by_studies"] = {",".join(studies): minutes}
        if only is not None:
            kept = json.loads(previous.read_text())
            cells = merge_methods(kept["cells"], cells, only)
            if "real" not in studies:
                real = kept.get("real", [])
            meta = {**kept["meta"], "reruns": [*kept["meta"].get("reruns", []), {
                "methods": sorted(only), "studies": list(studies), "minutes": minutes,
                "date": time.strftime("%Y-%m-%d")}]}
        elif set(studies) != set(STUDIES) and previous.exists():
            cells, real, meta = replace_studies(json.loads(previous.read_text()), cells, real, studies, meta)
        if only is None:
            meta["minutes"] = sum(meta["minutes_by_studies"].values())
    cells = without_stray_ceilings(cells)
    summary = summarize(cells)
    bias = clipping_bias_curve()
    tgt = targets(summary)
    lower_tgt = lower_bound_targets(summary)
    RESULTS.mkdir(parents=True, exist_ok=True)
    files = plot(summary, bias, RESULTS)
    result = {"benchmark": "utility", "meta": meta, "summary": summary, "targets": tgt,
              "targets_lower_bound": lower_tgt, "clipping_bias": bias, "cells": cells, "real": real}
    (RESULTS / "utility.json").write_text(json.dumps(result, indent=1, default=float))
    with open(RESULTS / "utility.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(summary["rows"][0]))
        writer.writeheader()
        writer.writerows(summary["rows"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=float))
    text = markdown(summary, real, tgt, files, meta, lower_tgt)
    (RESULTS / "utility.md").write_text(text + "\n")
    if not args.no_readme:
        update_readme(text)
    print(text)
    return result


if __name__ == "__main__":
    main()
