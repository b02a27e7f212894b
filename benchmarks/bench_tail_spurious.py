"""How often the private tail histogram's ``G_k`` estimate is wrecked by a spurious count, with and without
the lone-bin rule (:func:`cvxdp.privacy.tail._without_lone_noise`).

At level ``β`` each empty bin clears its noise threshold with probability about ``β/(J + 2)``, so about
``β`` of all releases keep one spurious count somewhere on the grid (``J + 2 = 108`` bins on the default
``G_k="auto"`` grid ``[10⁻⁶, 10¹⁰]``); one far up sets the ``k``-th moment by itself.  This script releases
the histogram of the per-example Lipschitz constants of a real task many times — the same public grid, ε
and noise law as a fit with ``G_k="auto"`` — and counts the releases whose ``G₄`` estimate exceeds 10× the
median release's, with the rule (the code as it is) and without it (the rule replaced by the identity for
the measurement), on the same noise draws; and how often the rule changed the estimate at all.

Not a fit: only the histogram release is repeated (it is what the rule post-processes).  ``--quick``
(one task at 10³ rows, 200 releases) runs in the tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
#: (task of ``bench_large_real.TASKS``, rows or ``None`` for the full size, the histogram's ε): ε_h is the
#: share a default estimator fit gives it (10% of the 90% the centring leaves at ε = 1, or 10% of ε).
CASES = (("CPSSW8 LAD (centred)", None, 0.09), ("diamonds LAD", 1000, 0.03), ("CPSSW8 τ=0.9", 10_000, 0.1),
         ("Fertility hinge", 10_000, 0.1))


def measure(task_name: str, rows: int | None, eps_h: float, releases: int, seed: int = 0,
            noise_seed: int = 1000) -> dict:
    import cvxpy as cp

    import cvxdp
    import cvxdp.privacy.tail as tail
    from cvxdp.datasets import REAL
    from cvxdp.privacy.ledger import PrivacyLedger
    from cvxdp.privacy.random import SeededRandom

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_large_real import TASKS

    dataset, loader = TASKS[task_name]
    task = REAL[dataset](seed=seed, **({**loader, "n": rows} if rows else loader))
    w = cp.Variable(task.d)
    loss = (cvxdp.losses.pinball(w, task.meta["quantile"]) if task.loss == "pinball"
            else getattr(cvxdp.losses, task.loss)(w))
    model = cvxdp.Model(loss, [cp.norm(w, 2) <= task.radius])
    examples = model.bind({"x": task.X_train, "y": task.y_train})
    rule = tail._without_lone_noise
    estimates = {}
    try:
        for name, post in (("with the rule", rule), ("without it", lambda kept, *_: kept)):
            tail._without_lone_noise = post
            source, out = SeededRandom(noise_seed), []  # the same draws for both
            for _ in range(releases):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    prof = tail.private_tail_profile(model, examples, epsilon=eps_h,
                                                     ledger=PrivacyLedger(examples.m, eps_h), source=source,
                                                     low=1e-6, high=1e10)
                out.append(prof.moment(4.0) if prof.seen else np.nan)
            estimates[name] = np.array(out)
    finally:
        tail._without_lone_noise = rule
    new, old = estimates["with the rule"], estimates["without it"]
    median = float(np.nanmedian(old))
    changed = ~((old == new) | (np.isnan(old) & np.isnan(new)))
    return {"task": task_name, "n": examples.m, "epsilon_h": eps_h, "releases": releases, "median_G4": median,
            "wrecked": {k: float(np.mean(v > 10 * median)) for k, v in estimates.items()},
            "unseen": {k: float(np.mean(np.isnan(v))) for k, v in estimates.items()},
            "changed": float(np.mean(changed))}


def markdown(rows: list[dict], minutes: float) -> str:
    head = (f"Measured by `python benchmarks/bench_tail_spurious.py` ({minutes:.1f} minutes): releases of "
            "the private tail histogram of the per-example Lipschitz constants (`G_k=\"auto\"`'s grid "
            "[1e-6, 1e10], 2 bins per octave, β = 0.1) on the same noise draws with and without the "
            "lone-bin rule; *wrecked*: a `G₄` estimate above 10× the median release's.")
    columns = ("task", "n", "ε of the histogram", "releases", "median G₄", "wrecked, without the rule",
               "wrecked, with it", "unseen (with)", "estimate changed by the rule")
    lines = [head, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        cells = (r["task"], f"{r['n']:,}", f"{r['epsilon_h']:g}", str(r["releases"]), f"{r['median_G4']:.3g}",
                 f"{r['wrecked']['without it']:.1%}", f"{r['wrecked']['with the rule']:.1%}",
                 f"{r['unseen']['with the rule']:.1%}", f"{r['changed']:.1%}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--releases", type=int, default=1000)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.quick:
        rows = [measure("diamonds LAD", 1000, 0.03, 200)]
    else:
        rows = [measure(task, n, eps, args.releases, noise_seed=1000 + i)
                for i, (task, n, eps) in enumerate(CASES)]
    minutes = (time.perf_counter() - t0) / 60.0
    for r in rows:
        print(f"{r['task']:22s} n={r['n']:<7d} ε_h={r['epsilon_h']:<5g} wrecked without the rule "
              f"{r['wrecked']['without it']:.1%}, with it {r['wrecked']['with the rule']:.1%}; "
              f"changed {r['changed']:.1%}")
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "tail_spurious.json").write_text(json.dumps({"rows": rows, "minutes": minutes}, indent=1))
        (RESULTS / "tail_spurious.md").write_text(markdown(rows, minutes))
    return rows


if __name__ == "__main__":
    main()
