"""The benchmark scripts run in quick mode and report what they measured (no timing asserts)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_oracle_benchmark_quick(tmp_path, capsys):
    out = tmp_path / "oracle.json"
    result = _load("bench_oracle").main(["--quick", "--json", str(out)])
    assert json.loads(out.read_text())["m"] == result["m"] == 2000
    assert result["max_bracket"] <= 1e-9
    assert result["ratio"] > 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("ratio ")


def test_private_fit_benchmark_quick(tmp_path, capsys):
    out = tmp_path / "fit.json"
    result = _load("bench_private_fit").main(["--quick", "--json", str(out)])
    assert [r["n"] for r in result["rows"]] == [2000, 8000]
    assert all(r["epsilon_spent"] <= 1.0 + 1e-12 for r in result["rows"])
    assert all(0.0 < r["plan_share"] < 1.0 for r in result["rows"])
    assert "growth_exponent" in json.loads(out.read_text())
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("ratio ")


def test_audit_benchmark_quick(tmp_path):
    out, table = tmp_path / "audit.json", tmp_path / "audit.md"
    result = _load("bench_audit").main(["--quick", "--json", str(out), "--markdown", str(table)])
    assert result["all_sound_within_claim"] and result["broken_mechanism_detected"]
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(len(r["refusals_per_side"]) == 2 for r in rows)
    text = table.read_text()
    assert text.count("\n| ") == len(rows) + 1 and "deliberately broken" in text


def test_utility_benchmark_quick_orders_cvxdp_below_clipped_output_perturbation(tmp_path, capsys):
    """High-leverage tail, n = 10^5, d = 10, ε = 1: one-shot clipping at the public rule's C = G₂
    keeps a bias floor that cvxdp's moment-calibrated localization does not; the gap is a factor
    of about 2–3, which holds on every seed."""
    out = tmp_path / "utility.json"
    result = _load("bench_utility").main(["--quick", "--json", str(out)])
    assert len(result["cells"]) == 3
    assert all(c["n"] == 100_000 and c["epsilon"] == 1.0 for c in result["cells"])
    assert result["cvxdp_below_op_every_seed"], result["op_over_cvxdp"]
    assert json.loads(out.read_text())["op_over_cvxdp"] == result["op_over_cvxdp"]
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("op/cvxdp")


def test_the_lower_bound_family_keeps_G_k_at_one_and_the_centre_at_the_rate():
    """``p = c d/(nε)``, ``a = p^(−1/k)``: ``G_k = a p^(1/k) = 1`` at every n and the centre's excess
    ``p a = (c d/n)^(1−1/k)`` — the rate's private term, exactly; a cell of the study reports the
    three methods and the tight profile's bound, which bounds cvxdp's excess there."""
    bench = _load("bench_utility")
    for k in (2.5, 4.0, 8.0):
        for n in (1_000, 100_000):
            task = bench.make_task("lower-bound", n, 0, k)
            assert abs(task.G(k) - 1.0) < 1e-12
            p = bench.LOWER_BOUND_C * bench.D_FEATURES / n
            assert np.isclose(task.excess_risk(np.zeros(task.d)), p ** (1.0 - 1.0 / k), rtol=1e-12)
    cell = bench.run_cell({"study": "lower-bound", "instance": "lower-bound", "n": 1000, "epsilon": 1.0,
                           "seed": 0, "k": 4.0, "methods": (bench.CVXDP, bench.OP_RULE, bench.TRIVIAL)})
    assert set(cell["excess"]) == {bench.CVXDP, bench.OP_RULE, bench.TRIVIAL}
    assert all(v >= -1e-12 for v in cell["excess"].values())
    assert cell["excess"][bench.CVXDP] <= cell["bound"]


def test_the_lower_bound_study_runs_the_affine_plan_and_tables_its_bound():
    """The default on the family's affine loss is the affine plan (its clip level is the plan's rule, one
    release); the cell carries that plan's public bound on the expected excess, and the tables list it."""
    from cvxdp.plan.mean_gradient import plan_mean_gradient

    bench = _load("bench_utility")
    spec = {"study": "lower-bound", "instance": "lower-bound", "n": 1000, "epsilon": 1.0, "seed": 0, "k": 4.0,
            "methods": (bench.CVXDP,)}
    cell = bench.run_cell(spec)
    plan = plan_mean_gradient(1000, 10, 1.0, 4.0, 1.0)
    assert cell["params"][bench.CVXDP] == {"C_first": plan.C, "releases": 1}
    task = bench.make_task("lower-bound", 1000, 0, 4.0)
    assert cell["affine_bound"] == plan.bound(4.0, 1.0, task.G(2.0), 2.0)
    assert 0.0 <= cell["excess"][bench.CVXDP] <= cell["affine_bound"]
    summary = bench.summarize([cell])
    assert summary["lower_bound"] == [{"k": 4.0, "n": 1000, "bound": cell["bound"],
                                       "affine_bound": cell["affine_bound"]}]
    text = bench.markdown(summary, [], {}, [], {"machine": "m", "seeds": 1, "minutes": 0.0},
                          bench.lower_bound_targets(summary))
    assert f"| affine plan's bound (expected excess) | {cell['affine_bound']:.2g} |" in text


def test_the_crossed_study_runs_the_affine_plan_against_the_noisy_mean_and_tables_it():
    """``--studies lower-bound-crossed``: k = 4, the five sizes, cvxdp, the noisy clipped mean and w = 0 on
    the crossed variant (its own table, after the lower-bound ones; no tight-profile bound of its own)."""
    bench = _load("bench_utility")
    specs = bench.specs_full(2, ("lower-bound-crossed",))
    assert len(specs) == 10 and {(sp["study"], sp["instance"], sp["k"], sp["methods"]) for sp in specs} == {
        ("lower-bound-crossed", "lower-bound-crossed", 4.0, (bench.CVXDP, bench.NOISY_MEAN, bench.TRIVIAL))}
    task = bench.make_task("lower-bound-crossed", 1000, 0, 4.0)
    assert task.meta["q"] == bench.LOWER_BOUND_CROSS[0]
    cell = bench.run_cell({**specs[0], "n": 1000, "seed": 0})
    assert set(cell["excess"]) == {bench.CVXDP, bench.NOISY_MEAN, bench.TRIVIAL} and "bound" not in cell
    assert cell["excess"][bench.CVXDP] < cell["excess"][bench.TRIVIAL]
    lb = bench.run_cell({"study": "lower-bound", "instance": "lower-bound", "n": 1000, "epsilon": 1.0,
                         "seed": 0, "k": 4.0, "methods": (bench.CVXDP,)})
    summary = bench.summarize([lb, cell])
    text = bench.markdown(summary, [], {}, [], {"machine": "m", "seeds": 1, "minutes": 0.0},
                          bench.lower_bound_targets(summary))
    table = text[text.index("| crossed, k = 4 |"):]
    assert f"| {bench.NOISY_MEAN} | " in table and f"| {bench.CVXDP} | " in table


def test_erm_solver_benchmark_quick(tmp_path, capsys):
    out = tmp_path / "erm.json"
    result = _load("bench_erm_solvers").main(["--quick", "--json", str(out)])
    assert [(r["loss"], r["n"]) for r in result["rows"]] == [("absolute", 2000), ("hinge", 2000)]
    assert all(r["conic_gap_over_alpha"] <= 1.0 and r["bundle_gap_over_alpha"] <= 1.0 for r in result["rows"])
    assert json.loads(out.read_text())["benchmark"] == "erm_solvers"
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("ratio ")


def test_scale_benchmark_quick(tmp_path, capsys):
    """Serial and 2-worker LocalCluster fits in fresh processes: each releases, spends at most ε, and is
    timed against a numpy pass over the same rows."""
    out = tmp_path / "scale.json"
    result = _load("bench_scale").main(["--quick", "--json", str(out)])
    rows = result["rows"]
    assert [(r["loss"], r["where"]) for r in rows] == [("absolute", "serial"), ("absolute", "cluster"),
                                                        ("hinge", "serial"), ("hinge", "cluster")]
    assert all("error" not in r and r["epsilon_spent"] <= 1.0 and r["ratio"] > 1.0 for r in rows)
    assert all(r["worker_peak_mib"] > 0 for r in rows if r["where"] == "cluster")
    assert json.loads(out.read_text())["benchmark"] == "scale"
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1].startswith("ratio ")
    table = [line for line in printed if line.startswith("| LAD |") or line.startswith("| hinge |")]
    assert len(table) == 4 and all("failed" not in line for line in table)  # the README's table, per fit


def test_selection_benchmark_quick(capsys):
    """The selection study's cells run (one synthetic, one real) and each reports every method."""
    rows = _load("bench_selection").main(["--quick"])
    assert {r["study"] for r in rows} == {"synthetic", "real"}
    for r in rows:
        assert all(np.isfinite(v) for v in r["median"].values())
        assert r["chosen"][0] in {"cvxdp", "clipped OP", "prior"}
    assert "selection" in capsys.readouterr().out


def test_large_real_benchmark_quick(capsys):
    """One subsampled cell of the large real data sets: every method's excess test loss and the ratio."""
    rows = _load("bench_large_real").main(["--quick"])
    assert len(rows) == 1 and rows[0]["n"] == 1000
    excess = rows[0]["excess"]
    assert {"cvxdp", "cvxdp, features as given", "clipped OP (public rule)", "noisy clipped GD (public rule)",
            "w = 0"} <= set(excess)
    assert all(np.isfinite(v) for v in excess.values()) and rows[0]["cvxdp_over_best_baseline"] > 0
    assert "cvxdp/best baseline" in capsys.readouterr().out


def test_the_real_protocol_draws_its_noise_apart_from_the_split():
    """The split comes from ``default_rng(seed)``; the noise seed is spawned from it, so the noise
    stream does not replay the split's bits (it did when both used the same integer)."""
    bench = _load("bench_utility")
    seeds = [bench.real_noise_seed(s) for s in range(50)]
    assert seeds == [bench.real_noise_seed(s) for s in range(50)]  # reproducible
    assert len(set(seeds)) == 50 and all(0 <= t < 2**63 for t in seeds)
    for s, t in enumerate(seeds):
        split, noise = np.random.default_rng(s).random(64), np.random.default_rng(t).random(64)
        assert t != s and not np.any(split == noise)


def test_a_methods_rerun_replaces_only_those_methods_figures():
    """``bench_utility --methods``: the rerun methods' figures (and a lower-bound cell's bound) replace
    the kept ones cell by cell; every other method's stay; a rerun cell with no counterpart refuses."""
    bench = _load("bench_utility")
    key = {"study": "n", "instance": "high-leverage", "n": 1000, "epsilon": 1.0, "seed": 0, "k": 4.0}
    cv, op = bench.CVXDP, bench.OP_RULE
    kept = [{**key, "excess": {cv: 1.0, op: 2.0}, "seconds": {cv: 5.0, op: 1.0},
             "params": {cv: {}, op: {"C": 1.0}}},
            {**key, "seed": 1, "excess": {cv: 3.0}, "seconds": {cv: 1.0}, "params": {cv: {}}}]
    new = [{**key, "excess": {cv: 0.5}, "seconds": {cv: 2.0}, "params": {cv: {"x": 1}}}]
    merged = bench.merge_methods(kept, new, {bench.CVXDP})
    assert merged[0]["excess"] == {bench.CVXDP: 0.5, bench.OP_RULE: 2.0}
    assert merged[0]["params"][bench.OP_RULE] == {"C": 1.0} and merged[1] == kept[1]
    with pytest.raises(SystemExit):
        bench.merge_methods(kept, [{**new[0], "seed": 7}], {bench.CVXDP})
    # a lower-bound cell's bounds come with the rerun (the affine plan's is new in a rerun cell)
    lb = {**key, "study": "lower-bound", "instance": "lower-bound"}
    kept = [{**lb, "excess": {cv: 1.0, op: 2.0}, "seconds": {}, "params": {}, "bound": 3.0}]
    new = [{**lb, "excess": {cv: 0.5}, "seconds": {}, "params": {}, "bound": 3.5, "affine_bound": 0.7}]
    [merged] = bench.merge_methods(kept, new, {bench.CVXDP})
    assert (merged["bound"], merged["affine_bound"], merged["excess"]) == (3.5, 0.7, {cv: 0.5, op: 2.0})


def test_a_studies_rerun_keeps_the_record_of_earlier_method_reruns():
    """``--studies X`` replaces X's cells; an earlier ``--methods`` rerun stays in the header for the
    studies it touched that X did not, and one wholly inside X is dropped."""
    bench = _load("bench_utility")
    reruns = [{"methods": ["cvxdp"], "studies": ["n", "ceiling"], "minutes": 2.0, "date": "2026-12-03"},
              {"methods": ["cvxdp"], "studies": ["ceiling"], "minutes": 1.0, "date": "2026-12-04"}]
    assert bench.kept_reruns(reruns, ("ceiling",)) == [{**reruns[0], "studies": ["n"]}]
    assert bench.kept_reruns(reruns, ("k",)) == reruns


def test_the_ceiling_is_counted_only_from_its_own_parts():
    """A ceiling figure left in an ``n`` cell by an older run is dropped (with its seconds and
    parameters); the ceiling parts' figures and every other method's stay untouched."""
    bench = _load("bench_utility")
    key = {"study": "n", "instance": "high-leverage", "n": 1000, "epsilon": 1.0, "seed": 0, "k": 4.0}
    cv, ce = bench.CVXDP, bench.CVXDP_CEILING
    stray = {**key, "excess": {cv: 1.0, ce: 0.5}, "seconds": {cv: 1.0, ce: 9.0},
             "params": {cv: {}, ce: {"C": 1.0}}}
    own = {**key, "part": "ceiling", "excess": {ce: 0.5}, "seconds": {ce: 9.0}, "params": {ce: {"C": 1.0}}}
    lower = {**key, "study": "lower-bound", "part": "lower-bound-ceiling", "excess": {ce: 0.1},
             "seconds": {ce: 1.0}, "params": {ce: {}}}
    cleaned = bench.without_stray_ceilings([stray, own, lower])
    assert cleaned[0]["excess"] == {cv: 1.0} and cleaned[0]["seconds"] == {cv: 1.0}
    assert cleaned[0]["params"] == {cv: {}} and stray["excess"][ce] == 0.5  # the input is not mutated
    assert cleaned[1:] == [own, lower]
    rows = bench.summarize([stray, own, lower])["rows"]  # the tables count the grid once
    assert [r["seeds"] for r in rows if r["method"] == ce and r["study"] == "n"] == [1]


def test_the_lower_bound_ceiling_is_its_own_part_and_is_tabled():
    """``--studies lower-bound-ceiling`` plans the ceiling alone on every (k, n, seed) of the lower-bound
    study, filed under that study; only the study's own cells carry the tight-profile bound; and the
    lower-bound tables list the ceiling's row."""
    bench = _load("bench_utility")
    specs = bench.specs_full(1, ("lower-bound-ceiling",))
    assert len(specs) == 15 and {(sp["study"], sp["part"], sp["methods"]) for sp in specs} == {
        ("lower-bound", "lower-bound-ceiling", (bench.CVXDP_CEILING,))}
    spec = {"study": "lower-bound", "instance": "lower-bound", "n": 1000, "epsilon": 1.0, "seed": 0, "k": 4.0,
            "methods": ()}
    assert "bound" in bench.run_cell(spec)
    assert "bound" not in bench.run_cell({**spec, "part": "lower-bound-ceiling"})
    key = {"study": "lower-bound", "instance": "lower-bound", "n": 1000, "epsilon": 1.0, "seed": 0, "k": 4.0}
    cells = [{**key, "excess": {bench.CVXDP: 0.04}, "seconds": {}, "params": {}, "bound": 1.0},
             {**key, "part": "lower-bound-ceiling", "excess": {bench.CVXDP_CEILING: 0.002}, "seconds": {},
              "params": {}}]
    summary = bench.summarize(cells)
    text = bench.markdown(summary, [], {}, [], {"machine": "m", "seeds": 1, "minutes": 0.0},
                          bench.lower_bound_targets(summary))
    table = text[text.index("| k = 4 |"):]
    assert f"| {bench.CVXDP_CEILING} | 0.002" in table and "| tight-profile bound | 1 |" in table


def test_a_studies_run_replaces_its_parts_and_keeps_the_rest():
    """``--studies X``: X's parts are replaced (the lower-bound ceiling apart from the lower-bound study),
    the real data and the times and reruns of the studies X did not replace are kept."""
    bench = _load("bench_utility")
    key = {"study": "lower-bound", "instance": "lower-bound", "n": 1000, "epsilon": 1.0, "seed": 0, "k": 4.0,
           "seconds": {}, "params": {}}
    study = {**key, "excess": {bench.CVXDP: 1.0}}
    old_ceiling = {**key, "part": "lower-bound-ceiling", "excess": {bench.CVXDP_CEILING: 9.0}}
    new_ceiling = {**old_ceiling, "excess": {bench.CVXDP_CEILING: 0.5}}
    kept = {"cells": [study, old_ceiling], "real": [{"r": 1}],
            "meta": {"minutes": 3.0, "minutes_by_studies": {"lower-bound,lower-bound-ceiling": 3.0},
                     "reruns": [{"methods": ["cvxdp"], "studies": ["lower-bound"], "minutes": 1.0,
                                 "date": "d"}]}}
    meta = {"machine": "m", "seeds": 1, "minutes": 0.0, "minutes_by_studies": {"lower-bound-ceiling": 2.0}}
    cells, real, merged = bench.replace_studies(kept, [new_ceiling], [], ("lower-bound-ceiling",), meta)
    assert cells == [study, new_ceiling] and real == [{"r": 1}]
    assert merged["minutes_by_studies"] == {"lower-bound-ceiling": 2.0, "lower-bound": 3.0}
    assert merged["reruns"] == kept["meta"]["reruns"]
    assert meta["minutes_by_studies"] == {"lower-bound-ceiling": 2.0}  # the caller's meta is not mutated


def test_the_noisy_mean_runs_on_the_lower_bound_family_as_the_linear_minimizer_and_is_tabled():
    """Every lower-bound spec runs the noisy clipped mean; its point is −R m̃/||m̃|| for the mechanism's
    released mean m̃ (same seed) — one step of noisy clipped GD leaves the ball; its row is tabled."""
    from cvxdp.baselines import noisy_clipped_gd
    from cvxdp.baselines.noisy_gd import clip_rows, clipped_mean, gd_sensitivity
    from cvxdp.privacy.mechanisms import L2LaplaceMechanism
    from cvxdp.privacy.random import noise_source

    bench = _load("bench_utility")
    specs = bench.specs_full(1, ("lower-bound",))
    assert len(specs) == 15 and all(bench.NOISY_MEAN in sp["methods"] for sp in specs)
    assert bench.METHOD_KEYS["noisy-mean"] == bench.NOISY_MEAN
    for seed in range(3):
        task = bench.make_task("lower-bound", 1000, 1000 + seed, 4.0)
        model, _ = bench.make_model("lower-bound", task)
        G2, n, d = task.G(2.0), task.X_train.shape[0], task.d
        step = bench.linear_minimizer_step(n, 1.0, model.diameter, G2)
        w = noisy_clipped_gd(model, {"x": task.X_train, "y": task.y_train}, epsilon=1.0, C=G2, steps=1,
                             step_size=step, random_state=seed).w
        mech = L2LaplaceMechanism(gd_sensitivity(G2, n), 1.0, d)
        m = mech.release(clipped_mean(clip_rows(task.X_train, G2)), noise_source(seed, warn=False),
                         (np.full(d, -G2), np.full(d, G2)))
        np.testing.assert_allclose(w, -task.radius * m / np.linalg.norm(m), atol=1e-12)
    key = {"study": "lower-bound", "instance": "lower-bound", "n": 1000, "epsilon": 1.0, "seed": 0, "k": 4.0}
    cells = [{**key, "excess": {bench.CVXDP: 0.04, bench.NOISY_MEAN: 0.0015}, "seconds": {}, "params": {},
              "bound": 1.0}]
    summary = bench.summarize(cells)
    text = bench.markdown(summary, [], {}, [], {"machine": "m", "seeds": 1, "minutes": 0.0},
                          bench.lower_bound_targets(summary))
    assert f"| {bench.NOISY_MEAN} | 0.0015" in text[text.index("| k = 4 |"):]


def test_bias_slack_benchmark_quick_orders_the_bounds(capsys):
    """The measured displacement lies below the sum bound (λ-strong convexity and each row's subgradient
    moving by at most (A_i − C)₊, up to both minimizers' certified accuracy) and below the planned bias
    radius; the cancellation quantity lies below the sum bound (the triangle inequality); and clipping
    does move the minimizer where rows are clipped — the bounds are not compared with zeros."""
    (result,) = _load("bench_bias_slack").main(["--quick"])
    for row in result["rows"]:
        assert max(row["gaps"]) <= 1e-9
        assert row["displacement"] <= row["sum_bound"] + row["accuracy"]
        assert row["displacement"] <= row["planned_bias_radius"]
        assert row["cancellation"] <= row["sum_bound"] * (1 + 1e-12) + 1e-15
    assert result["rows"][0]["clipped_share"] > 0.01 and result["rows"][0]["displacement"] > 1e-3
    assert "× the displacement" in capsys.readouterr().out


def test_large_real_render_marks_every_cell_where_cvxdp_is_behind(tmp_path, monkeypatch):
    """The README's large-real tables come from the summary rows: the full-size ε = 1 table, a ratio per
    (size, ε) cell ordered by size (numerically, full last) and then ε, bold exactly where cvxdp is
    behind (a tie is not bold and not ahead), "–" for a cell not run, "n/a" where no baseline excess is
    positive, and the count of cells ahead; ``update_readme`` touches only the text between the markers."""
    bench = _load("bench_large_real")

    def row(task, size, eps, cvx, op, gd):
        best = min(op, gd)
        return {"task": task, "size": size, "n": 100 if size != "full" else 5000, "epsilon": eps, "seeds": 5,
                "excess": {"cvxdp": cvx, "clipped OP (public rule)": op, "noisy clipped GD (public rule)": gd,
                           "w = 0": 1.0}, "cvxdp_over_best_baseline": cvx / best if best > 0 else None}

    rows = [row("CPSSW8 τ=0.9", "full", 1.0, 0.01, 0.02, 0.04),
            row("CPSSW8 τ=0.9", "10000", 1.0, 0.02, 0.02, 0.5),     # a tie
            row("CPSSW8 τ=0.9", "1000", 1.0, 0.03, 0.02, 0.5),      # behind
            row("CPSSW8 τ=0.9", "1000", 0.3, 0.0199, 0.02, 0.5),    # a narrow lead
            row("Fertility hinge", "full", 1.0, 0.001, 0.01, 0.02),
            row("Fertility hinge", "10000", 1.0, 0.001, 0.0, 0.02),  # no positive baseline excess
            row("Fertility hinge", "300", 1.0, 0.05, 0.1, 0.2),
            row("Fertility hinge", "full", 0.3, 0.004, 0.01, 0.02)]
    text = bench.render(rows)
    assert ("| task | 300, ε = 1 | 10³, ε = 0.3 | 10³, ε = 1 | 10⁴, ε = 1 | full, ε = 0.3 | full, ε = 1 |"
            in text)
    assert "| CPSSW8, τ = 0.9 | 5,000 | 0.01 | – | 0.02 | 0.04 | 0.50 |" in text  # no as-given figure: "–"
    assert "| CPSSW8, τ = 0.9 | – | 0.995† | **1.50**† | 1.000† | – | 0.50† |" in text
    assert "† measured before the estimators centred" in text
    assert "| Fertility, hinge on worked for pay | 0.50† | – | – | n/a† | 0.40† | 0.10† |" in text
    fresh = [{**r, "excess": {**r["excess"], "cvxdp, features as given": 0.5}} for r in rows]
    assert "†" not in bench.render(fresh)
    assert "ahead in 5 of 7 cells (1 more with no positive baseline excess)" in text and "5 splits" in text
    assert bench.render([]).startswith("No results yet")
    readme = tmp_path / "README.md"
    start, end = bench.MARKERS
    readme.write_text(f"before\n{start}\nold\n{end}\nafter\n")
    monkeypatch.setattr(bench, "README", readme)
    assert bench.update_readme(text)
    assert readme.read_text() == f"before\n{start}\n{text}\n{end}\nafter\n"
    readme.write_text("no markers\n")
    assert not bench.update_readme(text) and readme.read_text() == "no markers\n"


def test_large_real_results_elsewhere_leave_the_readme_and_the_main_results_alone(tmp_path, monkeypatch):
    """``--results FILE`` (a check with more splits, say) writes its cells there and redraws no README
    table; the default file is not read or written."""
    from concurrent.futures import ThreadPoolExecutor

    bench = _load("bench_large_real")

    def fake(spec):
        loss = {"cvxdp": 1.0, "cvxdp, features as given": 1.0, "clipped OP (public rule)": 2.0,
                "noisy clipped GD (public rule)": 3.0, "non-private ERM": 0.5, "w = 0": 4.0}
        return {"task": spec["task"], "size": spec["n"], "n": 1000, "epsilon": spec["epsilon"],
                "seed": spec["seed"], "test_loss": loss}

    monkeypatch.setattr(bench, "run", fake)
    monkeypatch.setattr(bench, "ProcessPoolExecutor", ThreadPoolExecutor)
    monkeypatch.setattr(bench, "RESULTS", tmp_path / "untouched")
    monkeypatch.setattr(bench, "update_readme", lambda text: pytest.fail("the README was redrawn"))
    out = tmp_path / "check.json"
    rows = bench.main(["--tasks", "CPSSW8 LAD", "--sizes", "1000", "--epsilons", "0.3", "--seeds", "15",
                       "--results", str(out)])
    saved = json.loads(out.read_text())
    assert len(saved["cells"]) == 15 and rows[0]["seeds"] == 15
    assert rows[0]["cvxdp_over_best_baseline"] == 1 / 3
    assert not (tmp_path / "untouched").exists()


def test_tail_spurious_benchmark_quick_counts_what_the_rule_drops(capsys):
    """The quick run releases the same noise draws with and without the lone-bin rule: the rule never wrecks
    more releases than its absence does, and it changes only a few estimates (it post-processes lone
    counts, not the bulk)."""
    (row,) = _load("bench_tail_spurious").main(["--quick"])
    assert row["releases"] == 200 and row["median_G4"] > 0
    assert row["wrecked"]["with the rule"] <= row["wrecked"]["without it"]
    assert row["changed"] <= 0.1
    assert "wrecked without the rule" in capsys.readouterr().out
