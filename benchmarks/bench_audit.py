"""Privacy audit at scale: the ε lower bound of each mechanism next to its claim.

For every mechanism and every neighbour construction of :mod:`cvxdp.audit`
(an extreme outlier, a push onto the domain's boundary, huge features) the
mechanism runs ``--runs`` times per side on a small problem (LAD, d = 1, n = 40),
and a held-out threshold test turns the counts into a 95% Clopper–Pearson lower
bound on ε.  Mechanisms: cvxdp's extension output perturbation under both
profiles, a deliberately broken copy (noise × 0.25, which the audit must catch),
the full population-localization pipeline as a black box (fewer runs: it re-solves
every time), and the pure-DP baselines of :mod:`cvxdp.baselines` when present.

A fit that refuses (:class:`~cvxdp.error.CertificationError`, nothing released) is
an output of its own, ``⊥``: the audit's events may contain it, and the refusals
per side are reported.

Targets: every sound mechanism's lower bound ≤ its claimed ε; the broken one's
above it.  ``--json PATH`` writes all figures and ``--markdown PATH`` a table;
``--quick`` runs 1000 / 30 (the pipeline on one pair only).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

from cvxdp.audit import NEIGHBOURS, audit, lad_model, neighbouring_pair, output_perturbation_mechanism
from cvxdp.error import PrivacyLeakWarning, UtilityWarning
from cvxdp.problem import PrivateProblem


def population_mechanism(model, **kw):
    problem = PrivateProblem(model)

    def mech(data, source):
        return problem.solve(data, random_state=source, **kw).w

    return mech


def baseline_mechanisms(model, epsilon, lam):
    try:
        from cvxdp import baselines
    except ImportError:  # pragma: no cover
        return {}
    return {name: fn for name, fn in getattr(baselines, "audit_mechanisms", lambda *a, **k: {})(
        model, epsilon=epsilon, lam=lam).items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--population-runs", type=int, default=1000)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=str, default=None)
    parser.add_argument("--markdown", type=str, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.population_runs = 1000, 30
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    warnings.simplefilter("ignore", UtilityWarning)  # n = 40 is too few for the tail histogram
    eps, lam, G = args.epsilon, 0.5, 2.0
    model = lad_model(1)
    common = dict(epsilon=eps, moment_k=4.0, G_k=G, lam=lam)
    mechanisms = {
        "cvxdp output-pert (tight)": (output_perturbation_mechanism(model, profile="tight", **common),
                                      args.runs, True),
        "cvxdp output-pert (paper)": (output_perturbation_mechanism(model, profile="paper", **common),
                                      args.runs, True),
        "BROKEN: tight, noise x0.25": (output_perturbation_mechanism(model, noise_factor=0.25, **common),
                                       args.runs, False),
        "cvxdp population (tight)": (population_mechanism(model, epsilon=eps, moment_k=4.0, G_k=G,
                                                          lambda_scale=20.0),
                                     args.population_runs, True),
    }
    for name, mech in baseline_mechanisms(model, eps, lam).items():
        mechanisms[name] = (mech, args.runs, True)
    rows = []
    for kind in NEIGHBOURS:
        d0, d1 = neighbouring_pair(kind, n=40, d=1, magnitude=1e4, lam=lam, seed=args.seed)
        for name, (mech, runs, sound) in mechanisms.items():
            if args.quick and "population" in name and kind != "outlier":
                continue
            t0 = time.perf_counter()
            r = audit(mech, d0, d1, claimed_epsilon=eps, runs=runs, random_state=args.seed, name=name,
                      neighbours=kind)
            rows.append({"mechanism": name, "neighbours": kind, "claimed_epsilon": eps,
                         "epsilon_lower_bound": r.epsilon_lower_bound, "runs_per_side": runs,
                         "confidence": r.confidence, "statistic": r.statistic,
                         "refusals_per_side": r.extra.get("refusals", [0, 0]),
                         "expected_sound": sound, "violation": r.violation,
                         "seconds": time.perf_counter() - t0})
            print(r.summary())
    sound_ok = all(not r["violation"] for r in rows if r["expected_sound"])
    broken_caught = all(r["violation"] for r in rows if not r["expected_sound"]
                        and r["neighbours"] != "boundary")
    result = {"benchmark": "privacy_audit", "rows": rows, "all_sound_within_claim": sound_ok,
              "broken_mechanism_detected": broken_caught}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(markdown_table(result, args.seed) + "\n")
    print(f"all sound mechanisms within their claim: {sound_ok}; broken mechanism detected: "
          f"{broken_caught}")
    return result


def markdown_table(result: dict, seed: int) -> str:
    """The audit's figures as a Markdown table (written by the benchmark, not by hand)."""
    lines = [f"Measured by `python benchmarks/bench_audit.py` (seed {seed}): LAD, d = 1, n = 40, "
             "95% Clopper–Pearson lower bounds from held-out runs.", "",
             "| mechanism | neighbours | claimed ε | audited ε ≥ | runs per side | refusals (D, D′) "
             "| verdict |",
             "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        verdict = "violation" if r["violation"] else "consistent"
        if not r["expected_sound"]:
            verdict += " (deliberately broken)"
        ref = r.get("refusals_per_side", [0, 0])
        lines.append(f"| {r['mechanism']} | {r['neighbours']} | {r['claimed_epsilon']:g} | "
                     f"{r['epsilon_lower_bound']:.3f} | {r['runs_per_side']} | {ref[0]}, {ref[1]} "
                     f"| {verdict} |")
    lines += ["", f"All sound mechanisms within their claim: {result['all_sound_within_claim']}; "
              f"the broken mechanism detected: {result['broken_mechanism_detected']}."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
