"""Feature centring (cvxdp.centring) and the estimators' ``center_features``: the reparametrization as
math, the private mean as a release, the budget split, refusals before the data, per-example rows."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

import cvxdp
from cvxdp.centring import centred_design, centring_map, private_feature_mean, uncentred
from cvxdp.error import ParameterError, PrivacyBudgetError, UtilityWarning
from cvxdp.estimators import PrivateLADRegressor, PrivateLinearSVM, PrivateQuantileRegressor

pytestmark = pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning")


def _uncentred_data(n=4000, seed=0):
    """Features far from 0 (an age in decades, mean ≈ 4) that trade off against the intercept."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(2.0, 6.0, n), rng.uniform(0.8, 2.0, n)])
    y = X @ np.array([0.4, 1.0]) - 2.0 + 0.3 * rng.standard_t(4, size=n)
    return X, y


def test_the_reparametrization_is_the_same_linear_model():
    """``(x − μ, 1)·v = (x, 1)·(A_μ v)`` for every row and v; det A_μ = 1; :func:`uncentred` is ``A_μ v``."""
    rng = np.random.default_rng(3)
    X, mu, v = rng.normal(size=(50, 4)) * 10, rng.normal(size=4) * 5, rng.normal(size=5)
    A = centring_map(mu)
    design = np.hstack([X, np.ones((50, 1))])
    assert np.allclose(centred_design(X, mu) @ v, design @ (A @ v), rtol=1e-13, atol=1e-12)
    assert np.linalg.det(A) == pytest.approx(1.0, abs=1e-12)
    coef, intercept = uncentred(v, mu)
    assert np.array_equal(coef, v[:-1]) and intercept == pytest.approx((A @ v)[-1], abs=1e-13)
    assert np.array_equal(centring_map(np.zeros(4)), np.eye(5))


def test_a_centre_is_used_only_where_the_centred_domain_is_well_conditioned():
    """``A_μ``'s condition number is ``σ_max²`` with ``σ_max² + σ_max⁻² = 2 + ||μ||²`` (det 1, the other
    singular values 1); a centre beyond :data:`MAX_CENTRE_NORM` or not finite is not used."""
    from cvxdp.centring import MAX_CENTRE_NORM, usable_centre

    for m in (0.5, 4.5, 30.0):
        mu = np.full(3, m / np.sqrt(3.0))
        sv = np.linalg.svd(centring_map(mu), compute_uv=False)
        assert sv.max() * sv.min() == pytest.approx(1.0, rel=1e-9)
        assert sv.max() ** 2 + sv.min() ** 2 == pytest.approx(2.0 + m * m, rel=1e-9)
    assert usable_centre(np.array([MAX_CENTRE_NORM, 0.0])) and not usable_centre(np.array([30.01, 0.0]))
    assert not usable_centre(None) and not usable_centre(np.array([np.nan, 0.0]))
    assert not usable_centre(np.array([1e308, 1e308]))


def test_a_released_centre_near_zero_is_not_used():
    """Features already near 0 (``||μ̂|| < CENTRE_FROM``): the centre is released and paid for, but not
    used — the fit runs on the features as given with ε less the centring's charges."""
    from cvxdp.centring import CENTRE_FROM, worth_centring
    from cvxdp.privacy.ledger import budget_remainder

    assert worth_centring(np.array([CENTRE_FROM, 0.0])) and not worth_centring(np.array([1.99, 0.0]))
    assert not worth_centring(np.array([np.nan, 5.0])) and not worth_centring(None)
    X, y = _uncentred_data(4000)
    X = X - [4.0, 1.4] + [0.5, 0.3]
    est = PrivateLADRegressor(epsilon=1.0, G_k="auto", radius=5.0, random_state=0).fit(X, y)
    charges = [e.epsilon for e in est.center_ledger_.entries]
    assert len(charges) == 2 and np.array_equal(est.feature_center_, np.zeros(2))
    assert est.ledger_.total_epsilon == budget_remainder(1.0, *charges)


def test_a_centred_row_depends_on_its_own_example_only():
    """Per-example: changing one example leaves every other centred row the same, bit for bit."""
    X, _ = _uncentred_data(200)
    mu = np.array([4.1, 1.3])
    X2 = X.copy()
    X2[17] = [1e12, -1e12]
    a, b = centred_design(X, mu), centred_design(X2, mu)
    others = np.arange(200) != 17
    assert np.array_equal(a[others], b[others])


def test_the_private_mean_is_close_and_within_its_budget():
    """At n = 4000 and ε = 0.5 the released mean is near the rows' mean (its noise norm is about
    ``p·2C/(nε)`` with C a few times the rows' norm), and the ledger spends at most ε, exactly."""
    X, _ = _uncentred_data(4000)
    mu, ledger = private_feature_mean(X, epsilon=0.5, moment_k=4.0, random_state=0)
    assert mu is not None and mu.shape == (2,)
    assert np.linalg.norm(mu - X.mean(axis=0)) < 0.25
    assert ledger.spent_exact <= Fraction(0.5)
    assert ledger.entries[0].mechanism == "private tail histogram"


def test_the_private_mean_has_power_against_a_shift():
    """The release follows the data: shifting every row by +3 in the first feature moves it by ≈ 3."""
    X, _ = _uncentred_data(4000, seed=1)
    a, _ = private_feature_mean(X, epsilon=1.0, moment_k=4.0, random_state=5)
    b, _ = private_feature_mean(X + [3.0, 0.0], epsilon=1.0, moment_k=4.0, random_state=5)
    assert abs((b - a)[0] - 3.0) < 0.3 and abs((b - a)[1]) < 0.3


@pytest.mark.filterwarnings("ignore::cvxdp.error.UtilityWarning")
def test_no_mean_is_released_when_the_histogram_sees_nothing():
    """30 rows at ε = 0.05: nothing above the histogram's noise, so no scale, no mean (``None``) and only
    the histogram's share spent."""
    X, _ = _uncentred_data(30)
    mu, ledger = private_feature_mean(X, epsilon=0.05, moment_k=4.0, random_state=0)
    assert mu is None and ledger.spent == pytest.approx(0.005)


def test_private_centring_fits_the_same_model_and_splits_the_budget_exactly():
    X, y = _uncentred_data(4000)
    kw = dict(quantile=0.5, epsilon=1.0, G_k="auto", radius=5.0, random_state=0)
    est = PrivateQuantileRegressor(center_features="private", **kw).fit(X, y)
    assert est.center_ledger_ is not None and est.feature_center_.shape == (2,)
    assert np.linalg.norm(est.feature_center_ - X.mean(axis=0)) < 0.3
    assert est.center_ledger_.spent_exact + est.ledger_.spent_exact <= Fraction(1.0)
    assert est.epsilon_spent_ <= 1.0 and est.center_ledger_.total_epsilon == 0.1
    # the released point lies in the declared domain (the ball of radius 5 around 0 in (coef, intercept))
    assert np.linalg.norm(np.r_[est.coef_, est.intercept_]) <= 5.0 * (1 + 1e-12)
    # predictions are X·coef + intercept, the uncentred model
    assert np.allclose(est.predict(X[:5]), X[:5] @ est.coef_ + est.intercept_)
    plain = PrivateQuantileRegressor(center_features=False, **kw).fit(X, y)
    assert plain.center_ledger_ is None and np.array_equal(plain.feature_center_, np.zeros(2))


def test_centring_measurably_helps_with_features_far_from_zero():
    """The case it is for: the intercept trades off against features with mean ≈ 4; over 4 seeds the
    centred fit's mean absolute error is lower than the fit on the features as given (same ε)."""
    X, y = _uncentred_data(6000, seed=2)
    Xt, yt = _uncentred_data(4000, seed=3)
    kw = dict(epsilon=1.0, G_k="auto", radius=5.0)
    plain = [np.mean(np.abs(yt - PrivateLADRegressor(random_state=s, center_features=False, **kw)
                            .fit(X, y).predict(Xt)))
             for s in range(4)]
    centred = [np.mean(np.abs(yt - PrivateLADRegressor(random_state=s, center_features="private", **kw)
                                 .fit(X, y).predict(Xt))) for s in range(4)]
    assert np.median(centred) < np.median(plain)


def test_public_reference_values_cost_nothing_and_match_a_manual_centring():
    """An array of public reference values: no release, and the same fit as centring by hand on the
    ellipsoid ``||A_μ v|| ≤ r`` (the declared domain)."""
    import cvxpy as cp

    X, y = _uncentred_data(2000)
    ref = np.array([4.0, 1.2])
    kw = dict(epsilon=1.0, G_k=6.0, radius=5.0, random_state=3, algorithm="output-perturbation")
    est = PrivateLADRegressor(center_features=ref, **kw).fit(X, y)
    assert est.center_ledger_ is None and np.array_equal(est.feature_center_, ref)
    v = cp.Variable(3)
    model = cvxdp.Model(cvxdp.losses.absolute(v), [cp.norm(centring_map(ref) @ v, 2) <= 5.0])
    r = cvxdp.PrivateProblem(model).solve({"x": centred_design(X, ref), "y": y}, epsilon=1.0, moment_k=4.0,
                                          G_k=6.0, algorithm="output-perturbation", random_state=3)
    coef, intercept = uncentred(r.w, ref)
    assert np.array_equal(est.coef_, coef) and est.intercept_ == intercept


@pytest.mark.filterwarnings("ignore::cvxdp.error.UtilityWarning")
def test_a_centred_fit_that_sees_no_tail_keeps_the_public_centre():
    """The fit's own histogram sees nothing: the released point is the domain's public centre, in the
    original parametrization too."""
    X, y = _uncentred_data(30)
    est = PrivateQuantileRegressor(quantile=0.9, G_k="auto", epsilon=0.5, center=[0.1, 0.0, 2.5],
                                   center_features=np.array([4.0, 1.4]), radius=5.0, random_state=0).fit(X, y)
    assert np.allclose(np.r_[est.coef_, est.intercept_], [0.1, 0.0, 2.5], atol=1e-12)


@pytest.mark.parametrize(("params", "match"), [
    (dict(center_features="mean"), "center_features must be"),
    (dict(center_features=True), "ambiguous"),
    (dict(center_features=[1.0, 2.0], fit_intercept=False), "fit_intercept=True"),
    (dict(center_features="private", center_features_share=1.0), "center_features_share"),
    (dict(center_features="private", center_features_share=True), "center_features_share"),
    (dict(center_features=[1.0, np.nan]), "center_features"),
    (dict(center_features=[1.0, 2.0, 3.0]), "one public reference value per feature"),
    (dict(center_features=[40.0, 1.0]), "rescale the features"),
])
def test_bad_centring_parameters_are_refused_before_a_release(params, match):
    X, y = _uncentred_data(100)
    acc = cvxdp.BudgetAccountant(1.0)
    with pytest.raises(ParameterError, match=match):
        PrivateLADRegressor(G_k=6.0, accountant=acc, **params).fit(X, y)
    assert acc.spent == 0.0


@pytest.mark.parametrize("params", [
    dict(solver="foo"), dict(progress="yes"), dict(center_features_share=1e-300),
    dict(center_features_share=5e-324), dict(epsilon=5e-9), dict(epsilon=1.2e14, center_features_share=0.99),
], ids=repr)
def test_every_public_input_of_both_releases_is_checked_before_the_charge(params):
    """Review helper-41: the solver's name, ``progress``, and the centring's own share (an ε too small for
    its histogram) were refused only after the whole ε was charged; helper-42: so was a centring ε whose
    release grid is too fine for any clip level.  Now each is refused before."""
    X, y = _uncentred_data(100)
    acc = cvxdp.BudgetAccountant(1.0)
    with pytest.raises(ParameterError):
        PrivateLADRegressor(**{"G_k": 6.0, "accountant": acc, "random_state": 0, **params}).fit(X, y)
    assert acc.spent == 0.0 and acc.history == []


def test_without_an_intercept_the_default_centring_is_a_no_op():
    X, y = _uncentred_data(4000)
    est = PrivateLADRegressor(G_k="auto", radius=5.0, fit_intercept=False, random_state=0).fit(X, y)
    assert est.center_ledger_ is None and np.array_equal(est.feature_center_, np.zeros(2))
    assert est.intercept_ == 0.0 and est.ledger_.total_epsilon == 1.0


def test_the_accountant_is_charged_once_before_either_release():
    """One spend of the whole ε before the centring reads the data; a fit the accountant cannot pay, or
    whose options are wrong, is refused before any release (nothing fitted, nothing more spent)."""
    X, y = _uncentred_data(4000)
    acc = cvxdp.BudgetAccountant(1.5)
    svm = PrivateLinearSVM(classes=(0, 1), epsilon=1.0, G_k="auto", radius=5.0, accountant=acc,
                           random_state=0).fit(X, (y > np.median(y)).astype(int))
    assert np.any(svm.feature_center_ != 0)  # the default centres privately, and here it saw a scale
    assert acc.spent == 1.0 and len(acc.history) == 1 and "centring" in acc.history[0][0]
    late = PrivateLADRegressor(epsilon=1.0, G_k="auto", accountant=acc, random_state=0)
    with pytest.raises(PrivacyBudgetError):
        late.fit(X, y)
    assert not hasattr(late, "coef_") and acc.spent == 1.0
    wrong = PrivateLADRegressor(epsilon=0.5, G_k="auto", algorithm="nope", accountant=acc, random_state=0)
    with pytest.raises(ParameterError):
        wrong.fit(X, y)
    assert not hasattr(wrong, "coef_") and acc.spent == 1.0


def test_a_seeded_centred_fit_is_reproducible():
    X, y = _uncentred_data(4000)
    kw = dict(epsilon=1.0, G_k="auto", radius=5.0, center_features="private", random_state=11)
    a, b = PrivateLADRegressor(**kw).fit(X, y), PrivateLADRegressor(**kw).fit(X, y)
    assert np.any(a.feature_center_ != 0)
    assert np.array_equal(a.coef_, b.coef_) and a.intercept_ == b.intercept_
    assert np.array_equal(a.feature_center_, b.feature_center_)


def test_a_centring_that_sees_nothing_costs_only_its_histogram():
    """Too little data for the centring's histogram: no mean, no warning, the features as given, and the
    fit gets ε less the histogram's charge (the release's unspent share back, exactly)."""
    from cvxdp.privacy.ledger import budget_remainder

    X, y = _uncentred_data(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UtilityWarning)
        est = PrivateLADRegressor(epsilon=0.2, G_k=6.0, radius=5.0, center_features="private",
                                  algorithm="output-perturbation", tail_share=0.0, random_state=0).fit(X, y)
    assert np.array_equal(est.feature_center_, np.zeros(2))
    (charge,) = est.center_ledger_.entries
    assert charge.mechanism == "private tail histogram"
    assert est.ledger_.total_epsilon == budget_remainder(0.2, charge.epsilon)
    assert Fraction(charge.epsilon) + est.ledger_.spent_exact <= Fraction(0.2)
