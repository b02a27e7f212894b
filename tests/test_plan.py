"""The plan layer: public inputs, the planner, the dry run, and the one radius recursion."""

from __future__ import annotations

import itertools
import json
import math
import pathlib
import sys
import warnings
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest
from scipy.special import gammaincinv

import cvxdp
from cvxdp.error import ParameterError
from cvxdp.geometry import localize
from cvxdp.plan.inputs import PublicInputs
from cvxdp.plan.planner import Planner
from cvxdp.plan.profiles import TightProfile
from cvxdp.plan.schedule import allocation, batch_rounds, phase_radii, plan_rounds
from cvxdp.plan.tail_models import empirical_bias_bound
from cvxdp.privacy.mechanisms import laplace_scale

GOLDEN = pathlib.Path(__file__).parent / "golden"
sys.path.insert(0, str(GOLDEN))
from golden_cases import CASES, make  # noqa: E402
from record_round_plans import FIELDS  # noqa: E402

FROZEN = json.loads((GOLDEN / "round_plans.json").read_text())["cases"]
PUBLIC_CASES = sorted(name for name, (_, kw) in CASES.items() if kw.get("tail_share") == 0.0)


def _lad_model(d=3):
    w = cp.Variable(d)
    return cvxdp.Model(cvxdp.losses.absolute(w), [cp.norm(w, 2) <= 2.0])


@pytest.mark.parametrize("name", PUBLIC_CASES)
def test_dry_run_equals_the_rounds_the_fit_used(name):
    """Without the tail histogram every constant is public: ``plan(n=...)``, with no data, gives the
    rounds of the frozen fit float for float (see tests/test_plan_golden.py for the file's history)."""
    model, data, kw = make(name)
    kw = {k: v for k, v in kw.items() if k != "random_state"}
    plan = cvxdp.PrivateProblem(model).plan(n=len(data["y"]), **kw)
    assert not plan.provisional and plan.tail is None
    got = [{"phase": b.phase, "group": b.group, "round": r.round, "m": r.m, "radius": r.radius,
            "lam": b.lam, "epsilon": r.epsilon, "beta": r.beta, **{f: getattr(r, f) for f in FIELDS}}
           for b, r in plan.rounds]
    assert got == FROZEN[name]["steps"]


def test_a_fit_records_its_plan_and_its_rounds_are_the_plans():
    model, data, kw = make("population-tight-tail")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cvxdp.PrivateProblem(model).solve(data, **kw)
    plan = result.release_plan
    assert not plan.provisional and plan.tail is not None and plan.adaptive_clip
    assert [s.plan for s in result.steps] == [r for _, r in plan.rounds]
    text = plan.describe()
    assert "private tail histogram" in text and "(from the tail release)" in text
    assert f"{plan.releases} releases" in text and len(result.ledger.entries) == plan.releases


class _Quieter(TightProfile):
    """A user's profile that asks for twice the noise of every round (still private: more noise)."""

    name = "quieter"

    def plan_arrays(self, **kw):
        out = super().plan_arrays(**kw)
        out["noise_scale"] = out["noise_scale"] * 2.0
        return out


def test_a_profile_subclass_keeps_its_overrides_once_the_tail_release_is_read():
    """``with_tail`` copies the profile it is called on: the released tail model joins the user's own
    class (its parameters and overrides), not a fresh default ``TightProfile``."""
    from cvxdp.plan.tail_models import moment_tail

    mine = _Quieter(0.02, clip=3.0)
    tail = moment_tail(4.0, 3.0)
    read = mine.with_tail(tail)
    assert type(read) is _Quieter and (read.kappa, read.clip, read.tail) == (0.02, 3.0, tail)
    assert read is not mine and mine.tail is None  # the user's profile is not changed
    rng = np.random.default_rng(3)
    data = {"x": rng.standard_t(5, size=(3000, 3)), "y": rng.standard_t(5, size=3000)}
    kw = {"epsilon": 1.0, "moment_k": 4.0, "G_k": "auto", "random_state": 0,
          "algorithm": "output-perturbation"}
    base = cvxdp.PrivateProblem(_lad_model()).solve(data, **kw).steps[0].plan
    quiet = cvxdp.PrivateProblem(_lad_model()).solve(data, profile=_Quieter(), **kw)
    assert quiet.release_plan.tail is not None and quiet.release_plan.profile_name == "quieter"
    assert quiet.steps[0].plan.noise_scale == 2.0 * base.noise_scale


def test_dry_run_with_the_tail_histogram_is_provisional_and_says_so():
    problem = cvxdp.PrivateProblem(_lad_model())
    plan = problem.plan(n=3000, epsilon=1.0, moment_k=4.0, G_k=3.0)
    assert plan.provisional and plan.tail is not None and plan.batches
    assert plan.tail.epsilon == 0.1 and Fraction(plan.tail.epsilon) + Fraction(plan.epsilon_fit) <= 1
    assert "PROVISIONAL" in plan.describe()
    auto = problem.plan(n=3000, epsilon=1.0, moment_k=4.0, G_k="auto")
    assert auto.provisional and auto.batches == () and "G_k from the tail release" in auto.describe()
    # the dry run says, before any data, what a histogram that sees nothing leads to
    assert "releases the domain's centre" in auto.describe() and auto.fallback is None
    declared = problem.plan(n=3000, epsilon=1.0, moment_k=4.0, G_k="auto", tail_range=(0.1, 10.0))
    assert "plans for the declared tail_range's top" in declared.describe()


def test_describe_lists_every_release_with_its_public_constants():
    plan = cvxdp.PrivateProblem(_lad_model()).plan(n=3000, epsilon=1.0, moment_k=4.0, G_k=3.0,
                                                    tail_share=0.0, boosting_groups=3)
    text = plan.describe()
    for number, (_, r) in enumerate(plan.rounds, start=1):
        line = next(x for x in text.splitlines() if x.strip().startswith(f"release {number}:"))
        for value in (f"ε = {r.epsilon:.4g}", f"Δ = {r.sensitivity:.4g}", f"s = {r.noise_scale:.4g}",
                      f"R⁺ = {r.radius_plus:.4g}"):
            assert value in line
    assert "disjoint batches" in text and "legend" in text and "PROVISIONAL" not in text


def test_every_batch_spends_at_most_its_budget_exactly():
    plan = cvxdp.PrivateProblem(_lad_model()).plan(n=20_000, epsilon=0.7, moment_k=3.0, G_k=2.0)
    for b in plan.batches:
        assert sum((Fraction(r.epsilon) for r in b.rounds), Fraction(0)) <= Fraction(plan.epsilon_fit)
    assert Fraction(plan.tail.epsilon) + Fraction(plan.epsilon_fit) <= Fraction(0.7)
    sizes = [b.size for b in plan.batches]
    ends = [b.offset + b.size for b in plan.batches]
    assert sum(sizes) <= 20_000 and max(ends) <= 20_000
    assert len({(b.offset, b.size) for b in plan.batches}) == len(plan.batches)  # disjoint, one per group


def test_public_inputs_are_validated_once_and_hashable():
    kw = dict(d=3, D=4.0, structured=True, epsilon=1.0, moment_k=4.0, G_k=2.0)
    a = PublicInputs.from_options(**kw, n=1000)
    b = PublicInputs.from_options(**kw, n=1000)
    assert a == b and hash(a) == hash(b) and a.tail_grid == (2e-4, 2e4)
    assert PublicInputs.from_options(**kw, profile=TightProfile(clip=1.0)) != a
    with pytest.raises(ParameterError, match="too few"):
        a.with_n(5)
    with pytest.raises(ParameterError, match="tail_share"):
        PublicInputs.from_options(**kw, tail_share=1.5)


def test_the_radius_recursion_is_the_one_the_run_can_realise():
    """``R_{j+1} = min(2R⁺_j, D)`` bounds the diameter of ``W ∩ B(c, R⁺_j)`` for any centre in W."""
    model = _lad_model(2)
    W = model.domain
    rounds = plan_rounds(TightProfile(), S=4, m=500, d=2, epsilon=2.0, lam=5.0, k=4.0, G_k=2.0,
                         D=model.diameter, beta=0.05)
    rng = np.random.default_rng(0)
    for prev, nxt in itertools.pairwise(rounds):
        assert nxt.radius == min(2.0 * prev.radius_plus, model.diameter)
        for _ in range(5):
            c = W.project(rng.normal(size=2))
            assert localize(W, c, prev.radius_plus).diameter <= nxt.radius


def _reference_round(R, lam, m, d, eps, beta, k, G_k, kappa=0.05):
    """The tight profile's round, written out in scalars (math, one C at a time): an independent
    reference for the vectorized planner."""
    quant = float(gammaincinv(d, 1.0 - beta))
    grid = G_k * np.logspace(-3, 3, 241)
    best, C = math.inf, None
    for c in grid:
        val = (kappa * c / (lam * m) + math.sqrt(R * float(empirical_bias_bound(c, k, G_k, m, beta)) / lam)
               + (1.0 + kappa) * 2.0 * c / (lam * m * eps) * (quant + math.sqrt(d)))
        if val < best:
            best, C = val, float(c)
    alpha = max(kappa * kappa * C * C / (2.0 * lam * m * m), 1e-10 * (1.0 + C * R + lam * R * R))
    sens = (2.0 * C / (lam * m) + 2.0 * math.sqrt(2.0 * alpha / lam)) * (1.0 + 2.0**-50)
    s = laplace_scale(sens, eps)
    grain = 2.0 ** math.ceil(math.log2(s))
    bias = math.sqrt(R * float(empirical_bias_bound(C, k, G_k, m, beta)) / lam)
    return math.sqrt(2.0 * alpha / lam) + bias + s * quant + math.sqrt(d) * grain / 2.0


def _reference_radius(m, lam, d, epsilon, k, G_k, D, beta, max_rounds=8):
    best, final_best = math.inf, None
    for S in range(1, max_rounds + 1):
        theta = allocation(S, k)
        R, plus = D, None
        for j in range(S):
            plus = _reference_round(R, lam, m, d, float(epsilon * theta[j]), float(beta * theta[j]), k, G_k)
            R = min(2.0 * plus, D)
        if plus < best * (1.0 - 1e-3):
            best, final_best = plus, plus
    return min(final_best, D)


def test_vectorized_radii_equal_an_independent_scalar_recursion():
    prof = TightProfile()
    ms, lams = np.array([100.0, 800.0, 5000.0]), np.array([0.05, 1.0, 30.0])
    kw = dict(d=4, epsilon=0.8, k=3.0, G_k=1.5, D=3.0, beta=0.01)
    fast = phase_radii(prof, ms, lams, **kw)
    ref = [_reference_radius(int(m), float(lam), **kw) for m, lam in zip(ms, lams, strict=True)]
    assert fast.tolist() == pytest.approx(ref, rel=1e-12)
    slow = [min(batch_rounds(prof, m=int(m), lam=float(lam), **kw)[-1].radius_plus, 3.0)
            for m, lam in zip(ms, lams, strict=True)]
    assert fast.tolist() == slow


def test_planner_needs_n():
    with pytest.raises(ValueError):
        Planner(PublicInputs.from_options(d=3, D=4.0, structured=True, epsilon=1.0, moment_k=4.0, G_k=2.0))


def test_no_release_is_planned_with_a_non_finite_constant():
    plan = cvxdp.PrivateProblem(_lad_model()).plan(n=3000, epsilon=0.3, moment_k=2.5, G_k=50.0,
                                                    profile="paper")
    for _, r in plan.rounds:
        assert all(math.isfinite(getattr(r, f)) for f in FIELDS)
        assert Fraction(r.noise_scale) * Fraction(r.epsilon) >= Fraction(r.sensitivity)


@pytest.mark.parametrize("k", [4.0, 200.0, 1000.0])
def test_paper_profile_plans_every_admissible_moment(k):
    """The paper profile's constant ``A = sqrt(2R G_k^k/(λβ(k−1)))`` overflows a float beyond about
    k = 870 at G_k = 5, where it raised a bare ``OverflowError`` (found by review); its ``C*`` and bias
    radius are moderate and are now taken in logs there — and both ways agree where both are finite."""
    from cvxdp.plan.profiles import PaperProfile

    prof = PaperProfile()
    kw = dict(R=2.0, lam=0.01, m=1000, d=3, eps=0.5, beta=0.1, k=k, G_k=5.0)
    rp = prof.plan(**kw)
    assert all(math.isfinite(v) and v > 0 for v in (rp.C, rp.bias_radius, rp.noise_radius))
    if k == 4.0:  # the direct formula, by hand
        A = math.sqrt(2 * 2.0 * 5.0**4 / (0.01 * 0.1 * 3.0))
        B = 20.0 * 3 * math.log(10.0) / (0.01 * 1000 * 0.5)
        assert math.isclose(rp.C, (3.0 * A / (2 * B)) ** 0.4, rel_tol=1e-12)
    # the bias radius balances the noise radius's (k − 1)/2 share at C* (the first-order condition)
    assert math.isclose(rp.bias_radius * (k - 1.0) / 2.0, rp.noise_radius, rel_tol=1e-9)


def test_the_grid_search_keeps_the_bias_bound_of_the_c_it_chose():
    """``plan_arrays`` reads the bias bound of the chosen ``C`` off its grid search (computed once per
    distinct ``(m, β)``) instead of evaluating it again: the same floats as a plan told that ``C``, for the
    worst-case tail and for one combined with an estimate."""
    from cvxdp.plan.tail_models import CombinedTail
    from cvxdp.privacy.tail import TailProfile

    rng = np.random.default_rng(17)
    N = 300
    R, lam = 10 ** rng.uniform(-2, 1, N), 10 ** rng.uniform(-3, 2, N)
    m = rng.choice([1000.0, 4000.0, 50000.0], N)
    eps, beta = rng.choice([0.1, 1.0], N), rng.choice([1e-3, 2.5e-4], N)
    estimate = TailProfile(edges=np.geomspace(0.1, 100, 30), mass=rng.dirichlet(np.full(31, 0.3)),
                           epsilon=0.1, threshold=1.0, n=1000)
    for profile in (TightProfile(), TightProfile(tail=CombinedTail(estimate, 4.0, 3.0))):
        searched = profile.plan_arrays(R=R, lam=lam, m=m, d=10, eps=eps, beta=beta, k=4.0, G_k=3.0)
        told = profile.plan_arrays(R=R, lam=lam, m=m, d=10, eps=eps, beta=beta, k=4.0, G_k=3.0,
                                   C=searched["C"])
        for key, value in searched.items():
            assert value.tobytes() == told[key].tobytes(), key


def test_the_grid_search_keys_rounds_by_their_bits():
    """Rounds are grouped by the bits of ``(m, β)``: ``−0.0`` and NaN keep rows of their own (a complex
    key merged them, found by review), so the plan is the one each round gets alone."""
    profile = TightProfile()
    m = np.array([-0.0, 0.0, 1000.0, 1000.0])
    beta = np.array([0.1, 0.1, np.nan, 0.1])
    kw = dict(R=np.ones(4), lam=np.ones(4), d=5, eps=np.ones(4), k=4.0, G_k=2.0)
    together = profile.plan_arrays(m=m, beta=beta, **kw)
    for i in range(4):
        one = {k: (v[i:i + 1] if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        alone = profile.plan_arrays(m=m[i:i + 1], beta=beta[i:i + 1], **one)
        for key, value in together.items():
            assert value[i:i + 1].tobytes() == alone[key].tobytes(), (i, key)


def test_a_round_below_the_epsilon_floor_is_refused_by_the_plan():
    """ε at the accepted floor (1e-10) is split over the releases and rounded down, so a round can get
    9.999…e-11, which its mechanism refuses: the plan refuses it first (a function of public inputs, before
    any charge), on every localization path; one ulp above the floor plans and fits."""
    from cvxdp._validation import EPSILON_MIN

    model = _lad_model(d=1)
    rng = np.random.default_rng(1)
    data = {"x": rng.uniform(0.05, 0.3, size=(400, 1)), "y": np.ones(400)}
    for kw in ({"G_k": 2.0, "G_2": 1.0}, {"G_k": 2.0, "tail_share": 0.0},
               {"G_k": 2.0, "tail_share": 0.0, "algorithm": "population"},
               {"G_k": 2.0, "tail_share": 0.0, "algorithm": "output-perturbation"}):
        with pytest.raises(ParameterError, match="below 1e-10"):
            cvxdp.PrivateProblem(model).plan(n=400, epsilon=EPSILON_MIN, moment_k=4.0, **kw)
        above = math.nextafter(EPSILON_MIN, 1.0)
        plan = cvxdp.PrivateProblem(model).plan(n=400, epsilon=above, moment_k=4.0, **kw)
        assert all(r.epsilon >= EPSILON_MIN for _, r in plan.rounds)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = cvxdp.PrivateProblem(model).solve(data, epsilon=above, moment_k=4.0, random_state=0, **kw)
        assert r.ledger.spent <= above
