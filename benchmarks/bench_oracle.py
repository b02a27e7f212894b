"""Oracle throughput: one certified pass of the extension oracle vs one non-private ERM solve.

Both are measured in the same run on the same data: m examples of heavy-tailed
(Student-t, ν = 3) hinge classification in d dimensions, W a Euclidean ball and
U = W ∩ B(c, r) a lens.  The reference is the non-private regularized hinge ERM
``min (1/m) Σ max(0, 1 − y <x, w>) + (λ/2)||w||²`` over W, stated in CVXPY and
solved by Clarabel (compilation included, as a user would pay it).

The last printed line is the ratio (oracle time / reference time); ``--json PATH``
writes every figure.  ``--quick`` uses a smaller instance for the test suite.

    python benchmarks/bench_oracle.py            # m = 10^4, d = 20
    python benchmarks/bench_oracle.py --quick
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import cvxpy as cp
import numpy as np

import cvxdp
from cvxdp.extension import LipschitzExtension
from cvxdp.geometry import localize


def make_data(m: int, d: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    X = rng.standard_t(3.0, size=(m, d))
    w_true = rng.normal(size=d)
    y = np.sign(X @ w_true + rng.standard_t(3.0, size=m))
    y[y == 0] = 1.0
    return {"x": X, "y": y}


def reference_solve(data: dict, radius: float, lam: float) -> float:
    """Seconds for one CVXPY + Clarabel solve of the non-private regularized hinge ERM."""
    X, y = data["x"], data["y"]
    m, d = X.shape
    t0 = time.perf_counter()
    w = cp.Variable(d)
    obj = cp.sum(cp.pos(1 - cp.multiply(y, X @ w))) / m + lam / 2 * cp.sum_squares(w)
    prob = cp.Problem(cp.Minimize(obj), [cp.norm(w, 2) <= radius])
    prob.solve(solver=cp.CLARABEL)
    return time.perf_counter() - t0


def oracle_pass(data: dict, radius: float, C: float) -> tuple[float, dict]:
    """Seconds for one certified pass over all examples, and what it certified."""
    d = data["x"].shape[1]
    w = cp.Variable(d)
    model = cvxdp.Model(cvxdp.losses.hinge(w), [cp.norm(w, 2) <= radius])
    examples = model.bind(data)
    center = np.full(d, 0.3 * radius / np.sqrt(d))
    region = localize(model.domain, center, 0.5 * radius)
    ext = LipschitzExtension(model, C, region)
    query = center + 0.2 * radius / np.sqrt(d)
    t0 = time.perf_counter()
    ev = ext.evaluate(query, examples, tolerance=1e-9, require=True)
    elapsed = time.perf_counter() - t0
    return elapsed, {"max_bracket": float(ev.gap.max()), "region": repr(region),
                     "methods": sorted(set(ev.method.tolist()))}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=10_000)
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="m = 2000, d = 10, 2 repeats")
    parser.add_argument("--json", type=str, default=None, help="write all figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        args.m, args.d, args.repeats = 2000, 10, 2
    data = make_data(args.m, args.d)
    radius, C, lam = 2.0, 1.0, 0.05
    # warm both paths once (imports, BLAS threads), then keep the best of the repeats
    reference_solve(make_data(200, args.d, 1), radius, lam)
    oracle_pass(make_data(200, args.d, 1), radius, C)
    ref = min(reference_solve(data, radius, lam) for _ in range(args.repeats))
    runs = [oracle_pass(data, radius, C) for _ in range(args.repeats)]
    t_oracle = min(r[0] for r in runs)
    result = {
        "benchmark": "oracle_throughput", "m": args.m, "d": args.d, "loss": "hinge",
        "domain": f"ball radius {radius}", "C": C, "repeats": args.repeats,
        "oracle_seconds": t_oracle, "reference_seconds": ref, "ratio": t_oracle / ref,
        "target_ratio": 1.0, **runs[0][1],
        "python": platform.python_version(), "machine": platform.machine(),
    }
    print(f"certified oracle pass over m={args.m}, d={args.d}: {t_oracle:.3f} s "
          f"(max bracket {result['max_bracket']:.2e}, paths {result['methods']})")
    print(f"non-private CVXPY + Clarabel hinge ERM:          {ref:.3f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(f"ratio {result['ratio']:.3f}")
    return result


if __name__ == "__main__":
    main()
