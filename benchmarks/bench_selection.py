"""Private selection (``cvxdp.private_selection``) against the fits it chooses from.

Two studies, medians over seeds (seeded noise: reproducible, not private — fine for a benchmark):

* ``synthetic`` — the high-leverage-tail LAD instance (d = 10, ε = 1, n = 10⁴; public ``G_k``):
  excess population risk of cvxdp's default fit, of clipped output perturbation by its public rule,
  and of the selection among those two and the prior centre (each fitted with about ε/3.3);
* ``real`` — held-out test loss on the installed real data sets with ``G_k="auto"`` (the case where
  the private histogram can see nothing on a small sample and the fit lands worse than the domain's
  centre), ε ∈ {0.5, 1}: cvxdp, the prior centre ``w = 0`` itself, and the selection between cvxdp
  and the prior.

``python benchmarks/bench_selection.py`` writes ``benchmarks/results/selection.json`` and prints the
medians; ``--quick`` runs one seed of a smaller synthetic cell and one real cell.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def synthetic_cell(n: int, seed: int, epsilon: float = 1.0) -> dict:
    import cvxpy as cp

    import cvxdp
    from cvxdp import Candidate, private_selection
    from cvxdp.baselines import clipped_output_perturbation
    from cvxdp.baselines.tuning import output_perturbation_rule
    from cvxdp.datasets import high_leverage_tail

    warnings.simplefilter("ignore")
    task = high_leverage_tail(n=n, d=10, n_test=10, seed=1000 + seed)
    w = cp.Variable(task.d)
    model = cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= task.radius])
    data = {"x": task.X_train, "y": task.y_train}
    G_k, G_2 = task.G(4.0), task.G(2.0)
    out, secs = {}, {}
    t = time.perf_counter()
    out["cvxdp"] = task.excess_risk(cvxdp.PrivateProblem(model).solve(
        data, epsilon=epsilon, moment_k=4.0, G_k=G_k, G_2=G_2, random_state=seed).w)
    secs["cvxdp"] = time.perf_counter() - t
    t = time.perf_counter()
    rule = output_perturbation_rule(n, task.d, epsilon, model.diameter, G_2)
    out["clipped OP (public rule)"] = task.excess_risk(clipped_output_perturbation(
        model, data, epsilon=epsilon, random_state=seed, **rule).w)
    secs["clipped OP (public rule)"] = time.perf_counter() - t
    t = time.perf_counter()
    cands = [Candidate("cvxdp"), Candidate("clipped OP", "clipped-output-perturbation"),
             Candidate("prior", "prior")]
    sel = private_selection(model, data, epsilon=epsilon, moment_k=4.0, G_k=G_k, G_2=G_2, random_state=seed,
                            candidates=cands)
    out["selection"] = task.excess_risk(sel.w)
    secs["selection"] = time.perf_counter() - t
    return {"study": "synthetic", "n": n, "seed": seed, "epsilon": epsilon, "excess": out, "seconds": secs,
            "chosen": sel.candidate.name}


def _real_task(name: str, seed: int):
    from cvxdp.datasets import real

    if name == "engel-0.9":
        return real.engel(seed=seed, quantile=0.9)
    if name == "engel-0.5":
        return real.engel(seed=seed, quantile=0.5)
    return real.randhie(seed=seed)


def real_cell(name: str, seed: int, epsilon: float) -> dict:
    import cvxpy as cp

    import cvxdp
    from cvxdp import Candidate, private_selection

    warnings.simplefilter("ignore")
    task = _real_task(name, seed)
    d = task.X_train.shape[1]
    w = cp.Variable(d)
    if task.loss == "pinball":
        q = task.meta["quantile"]
        loss = cvxdp.losses.pinball(w, quantile=q)

        def test_loss(v):
            r = task.y_test - task.X_test @ v
            return float(np.mean(np.maximum(q * r, (q - 1.0) * r)))
    else:
        loss = cvxdp.losses.absolute(w)

        def test_loss(v):
            return float(np.mean(np.abs(task.y_test - task.X_test @ v)))
    model = cvxdp.Model(loss, [cp.norm(w, 2) <= task.radius])
    data = {"x": task.X_train, "y": task.y_train}
    out = {"prior w = 0": test_loss(np.zeros(d)),
           "non-private": test_loss(cvxdp.baselines.nonprivate_erm(model, model.bind(data)))}
    fit = cvxdp.PrivateProblem(model).solve(data, epsilon=epsilon, moment_k=4.0, G_k="auto",
                                            random_state=seed)
    out["cvxdp (G_k auto)"] = test_loss(fit.w)
    sel = private_selection(model, data, epsilon=epsilon, moment_k=4.0, G_k="auto", score_C=1.0,
                            random_state=seed, candidates=[Candidate("cvxdp"), Candidate("prior", "prior")])
    out["selection"] = test_loss(sel.w)
    return {"study": "real", "data": name, "n": len(task.y_train), "seed": seed, "epsilon": epsilon,
            "test_loss": out, "chosen": sel.candidate.name}


def summarize(cells: list[dict]) -> list[dict]:
    groups: dict = {}
    for c in cells:
        key = (c["study"], c.get("data", "high-leverage"), c["n"], c["epsilon"])
        groups.setdefault(key, []).append(c)
    rows = []
    for (study, data, n, eps), cs in sorted(groups.items()):
        metric = "excess" if study == "synthetic" else "test_loss"
        methods = cs[0][metric]
        rows.append({"study": study, "data": data, "n": n, "epsilon": eps, "seeds": len(cs),
                     "median": {m: float(np.median([c[metric][m] for c in cs])) for m in methods},
                     "chosen": [c["chosen"] for c in cs]})
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    cells = []
    if args.quick:
        cells.append(synthetic_cell(2000, 0))
        cells.append(real_cell("engel-0.9", 0, 0.5))
    else:
        for s in range(args.seeds):
            cells.append(synthetic_cell(10_000, s))
            for name in ("engel-0.9", "engel-0.5", "randhie"):
                for eps in (0.5, 1.0):
                    cells.append(real_cell(name, s, eps))
    rows = summarize(cells)
    for r in rows:
        med = ", ".join(f"{m} {v:.4g}" for m, v in r["median"].items())
        print(f"{r['study']:9s} {r['data']:13s} n={r['n']:<6d} ε={r['epsilon']:<4g} {med}  "
              f"chosen {r['chosen']}")
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "selection.json").write_text(json.dumps({"rows": rows, "cells": cells}, indent=1))
    return rows


if __name__ == "__main__":
    main()
