"""Private selection (Liu–Talwar random stopping): its plan, its score's sensitivity, its choice."""

from __future__ import annotations

import warnings
from fractions import Fraction

import cvxpy as cp
import numpy as np
import pytest

import cvxdp
from cvxdp import Candidate, Model, losses, private_selection
from cvxdp.error import ParameterError, UtilityWarning
from cvxdp.selection import clipped_gain, selection_plan


def _lad(d=2, radius=2.0):
    w = cp.Variable(d)
    return Model(losses.absolute(w), [cp.norm(w, 2) <= radius])


def _data(n=400, d=2, seed=0, w_star=(1.0, -0.5)):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return {"x": X, "y": X @ np.asarray(w_star) + 0.1 * rng.standard_normal(n)}


PRIORS = [Candidate("good", "prior", {"point": [1.0, -0.5]}),
          Candidate("bad", "prior", {"point": [-1.2, 1.2]})]


@pytest.mark.parametrize("epsilon", [1.0, 0.1, 0.3, 1e-3, 7.0])
def test_the_plan_splits_epsilon_exactly(epsilon):
    plan = selection_plan(_lad(), 100, epsilon=epsilon, candidates=PRIORS, score_C=1.0, score_share=0.3)
    assert 3 * Fraction(plan.trial_epsilon) <= Fraction(epsilon)
    assert Fraction(plan.fit_epsilon) + Fraction(plan.score_epsilon) <= Fraction(plan.trial_epsilon)
    assert plan.fit_epsilon > 0.6 * plan.trial_epsilon
    assert "3 × trial ε" in plan.describe()


def test_bad_selections_are_refused_before_any_data():
    with pytest.raises(ParameterError):
        selection_plan(_lad(), 10, epsilon=1.0, candidates=[], score_C=1.0)
    with pytest.raises(ParameterError):
        selection_plan(_lad(), 10, epsilon=1.0, candidates=[PRIORS[0], PRIORS[0]], score_C=1.0)
    with pytest.raises(ParameterError):
        selection_plan(_lad(), 10, epsilon=1.0, candidates=PRIORS, score_C=1.0, stop_probability=0.0)
    with pytest.raises(ParameterError):
        Candidate("x", options={"epsilon": 2.0})
    with pytest.raises(ParameterError):
        Candidate("x", kind="grid")
    # a fit candidate whose options the planner refuses fails before any noise is drawn
    with pytest.raises(ParameterError):
        private_selection(_lad(), _data(50), epsilon=1.0,
                          candidates=[Candidate("f", options={"algorithm": "x"})],
                          moment_k=4.0, G_k=2.0, random_state=0)


def test_one_record_moves_the_score_by_at_most_its_sensitivity():
    """The clip bounds every record's term by B whatever the record holds; the float mean stays
    within Δ_s of its neighbour's (the test has power: without the clip one record moves it far)."""
    model = _lad()
    plan = selection_plan(model, 400, epsilon=1.0, candidates=PRIORS, score_C=1.0)
    base = _data()
    w = np.array([0.7, 0.2])
    g0 = clipped_gain(model, model.bind(base), w, plan.reference, plan.score_bound)
    rng = np.random.default_rng(5)
    worst = 0.0
    for row in (0, 17, 399):
        for x, y in ([1e100, -1e100], -1e100), ([1e50, 3.0], 1e100), (rng.standard_normal(2), 0.0):
            other = {k: v.copy() for k, v in base.items()}
            other["x"][row], other["y"][row] = x, y
            g1 = clipped_gain(model, model.bind(other), w, plan.reference, plan.score_bound)
            worst = max(worst, abs(g1 - g0))
            assert abs(g1 - g0) <= plan.score_sensitivity
    assert worst > 0.5 * plan.score_sensitivity  # extreme records reach the bound
    unclipped = np.mean(np.abs(model.loss.values(w, model.bind({"x": np.array([[1e50, 3.0]]),
                                                                  "y": np.array([1e100])}))))
    assert unclipped > 1e6 * plan.score_sensitivity


def test_the_selection_picks_the_better_candidate_when_the_scores_separate():
    """Power: two public points whose empirical risks differ by far more than the score's noise.  With
    stopping probability γ the better one is chosen exactly when it is drawn at least once,
    ``1 − γ/(1 + γ)`` = 0.8 for γ = 1/4 (200 runs: 160 ± 6); a selection that ignored the scores and
    kept its last trial would pick it half the time (100 ± 7).  The ledger spends ε once."""
    model = _lad()
    data = _data(4000)
    picks = []
    for seed in range(200):
        res = private_selection(model, data, epsilon=1.0, candidates=PRIORS, score_C=1.0, score_share=0.5,
                                stop_probability=Fraction(1, 4), random_state=seed)
        picks.append(res.candidate.name)
        assert len(res.ledger.entries) == 1 and res.ledger.spent <= 1.0
    good = picks.count("good")
    assert 140 <= good <= 180, good
    # and when the two points are equally good, the choice is a coin
    tie = [Candidate("a", "prior", {"point": [1.0, -0.5]}), Candidate("b", "prior", {"point": [1.0, -0.5]})]
    names = [private_selection(model, data, epsilon=1.0, candidates=tie, score_C=1.0,
                               random_state=s).candidate.name for s in range(200)]
    assert 60 <= names.count("a") <= 140


def test_the_number_of_trials_is_geometric_and_not_observable(monkeypatch):
    """The stopping rule is a public coin: with γ = 1/2 the number of trials is geometric, mean 2
    (400 selections: 2 ± 0.07; γ = 1/4 would give 4); the result keeps none of the trials but the
    chosen one."""
    import cvxdp.selection as selection

    calls = []
    scored = selection.clipped_gain
    monkeypatch.setattr(selection, "clipped_gain", lambda *a: calls.append(1) or scored(*a))
    model, data = _lad(), _data(100)
    for seed in range(400):
        res = private_selection(model, data, epsilon=1.0, candidates=PRIORS, score_C=1.0,
                                stop_probability=Fraction(1, 2), random_state=seed)
    assert 1.8 <= len(calls) / 400 <= 2.2, len(calls) / 400
    fields = set(vars(res))
    assert fields == {"w", "candidate", "score", "ledger", "plan", "result"}


def test_trial_warnings_do_not_escape():
    """A candidate's warnings would reveal the number of trials (and the unchosen trials' releases)."""
    model = _lad()
    data = _data(60)
    cands = [Candidate("auto", options={"G_k": "auto", "algorithm": "output-perturbation"}), PRIORS[0]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        private_selection(model, data, epsilon=0.5, candidates=cands, score_C=3.0, random_state=None)
    assert not [w for w in caught if issubclass(w.category, UtilityWarning)]


def test_no_unchosen_trial_stays_in_the_planners_caches():
    """The planner caches moment curves and schedules by their moment bound; with ``G_k="auto"`` that is
    each trial's private estimate, so the unchosen trials' estimates (and their count, the number of
    trials) stayed readable in this process after the selection (found by review).  It leaves none."""
    from cvxdp.plan.schedule import _cached_schedule
    from cvxdp.plan.tail_models import moment_tail

    model, data = _lad(), _data(300)
    cands = [Candidate("auto", options={"G_k": "auto", "algorithm": "output-perturbation"}), PRIORS[0]]
    for seed in range(3):
        moment_tail(4.0, 123.0)  # an entry from before, public
        private_selection(model, data, epsilon=3.0, candidates=cands, score_C=3.0,
                          stop_probability=Fraction(1, 8), random_state=seed)
        assert moment_tail.cache_info().currsize == 0
        assert _cached_schedule.cache_info().currsize == 0


def test_the_debug_log_is_a_diagnostic_and_says_so(caplog):
    """cvxdp's DEBUG messages depend on the data (certified gaps, one block per trial of a selection): a
    fit or a selection warns when they are on, and is silent about it when they are off (the default)."""
    import logging

    from cvxdp.error import PrivacyLeakWarning

    model, data = _lad(), _data(100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        private_selection(model, data, epsilon=1.0, candidates=PRIORS, score_C=1.0, random_state=None)
        cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4.0, G_k=2.0, random_state=None,
                                          algorithm="output-perturbation")
    assert not [w for w in caught if "DEBUG log" in str(w.message)]
    with caplog.at_level(logging.DEBUG, logger="cvxdp"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        private_selection(model, data, epsilon=1.0, candidates=PRIORS, score_C=1.0, random_state=None)
        cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4.0, G_k=2.0, random_state=None,
                                          algorithm="output-perturbation")
    leaks = [w for w in caught
             if issubclass(w.category, PrivacyLeakWarning) and "DEBUG log" in str(w.message)]
    assert len(leaks) == 2  # one per call: a selection's trials warn inside it, where nothing escapes
    # a module's logger at DEBUG under a quiet root counts too (found by review: only "cvxdp" was read)
    with caplog.at_level(logging.DEBUG, logger="cvxdp.erm.solver"), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4.0, G_k=2.0, random_state=None,
                                          algorithm="output-perturbation")
    assert [w for w in caught if "DEBUG log" in str(w.message)]


def test_no_trial_logs_a_line(caplog):
    """A trial's log records, like its warnings, would show the unchosen trials and their number: none
    leaves the selection, while a fit outside it logs its certificate at DEBUG (found by review)."""
    import logging

    model, data = _lad(), _data(200)
    cands = [Candidate("fit", options={"algorithm": "output-perturbation"}), PRIORS[0]]
    with caplog.at_level(logging.DEBUG), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cvxdp.PrivateProblem(model).solve(data, epsilon=1.0, moment_k=4.0, G_k=2.0, random_state=None,
                                          algorithm="output-perturbation")
        assert any(r.name.startswith("cvxdp") for r in caplog.records)
        caplog.clear()
        for seed in range(3):
            private_selection(model, data, epsilon=3.0, candidates=cands, G_k=2.0,
                              stop_probability=Fraction(1, 4), random_state=seed)
        assert not caplog.records
        assert logging.root.manager.disable == logging.NOTSET  # restored


def test_a_trial_that_raises_carries_no_other_trial_out(monkeypatch):
    """An exception inside a trial leaves the selection without the earlier trials' points or the last
    one's un-noised score in its traceback's frames (found by review)."""
    import cvxdp.problem as problem_module

    calls = []
    solve = problem_module.PrivateProblem.solve

    def failing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise cvxdp.CertificationError("refused in a trial")
        return solve(self, *args, **kwargs)

    monkeypatch.setattr(problem_module.PrivateProblem, "solve", failing)
    model, data = _lad(), _data(100)
    cands = [Candidate("fit", options={"algorithm": "output-perturbation"})]
    with pytest.raises(cvxdp.CertificationError) as info:
        private_selection(model, data, epsilon=3.0, candidates=cands, G_k=2.0,
                          stop_probability=Fraction(1, 1000), random_state=0)
    tb = info.value.__traceback__
    while tb is not None:
        frame_locals = tb.tb_frame.f_locals
        for name in ("best", "w", "res", "gain", "score"):
            assert frame_locals.get(name) is None, name
        tb = tb.tb_next


def test_fits_and_the_baseline_run_as_candidates():
    model = _lad()
    data = _data(600)
    cands = [Candidate("cvxdp", options={"algorithm": "output-perturbation"}),
             Candidate("clipped OP", "clipped-output-perturbation"), PRIORS[0]]
    res = private_selection(model, data, epsilon=1.0, candidates=cands, moment_k=4.0, G_k=2.0, random_state=1)
    assert model.domain.contains(res.w, tol=1e-9)
    assert res.candidate.name in {"cvxdp", "clipped OP", "good"}
    assert res.ledger.spent <= 1.0
    assert isinstance(cvxdp.private_selection, type(private_selection))


def test_a_grid_refusal_comes_before_the_selection_is_charged(monkeypatch):
    """The clipped-OP candidate's release and the score's are checked against their public grids before
    the charge and before any trial: a refusal must not wait for the trial that happens to draw it."""
    from cvxdp.privacy.ledger import PrivacyLedger
    from cvxdp.privacy.mechanisms import GRID_TOO_FINE

    def charged(*_a, **_k):
        raise AssertionError("charged before a public refusal")

    monkeypatch.setattr(PrivacyLedger, "charge", charged)
    with pytest.raises(ParameterError) as info:
        private_selection(_lad(), _data(50), epsilon=1e22, score_C=1.0, random_state=0,
                          candidates=[Candidate("op", "clipped-output-perturbation"), PRIORS[0]])
    assert str(info.value) == GRID_TOO_FINE
