"""Scale: default private LAD and hinge fits, serial and on a 2-worker LocalCluster, against a numpy floor.

Per (loss, n, where) — Student-t (ν = 3) features, d = 20, W the ball of radius 2, ε = 1, k = 4,
G_k = 3, the default algorithm — each fit runs in a fresh process and reports

* ``seconds``: wall time of ``PrivateProblem.solve`` (certificates included);
* ``driver_peak_mib``: the peak resident memory of the fitting process (``ru_maxrss``), and for the
  cluster runs ``worker_peak_mib``: the largest peak over the worker processes;
* ``floor_seconds``: one plain numpy pass over the same rows (``Σ |<x_i, w> − y_i|`` for LAD,
  ``Σ max(0, 1 − y_i <x_i, w>)`` for hinge), the fastest of three — serially in the fitting process,
  on the cluster over the same partitions on the workers (a Dask map and a sum at the driver) — the
  least any method that reads every row once must pay; and ``ratio = seconds / floor_seconds``.

Serial rows are made in the fitting process.  Cluster rows are *generated on the workers*, one
partition of at most 500,000 rows per task (``cvxdp.run.partitions``: a list of futures), so they are
never held by the driver — 10⁷ rows (1.6 GB of features) included.

The serial hinge fit at ``--compare-n`` rows (10⁵) is also timed against diffprivlib's ``LogisticRegression``
(ε = 1, ``data_norm`` the largest row norm — a non-private choice favourable to it) and
scikit-learn's ``LinearSVC`` on the same rows, in ``--compare-pairs`` (3) interleaved pairs, each
side in a fresh process; the median of the pairs' ratios is reported
(:func:`compare_with_baselines`).  diffprivlib 0.6.6 imports only with
scikit-learn < 1.8, so ``--diffprivlib-env DIR`` names a virtual environment holding it (built there
on first use with ``pip install diffprivlib==0.6.6 "scikit-learn<1.8"``); without it that row is
skipped.

The targets of the scale-out issue, printed with their ratios: the serial LAD fit at 10⁶ rows in
≤ 60 s and ≤ 2 GiB; 10⁷ rows on the cluster with ≤ 1 GiB at the driver and ≤ 4 GiB per worker; time
from 10⁶ to 10⁷ rows on the cluster growing no faster than ``n^1.1``; the hinge fit at 10⁵ rows within
5× diffprivlib's time (stretch 2×).

``--quick`` runs n = 2000 serially and on the cluster for both losses, without the comparison.  The
last line prints the largest ratio to the floor.  A full run also writes ``results/scale.json`` and
``results/scale.md`` (the README's table, as printed, and the targets).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

#: Where the full run writes scale.json and scale.md (the README's table).
RESULTS = Path(__file__).resolve().parent / "results"

#: Rows per partition generated on a worker.
PART_ROWS = 500_000

_FIT = textwrap.dedent("""
    import json, resource, sys, time, warnings
    import numpy as np, cvxpy as cp
    import cvxdp
    warnings.simplefilter("ignore")
    loss, n, d, where, seed, part_rows = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                          int(sys.argv[5]), int(sys.argv[6]))

    def make(n, d, seed, loss):
        rng = np.random.default_rng(seed)
        X = rng.standard_t(3, size=(n, d))
        y = X @ (np.random.default_rng(12345).normal(size=d) / np.sqrt(d)) + rng.standard_t(3, size=n)
        if loss == "hinge":
            y = np.where(y > 0, 1.0, -1.0)
        return {"x": X, "y": y}

    def floor_pass(part, probe, loss):
        X, y = part["x"], part["y"]
        if loss == "hinge":
            return float(np.maximum(0.0, 1.0 - y * (X @ probe)).sum())
        return float(np.abs(X @ probe - y).sum())

    w = cp.Variable(d)
    model = cvxdp.Model(getattr(cvxdp.losses, loss)(w), [cp.norm(w, 2) <= 2.0])
    probe = np.random.default_rng(7).normal(size=d) / np.sqrt(d)
    kwargs = dict(epsilon=1.0, moment_k=4.0, G_k=3.0, random_state=seed)
    out = {}
    if where == "serial":
        data = make(n, d, seed, loss)
        floor = float("inf")
        for _ in range(3):  # the fastest of three passes: no first-call overhead in the floor
            t0 = time.perf_counter()
            out["floor_value"] = floor_pass(data, probe, loss)
            floor = min(floor, time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = cvxdp.PrivateProblem(model).solve(data, **kwargs)
        out["seconds"] = time.perf_counter() - t0
    else:
        from distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                          memory_limit=0) as cl, Client(cl) as client:
            sizes = [min(part_rows, n - a) for a in range(0, n, part_rows)]
            parts = [client.submit(make, s, d, seed * 1000 + i, loss, pure=False)
                     for i, s in enumerate(sizes)]
            client.wait_for_workers(2)
            floor = float("inf")
            for _ in range(3):  # one pass over the same partitions, where they are
                t0 = time.perf_counter()
                out["floor_value"] = sum(client.gather(client.map(floor_pass, parts, probe=probe, loss=loss,
                                                                  pure=False)))
                floor = min(floor, time.perf_counter() - t0)
            t0 = time.perf_counter()
            res = cvxdp.PrivateProblem(model).solve(parts, executor=cvxdp.DaskExecutor(client), **kwargs)
            out["seconds"] = time.perf_counter() - t0
            peaks = client.run(lambda: __import__("resource").getrusage(
                __import__("resource").RUSAGE_SELF).ru_maxrss)
            out["worker_peak_mib"] = max(peaks.values()) / 1024.0
            out["partitions"] = len(sizes)
    out["floor_seconds"] = floor
    out["driver_peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out["epsilon_spent"] = res.ledger.spent
    print(json.dumps(out))
""")

_BASELINES = textwrap.dedent("""
    import json, sys, time, warnings
    import numpy as np
    warnings.simplefilter("ignore")
    data = np.load(sys.argv[1])
    X, y = data["X"], data["y"]
    out = {}
    from sklearn.svm import LinearSVC
    t0 = time.perf_counter()
    LinearSVC().fit(X, y)
    out["linearsvc_seconds"] = time.perf_counter() - t0
    try:
        from diffprivlib.models import LogisticRegression
    except ImportError as exc:
        out["diffprivlib_error"] = str(exc)
    else:
        t0 = time.perf_counter()
        LogisticRegression(epsilon=1.0, data_norm=float(np.linalg.norm(X, axis=1).max())).fit(X, y)
        out["diffprivlib_seconds"] = time.perf_counter() - t0
    print(json.dumps(out))
""")


def _run(code: str, args: list[str], python: str = sys.executable) -> dict:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    done = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        return {"error": " | ".join(tail) or f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def fit_row(loss: str, n: int, d: int, where: str, seed: int = 0, part_rows: int = PART_ROWS) -> dict:
    row = {"loss": loss, "n": n, "d": d, "where": where}
    row.update(_run(_FIT, [loss, str(n), str(d), where, str(seed), str(part_rows)]))
    if "seconds" in row and row.get("floor_seconds"):
        row["ratio"] = row["seconds"] / row["floor_seconds"]
    return row


def _baseline_python(env_dir: str) -> str:
    python = os.path.join(env_dir, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", env_dir], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "diffprivlib==0.6.6", "scikit-learn<1.8"],
                       check=True)
    return python


def baseline_row(n: int, d: int, env_dir: str, seed: int = 0) -> dict:
    """diffprivlib's LogisticRegression and LinearSVC on the rows of cvxdp's serial hinge fit (the same
    generator and seed as ``_FIT``), each in a fresh process of the diffprivlib environment."""
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.standard_t(3, size=(n, d))
    y = X @ (np.random.default_rng(12345).normal(size=d) / np.sqrt(d)) + rng.standard_t(3, size=n)
    y = np.where(y > 0, 1.0, -1.0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.npz")
        np.savez(path, X=X, y=y)
        return {"n": n, "d": d, **_run(_BASELINES, [path], _baseline_python(env_dir))}


#: Interleaved pairs (a cvxdp fit, then the baselines) the comparison takes the median over.
COMPARE_PAIRS = 3


def compare_with_baselines(n: int, d: int, env_dir: str, pairs: int = COMPARE_PAIRS) -> dict:
    """cvxdp's serial hinge fit against diffprivlib's LogisticRegression and LinearSVC on the same rows.

    This machine's speed drifts by 2–4× within minutes, and not equally for both sides (cvxdp's many
    numpy passes slow more than diffprivlib's few BLAS calls), so one measurement of each, minutes
    apart, gave ratios from 7× to 14× for the same code.  Each pair runs both back to back, each in a
    fresh process; the ratio reported is the median of the pairs' ratios (and the times the medians
    of theirs)."""
    out: dict = {"n": n, "d": d, "pairs": []}
    for _ in range(pairs):
        mine = fit_row("hinge", n, d, "serial")
        base = baseline_row(n, d, env_dir)
        pair = {"cvxdp_seconds": mine.get("seconds"),
                **{k: v for k, v in base.items() if k not in ("n", "d")}}
        if "error" in mine:
            pair["cvxdp_error"] = mine["error"]
        if "diffprivlib_seconds" in base and "seconds" in mine:
            pair["cvxdp_over_diffprivlib"] = mine["seconds"] / base["diffprivlib_seconds"]
            pair["cvxdp_over_linearsvc"] = mine["seconds"] / base["linearsvc_seconds"]
        out["pairs"].append(pair)
    for key in ("cvxdp_seconds", "diffprivlib_seconds", "linearsvc_seconds", "cvxdp_over_diffprivlib",
                "cvxdp_over_linearsvc"):
        values = [p[key] for p in out["pairs"] if isinstance(p.get(key), float)]
        if len(values) == pairs:
            out[key] = float(statistics.median(values))
    errors = [p.get("diffprivlib_error") or p.get("cvxdp_error") for p in out["pairs"]]
    if any(errors):
        out["error"] = next(e for e in errors if e)
    return out


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _sci(x: float) -> str:
    """``3.2·10³``-style figures for the ratio column."""
    if not (x > 0 and math.isfinite(x)):
        return "–"
    e = math.floor(math.log10(x))
    return f"{x / 10**e:.1f}·10{str(e).translate(_SUPERSCRIPT)}"


def _rows_label(n: int) -> str:
    """``10⁶`` for a power of ten, else ``1,500``."""
    e = round(math.log10(n)) if n > 0 else 0
    return f"10{str(e).translate(_SUPERSCRIPT)}" if 10**e == n else f"{n:,}"


def markdown_table(rows: list[dict]) -> str:
    """The README's table: one line per fit measured (failed fits say so)."""
    names = {"absolute": "LAD", "hinge": "hinge"}
    lines = ["| loss | n | where | seconds | driver peak | worker peak | floor | ratio to floor |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        where = "serial" if r["where"] == "serial" else "2-worker LocalCluster"
        n = _rows_label(r["n"])
        if "error" in r:
            lines.append(f"| {names[r['loss']]} | {n} | {where} | failed: {r['error']} | | | | |")
            continue
        worker = f"{r['worker_peak_mib']:.0f} MiB" if "worker_peak_mib" in r else ""
        secs = f"{r['seconds']:.3g}" if r["seconds"] < 100 else f"{r['seconds']:.1f}"
        lines.append(f"| {names[r['loss']]} | {n} | {where} | {secs} | {r['driver_peak_mib']:.0f} MiB | "
                     f"{worker} | {r['floor_seconds']:.2g} s | {_sci(r.get('ratio', float('nan')))} |")
    return "\n".join(lines)


def targets(rows: list[dict], comparison: dict | None) -> list[dict]:
    """Each target of the scale-out issue met by the rows measured (when they were run): its ratio to the
    target (≤ 1 meets it) and a line of text."""
    def find(loss, where, n):
        key = (loss, where, n)
        return next((r for r in rows if (r["loss"], r["where"], r["n"]) == key and "seconds" in r), None)

    out = []

    def add(name, value, limit, unit):
        out.append({"target": name, "value": value, "limit": limit, "ratio": value / limit,
                    "text": f"{name}: {value:.3g} {unit} vs {limit:g} {unit} (ratio {value / limit:.2f})"})

    lad6 = find("absolute", "serial", 1_000_000)
    if lad6:
        add("serial LAD fit, n = 10^6, time", lad6["seconds"], 60.0, "s")
        add("serial LAD fit, n = 10^6, peak memory", lad6["driver_peak_mib"], 2048.0, "MiB")
    for loss in ("absolute", "hinge"):
        big, mid = find(loss, "cluster", 10_000_000), find(loss, "cluster", 1_000_000)
        if big:
            add(f"cluster {loss} fit, n = 10^7, driver peak", big["driver_peak_mib"], 1024.0, "MiB")
            add(f"cluster {loss} fit, n = 10^7, worker peak", big["worker_peak_mib"], 4096.0, "MiB")
        if big and mid:
            exponent = math.log(big["seconds"] / mid["seconds"]) / math.log(10.0)
            add(f"cluster {loss} fit, time exponent 10^6 → 10^7", exponent, 1.1, "")
    if comparison and "cvxdp_over_diffprivlib" in comparison:
        add("hinge fit, n = 10^5, over diffprivlib's time (median of interleaved pairs)",
            comparison["cvxdp_over_diffprivlib"], 5.0, "×")
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--cluster-sizes", type=int, nargs="+", default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--d", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="n = 2000, serial and cluster, no comparison")
    parser.add_argument("--compare-n", type=int, default=100_000, help="rows of the diffprivlib comparison")
    parser.add_argument("--compare-pairs", type=int, default=COMPARE_PAIRS,
                        help="interleaved (cvxdp, baselines) pairs of the comparison; the median is reported")
    parser.add_argument("--diffprivlib-env", type=str, default=None,
                        help="a virtual environment with diffprivlib 0.6.6 (built there if missing)")
    parser.add_argument("--json", type=str, default=None, help="write all figures to this file")
    args = parser.parse_args(argv)
    sizes, cluster = ([2000], [2000]) if args.quick else (args.sizes, args.cluster_sizes)
    part_rows = 1000 if args.quick else PART_ROWS
    rows = []
    for loss in ("absolute", "hinge"):
        for where, ns in (("serial", sizes), ("cluster", cluster)):
            for n in ns:
                row = fit_row(loss, n, args.d, where, part_rows=part_rows)
                rows.append(row)
                if "error" in row:
                    print(f"{loss:8s} n={n:>8d} {where:7s}: failed: {row['error']}", flush=True)
                    continue
                peak = row.get("worker_peak_mib")
                worker = "" if peak is None else f", worker peak {peak:6.0f} MiB"
                print(f"{loss:8s} n={n:>8d} {where:7s}: {row['seconds']:8.2f} s, driver peak "
                      f"{row['driver_peak_mib']:6.0f} MiB{worker}, floor {row['floor_seconds']:.4f} s, "
                      f"ratio {row['ratio']:.0f}", flush=True)
    result: dict = {"benchmark": "scale", "rows": rows, "python": platform.python_version(),
                    "machine": platform.machine(), "cpus": os.cpu_count()}
    if args.diffprivlib_env and not args.quick:
        n = args.compare_n
        base = compare_with_baselines(n, args.d, args.diffprivlib_env, args.compare_pairs)
        for pair in base["pairs"]:
            if "cvxdp_over_diffprivlib" in pair:
                print(f"hinge n={n}: cvxdp {pair['cvxdp_seconds']:.2f} s, diffprivlib LogisticRegression "
                      f"{pair['diffprivlib_seconds']:.2f} s (ratio {pair['cvxdp_over_diffprivlib']:.1f}), "
                      f"LinearSVC {pair['linearsvc_seconds']:.2f} s "
                      f"(ratio {pair['cvxdp_over_linearsvc']:.1f})")
        if "cvxdp_over_diffprivlib" in base:
            print(f"hinge n={n}: median of {len(base['pairs'])} pairs: "
                  f"{base['cvxdp_over_diffprivlib']:.1f}× diffprivlib, "
                  f"{base['cvxdp_over_linearsvc']:.1f}× LinearSVC")
        else:
            print(f"comparison skipped: {base.get('error', base)}")
        result["comparison"] = base
    result["targets"] = targets(rows, result.get("comparison"))
    for line in result["targets"]:
        print(line["text"])
    table = markdown_table(rows)
    print(table)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    if not args.quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "scale.json").write_text(json.dumps(result, indent=2))
        lines = [line["text"] for line in result["targets"]]
        (RESULTS / "scale.md").write_text(table + "\n\n" + "\n".join(f"- {t}" for t in lines) + "\n")
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    print(f"ratio {max(ratios):.0f} (private fit / numpy floor, largest)" if ratios else "ratio n/a")
    return result


if __name__ == "__main__":
    main()
