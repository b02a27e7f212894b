"""Whole private fit vs one non-private solve of the same regularized ERM, measured in the same run.

Defaults of :class:`cvxdp.PrivateProblem` (population localization, tight
profile, certified conic ERM) on the hinge loss with W an ℓ2 ball and
Student-t (ν = 5) classification data in d = 20.  The reference is one
CVXPY + Clarabel solve of ``min (1/n) Σ hinge + (λ₁/2)||w||²`` over W on the
same data (compilation included), λ₁ the first phase's regularization.

Each size runs in its own subprocess so its peak resident memory (``ru_maxrss``)
is its own.  Reported: time ratio at n = 10^4 (target ≤ 10), the growth
exponent of the private fit's time from 10^4 to 10^5 (target ≤ 1.2), and the
peak memory at 10^5 (target ≤ 2 GiB), and the share of the fit spent planning (the public
schedule search of :class:`cvxdp.plan.planner.Planner`; target ≤ 10 % at n = 10^4).  The last line
prints the ratio at the smallest size; ``--json PATH`` writes every figure; ``--quick`` runs small sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import resource
import subprocess
import sys
import time
import warnings

import cvxpy as cp


def run_single(n: int, d: int, seed: int) -> dict:
    import cvxdp
    from cvxdp.datasets import student_t_hinge
    from cvxdp.plan.schedule import initial_lambda

    task = student_t_hinge(n=n, d=d, nu=5.0, n_test=10, seed=seed)
    k = 4.0
    G = task.G(k)
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.hinge(w), [cp.norm(w, 2) <= task.radius])
    data = {"x": task.X_train, "y": task.y_train}
    lam = initial_lambda(n, d, 1.0, k, G, G, model.diameter)
    # reference: one non-private CVXPY + Clarabel solve of the regularized hinge ERM
    t0 = time.perf_counter()
    v = cp.Variable(d)
    obj = cp.sum(cp.pos(1 - cp.multiply(task.y_train, task.X_train @ v))) / n + lam / 2 * cp.sum_squares(v)
    cp.Problem(cp.Minimize(obj), [cp.norm(v, 2) <= task.radius]).solve(solver=cp.CLARABEL)
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=k, G_k=G,
                                                   random_state=seed, diagnostics=True)  # erm_methods
    t_private = time.perf_counter() - t0
    return {
        "n": n, "d": d, "private_seconds": t_private, "reference_seconds": t_ref,
        "ratio": t_private / t_ref, "releases": len(result.steps),
        "plan_seconds": result.timings["plan"], "plan_share": result.timings["plan"] / t_private,
        "epsilon_spent": result.ledger.spent,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "erm_methods": sorted({s.certificate.method for s in result.steps}),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="sizes 2000 and 8000, d = 10")
    parser.add_argument("--json", type=str, default=None)
    parser.add_argument("--single", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.single is not None:
        print(json.dumps(run_single(args.single, args.d, args.seed)))
        return {}
    if args.quick:
        args.sizes, args.d = [2000, 8000], 10
    rows = []
    for n in args.sizes:
        out = subprocess.run([sys.executable, __file__, "--single", str(n), "--d", str(args.d),
                              "--seed", str(args.seed)], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"n={n:>7d} d={args.d}: private fit {row['private_seconds']:8.2f} s, reference "
              f"{row['reference_seconds']:6.2f} s, ratio {row['ratio']:6.2f}, peak RSS "
              f"{row['peak_rss_mib']:7.0f} MiB, {row['releases']} releases; planning "
              f"{row['plan_seconds']:.3f} s = {100 * row['plan_share']:.1f}% of the fit")
    result = {"benchmark": "private_fit", "rows": rows, "targets": {
        "ratio_at_1e4": 10.0, "growth_exponent": 1.2, "peak_memory_mib_at_1e5": 2048.0,
        "plan_share_at_1e4": 0.10},
        "python": platform.python_version(), "machine": platform.machine()}
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        result["growth_exponent"] = math.log(b["private_seconds"] / a["private_seconds"]) / math.log(
            b["n"] / a["n"])
        print(f"growth exponent of the private fit's time: {result['growth_exponent']:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(f"ratio {rows[0]['ratio']:.3f}")
    return result


if __name__ == "__main__":
    main()
