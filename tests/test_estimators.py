"""scikit-learn style estimators: conventions, learned attributes, sensible accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from cvxdp.datasets import student_t_hinge, student_t_lad
from cvxdp.error import DataError, ParameterError
from cvxdp.estimators import PrivateLADRegressor, PrivateLinearSVM, PrivateQuantileRegressor

pytestmark = pytest.mark.filterwarnings("ignore::cvxdp.error.PrivacyLeakWarning")


def test_linear_svm_fit_predict_score():
    task = student_t_hinge(n=6000, d=4, nu=5, separation=2.0, n_test=4000, seed=1)
    labels = np.where(task.y_train > 0, "spam", "ham")
    G = task.G(4.0) + 1.0  # + the intercept's constant feature: ||(x, 1)|| ≤ ||x|| + 1
    clf = PrivateLinearSVM(epsilon=2.0, G_k=G, radius=2.0, random_state=0)
    assert clf.fit(task.X_train, labels) is clf
    assert set(clf.classes_) == {"ham", "spam"}
    assert clf.coef_.shape == (4,) and isinstance(clf.intercept_, float)
    assert clf.epsilon_spent_ <= 2.0 + 1e-12 and clf.ledger_.entries
    test_labels = np.where(task.y_test > 0, "spam", "ham")
    assert clf.score(task.X_test, test_labels) > 0.75
    assert set(np.unique(clf.predict(task.X_test))) <= {"ham", "spam"}


def test_lad_and_quantile_regressors():
    task = student_t_lad(n=8000, d=3, nu=5, n_test=4000, seed=2)
    G = task.G(4.0) + 1.0
    lad = PrivateLADRegressor(epsilon=2.0, G_k=G, radius=2.0, random_state=1).fit(task.X_train,
                                                                                  task.y_train)
    assert lad.score(task.X_test, task.y_test) > 0.5
    assert np.linalg.norm(lad.coef_ - task.w_star) < 0.5
    q = PrivateQuantileRegressor(quantile=0.9, epsilon=2.0, G_k=G, radius=2.0, random_state=1)
    q.fit(task.X_train, task.y_train)
    above = np.mean(task.y_test > q.predict(task.X_test))
    assert 0.02 < above < 0.3  # roughly the upper decile
    assert q.get_params()["quantile"] == 0.9


def test_estimator_conventions_and_errors():
    est = PrivateLADRegressor(epsilon=1.0, G_k=2.0)
    assert est.get_params()["epsilon"] == 1.0
    est.set_params(epsilon=0.5)
    assert est.epsilon == 0.5
    with pytest.raises(ParameterError):
        est.set_params(bogus=1)
    with pytest.raises(ParameterError, match="not fitted"):
        est.predict(np.ones((2, 3)))
    with pytest.raises(ParameterError, match="G_k"):
        PrivateLADRegressor().fit(np.ones((50, 2)), np.ones(50))
    with pytest.raises(DataError):
        PrivateLADRegressor(G_k=2.0).fit(np.ones((50, 2)), np.ones(49))
    with pytest.raises(DataError, match="two classes"):
        PrivateLinearSVM(G_k=2.0).fit(np.ones((50, 2)), np.arange(50) % 3)
    with pytest.raises(ParameterError):
        PrivateQuantileRegressor(quantile=1.5, G_k=2.0).fit(np.ones((50, 2)), np.ones(50))
    with pytest.raises(ParameterError):
        PrivateLADRegressor(G_k=2.0, epsilon=float("nan")).fit(np.ones((50, 2)), np.ones(50))
