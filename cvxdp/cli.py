"""Command line: ``python -m cvxdp demo`` (or the ``cvxdp`` console script).

``demo`` fits a private model on built-in heavy-tailed data with no arguments
and prints the model, its test loss next to the non-private fit, the privacy
spent, and the certificates of every private step.

Only the model, its test loss on held-out data and the ledger are covered by the
privacy guarantee.  The demo asks ``solve`` for ``diagnostics=True`` to show the
certificates, and prints them, the fit times and the non-private comparison under
headings that say they are not private; ``--no-diagnostics`` prints only what the
guarantee covers.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable

import cvxpy as cp
import numpy as np

import cvxdp
from cvxdp.baselines import nonprivate_erm
from cvxdp.datasets import TASKS
from cvxdp.error import CvxdpError, PrivacyLeakWarning
from cvxdp.plan.inputs import ALGORITHMS
from cvxdp.problem import PrivateProblem


def demo(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cvxdp demo", description=(
        "Fit a pure ε-DP model on built-in heavy-tailed data and compare it with the non-private fit."))
    parser.add_argument("--dataset", choices=sorted(TASKS), default="high-leverage-tail")
    parser.add_argument("--loss", choices=["auto", "absolute", "hinge", "pinball"], default="auto",
                        help="default: the loss the dataset was made for")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--profile", choices=["tight", "paper"], default="tight")
    parser.add_argument("--algorithm", choices=list(ALGORITHMS), default="auto")
    parser.add_argument("--n", type=int, default=20_000, help="training examples")
    parser.add_argument("--d", type=int, default=10, help="features")
    parser.add_argument("--moment-k", type=float, default=4.0)
    parser.add_argument("--G-k", dest="G_k", default="law", metavar="{law,auto,NUMBER}",
                        help="the public bound on the k-th moment of the per-example Lipschitz constant: "
                             "'law' (default: the dataset's own, a property of its law), 'auto' (estimated "
                             "by a private tail histogram from 10%% of ε) or a number")
    parser.add_argument("--G-2", dest="G_2", default="none", metavar="{none,law,NUMBER}",
                        help="a public bound on the second moment: 'none' (default), 'law' or a number; "
                             "well below G_k it tells the planner where the bulk lies")
    parser.add_argument("--seed", type=int, default=0, help="seed of the *data* generator")
    parser.add_argument("--noise-seed", type=int, default=None,
                        help="seed the privacy noise (reproducible, NOT private; default: secure)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--no-diagnostics", action="store_true",
                        help="print only what the privacy guarantee covers (the private model, its held-out "
                             "test loss, the ledger): no certificates, fit times or non-private comparison")
    args = parser.parse_args(argv)

    task = TASKS[args.dataset](n=args.n, d=args.d, seed=args.seed)
    loss_name = task.loss if args.loss == "auto" else args.loss
    if loss_name == "hinge" and task.loss != "hinge":
        parser.error("the hinge loss needs a classification dataset (student-t-hinge)")
    w = cp.Variable(task.d)
    loss = cvxdp.losses.pinball(w, 0.5) if loss_name == "pinball" else getattr(cvxdp.losses, loss_name)(w)
    model = cvxdp.Model(loss, [cp.norm(w, 2) <= task.radius])
    k = args.moment_k
    G_k = _moment_bound(parser, "--G-k", args.G_k, lambda: task.G(k), allowed=("law", "auto"))
    G_2 = _moment_bound(parser, "--G-2", args.G_2, lambda: task.G(2.0), allowed=("law", "none"))
    train = {"x": task.X_train, "y": task.y_train}
    test = model.bind({"x": task.X_test, "y": task.y_test})
    print(f"cvxdp {cvxdp.__version__} — pure ε-DP convex learning on heavy-tailed data\n")
    print(f"data      {task.name}: n = {args.n} train, {task.X_test.shape[0]} test, d = {task.d}")
    print(f"          {task.description}")
    print(f"model     {loss_name} loss, W = ℓ2 ball of radius {task.radius} (D = {model.diameter:g})")
    source = {"law": "public: a property of the data's law",
              "auto": "from a private tail histogram, 10% of ε"}.get(args.G_k, "public: given")
    moments = f"k = {k:g}, G_k = {'estimated' if G_k == 'auto' else format(G_k, '.4g')} ({source})"
    print(f"moments   {moments}" + ("" if G_2 is None else f", G₂ = {G_2:.4g} (public)"))
    print(f"privacy   ε = {args.epsilon:g} (pure DP), profile {args.profile}, algorithm {args.algorithm}, "
          f"noise {'seeded (NOT private)' if args.noise_seed is not None else 'CSPRNG'}\n")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        # seeded noise is announced above; every other PrivacyLeakWarning (ε > 100, a DEBUG log) is shown
        warnings.filterwarnings("ignore", message="this noise source is not cryptographically secure",
                                category=PrivacyLeakWarning)
        result = PrivateProblem(model).solve(
            train, epsilon=args.epsilon, moment_k=k, G_k=G_k, G_2=G_2, algorithm=args.algorithm,
            profile=args.profile, random_state=args.noise_seed, progress=not args.no_progress,
            diagnostics=not args.no_diagnostics)
    t_private = time.perf_counter() - t0
    risk_p = model.empirical_risk(result.w, test)  # held-out data: post-processing of the release
    risk_0 = model.empirical_risk(np.zeros(task.d), test)
    print(result.summary())
    print()
    if args.no_diagnostics:
        print(f"{'':26s}{'test loss':>12s}")
        print(f"{'private (ε-DP)':26s}{risk_p:12.4f}")
        print(f"{'w = 0 (trivial, 0-DP)':26s}{risk_0:12.4f}\n")
        print(result.release_plan.describe())
        print(result.ledger.summary().splitlines()[0])
        return 0
    t0 = time.perf_counter()
    w_np = nonprivate_erm(model, model.bind(train))
    t_np = time.perf_counter() - t0
    risk_np = model.empirical_risk(w_np, test)
    print("comparison — the non-private fit and the fit times are diagnostics, NOT private:")
    print(f"{'':26s}{'test loss':>12s}{'fit time':>11s}")
    print(f"{'private (ε-DP)':26s}{risk_p:12.4f}{t_private:10.2f}s")
    print(f"{'non-private ERM':26s}{risk_np:12.4f}{t_np:10.2f}s")
    print(f"{'w = 0 (trivial, 0-DP)':26s}{risk_0:12.4f}")
    print(f"excess test loss over the non-private fit: {risk_p - risk_np:.4f}\n")
    print(result.release_plan.describe())
    print(result.ledger.summary().splitlines()[0])
    print("\ncertificates of the private steps — diagnostics, data-dependent: do not publish "
          "(α req. the accuracy the sensitivity assumes, gap the certified one)")
    print(f"  {'phase':>5s} {'grp':>3s} {'rnd':>3s} {'m':>6s} {'C':>8s} {'λ':>9s} {'α req.':>9s} "
          f"{'gap':>9s} {'Δ':>9s} {'s':>9s} {'R⁺':>8s}  method")
    for c in result.certificates:
        print(f"  {c['phase']:5d} {c['group']:3d} {c['round']:3d} {c['m']:6d} {c['C']:8.3g} "
              f"{c['lambda']:9.3g} {c['alpha']:9.2e} {c['certified_gap']:9.2e} {c['sensitivity']:9.2e} "
              f"{c['noise_scale']:9.2e} {c['radius_plus']:8.3g}  {c['method']}")
    return 0


def _moment_bound(parser: argparse.ArgumentParser, flag: str, value: str, law: Callable[[], float],
                  allowed: tuple[str, ...]) -> float | str | None:
    """``--G-k``/``--G-2``: the dataset law's value, ``"auto"``, nothing, or a positive number."""
    if value == "law":
        try:
            return law()
        except KeyError as exc:  # the dataset's table has no bound of this order
            parser.error(f"{flag} law: {exc.args[0]}; pass a number{' or auto' if 'auto' in allowed else ''}")
    if value in allowed:
        return {"auto": "auto", "none": None}[value]
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        parser.error(f"{flag} must be one of {', '.join(allowed)} or a positive number, got {value!r}")
    return number


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m cvxdp demo [options]   (python -m cvxdp demo --help for options)")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command != "demo":
        print(f"unknown command {command!r}; the available command is 'demo'", file=sys.stderr)
        return 2
    try:
        return demo(rest)
    except CvxdpError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
