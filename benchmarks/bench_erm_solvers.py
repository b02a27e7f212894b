"""Certified ERM solvers side by side: the joint conic program vs the bundle method, same problem.

The problem is the first release's regularized extension ERM of a default private fit
(output perturbation, ε = 1, k = 4, G_k = 3) on Student-t (ν = 3) data in d = 20 with W the ball of
radius 2: LAD and hinge.  Both solvers must reach the same α with their own certificate; reported
per (loss, n): seconds of each, the bundle's oracle passes, and the ratio bundle / conic (> 1: the
joint program is faster).  ``--quick`` runs n = 2000 only.  The last line prints the largest ratio.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings

import cvxpy as cp
import numpy as np


def first_release_problem(loss: str, n: int, d: int, seed: int = 0):
    """The regularized ERM and α that a default output-perturbation fit hands to the solver."""
    import cvxdp
    import cvxdp.run.release as release

    rng = np.random.default_rng(seed)
    X = rng.standard_t(3, size=(n, d))
    y = X @ (rng.normal(size=d) / np.sqrt(d)) + rng.standard_t(3, size=n)
    if loss == "hinge":
        y = np.where(y > 0, 1.0, -1.0)
    w = cp.Variable(d)
    model = cvxdp.Model(getattr(cvxdp.losses, loss)(w), [cp.norm(w, 2) <= 2.0])
    captured = []
    real = release.solve_certified

    def capture(problem, alpha, erm=None):
        captured.append((problem, alpha))
        return real(problem, alpha, erm)

    release.solve_certified = capture
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cvxdp.PrivateProblem(model).solve({"x": X, "y": y}, epsilon=1.0, moment_k=4.0, G_k=3.0,
                                              random_state=seed, algorithm="output-perturbation")
    finally:
        release.solve_certified = real
    return captured[0]


def compare(loss: str, n: int, d: int) -> dict:
    from cvxdp.erm import ERMSettings, solve_certified

    problem, alpha = first_release_problem(loss, n, d)
    row: dict = {"loss": loss, "n": n, "d": d, "alpha": alpha}
    for method in ("conic", "bundle"):
        t0 = time.perf_counter()
        _, cert = solve_certified(problem, alpha, ERMSettings(method=method))
        row[f"{method}_seconds"] = time.perf_counter() - t0
        row[f"{method}_path"] = cert.method
        row[f"{method}_gap_over_alpha"] = cert.gap / alpha
    row["ratio"] = row["bundle_seconds"] / row["conic_seconds"]
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="n = 2000 only")
    parser.add_argument("--json", type=str, default=None, help="write all figures to this file")
    args = parser.parse_args(argv)
    sizes = [2000] if args.quick else args.sizes
    rows = [compare(loss, n, args.d) for loss in ("absolute", "hinge") for n in sizes]
    for r in rows:
        print(f"{r['loss']:8s} n={r['n']:>7d}: conic {r['conic_seconds']:7.2f} s ({r['conic_path']}), "
              f"bundle {r['bundle_seconds']:7.2f} s ({r['bundle_path']}), ratio {r['ratio']:.1f}")
    result = {"benchmark": "erm_solvers", "rows": rows, "python": platform.python_version(),
              "machine": platform.machine()}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(f"ratio {max(r['ratio'] for r in rows):.2f} (bundle / conic, largest)")
    return result


if __name__ == "__main__":
    main()
