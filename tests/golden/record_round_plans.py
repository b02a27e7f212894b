"""Record the round plans of ``PrivateResult.steps`` for fixed seeds (the golden file of test_plan_golden).

First run on the commit before the plan-then-run refactor (412e93a) to freeze the public constants
every release used; the planner reproduced them float for float (3e2c649).  Regenerated once since,
on purpose: the sensitivity and the noise scale are now rounded up so that ``s·ε ≥ Δ ≥`` the real
sensitivity in exact arithmetic, which moved Δ, s and the radii by at most 1.2e-15 (relative) and no
C, α, λ, ε, β or schedule.  Regenerated again when the tail histogram's values moved from each bin's
upper edge to one fine bin below it (``TailProfile.values``): every case that spends a tail share
plans a new ``C``, ``λ`` and schedule from the same released counts; the cases with ``tail_share=0``
kept every float.  The two ``auto-clip-rule*`` cases were re-recorded at ε = 1 when ``"auto"``'s switch to
Algorithm 1 moved from ``n ε/d = 5000`` to 2000 (at ε = 4 their ``n ε/d = 4000`` would no longer run the
clip rule they lock).  ``auto-clip-rule-tail`` was re-recorded (``--add`` after removing it) when the
clip rule's level fell below ``G₂`` for ``n ε_fit / d < 1000`` (``cvxdp.plan.auto.clip_level``; this case's
``ε_fit = 0.9`` puts it at 900): its ``C``, ``λ``, ``α`` and radii moved, its ``Δ``, ``s`` and ledger did
not (the rule's noise scale does not depend on ``C``).  Regenerate only for a change that says why:
``python tests/golden/record_round_plans.py``; ``--add`` records the cases the file lacks and keeps
every recorded one (how the ``auto-clip-rule-*`` cases were added when ``algorithm="auto"`` became
the default — the ``population-*`` cases then name their algorithm, with the same plans).
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import warnings

from golden_cases import CASES, run_case

FIELDS = ("C", "alpha", "sensitivity", "noise_scale", "radius_plus", "bias_radius", "noise_radius",
          "accuracy_radius", "snap_radius")


def record(result) -> dict:
    steps = [{"phase": s.phase, "group": s.group, "round": s.round, "m": s.m, "radius": s.radius,
              "lam": s.lam, "epsilon": s.epsilon, "beta": s.beta,
              **{f: getattr(s.plan, f) for f in FIELDS}} for s in result.steps]
    ledger = [{"mechanism": e.mechanism, "batch": e.batch, "n_examples": e.n_examples,
               "epsilon": e.epsilon, "sensitivity": e.sensitivity, "noise_scale": e.noise_scale}
              for e in result.ledger.entries]
    return {"steps": steps, "ledger": ledger}


if __name__ == "__main__":
    here = pathlib.Path(__file__).parent
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=here).stdout.strip()
    out = {"commit": commit, "cases": {}}
    if "--add" in sys.argv:
        out = json.loads((here / "round_plans.json").read_text())
        out.setdefault("added", {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in CASES:
            if name in out["cases"]:
                continue
            if "added" in out:
                out["added"][name] = commit
            out["cases"][name] = record(run_case(name))
            print(name, len(out["cases"][name]["steps"]), "steps")
    (here / "round_plans.json").write_text(json.dumps(out, indent=1) + "\n")
