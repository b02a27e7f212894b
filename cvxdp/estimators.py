"""scikit-learn style private estimators over :class:`~cvxdp.problem.PrivateProblem`.

Conventions follow scikit-learn: ``__init__`` only stores its arguments,
``fit`` validates, fits and returns ``self``, learned attributes end in ``_``,
``random_state=None`` means secure (non-reproducible) noise.

* :class:`PrivateLinearSVM` — hinge loss, labels ``±1`` (or any two classes,
  mapped to ``±1``), ``score`` = accuracy;
* :class:`PrivateLADRegressor` — absolute loss (median regression), ``score`` = R²;
* :class:`PrivateQuantileRegressor` — pinball loss at ``quantile``, ``score`` = R².

The domain is the ℓ2 ball of radius ``radius`` around 0 in the space of
``(coef, intercept)``; with ``fit_intercept=True`` a constant feature 1 is
appended (so ``G_k`` must bound ``||(x, 1)||``'s moments — the default
``G_k=None`` raises, since a private estimator cannot read it off the data).
"""

from __future__ import annotations

import numbers

import cvxpy as cp
import numpy as np

from cvxdp import losses
from cvxdp._validation import finite_array, positive_finite
from cvxdp.error import DataError, ParameterError
from cvxdp.model import Model
from cvxdp.problem import PrivateProblem, PrivateResult


class _PrivateLinearModel:
    _loss_name = "absolute"

    def __init__(self, *, epsilon: float = 1.0, moment_k: float = 4.0, G_k: float | None = None,
                 G_2: float | None = None, radius: float = 1.0, fit_intercept: bool = True,
                 algorithm: str = "population", profile: str = "tight", delta: float = 0.1,
                 random_state: object = None) -> None:
        self.epsilon = epsilon
        self.moment_k = moment_k
        self.G_k = G_k
        self.G_2 = G_2
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.algorithm = algorithm
        self.profile = profile
        self.delta = delta
        self.random_state = random_state

    # scikit-learn compatibility
    def get_params(self, deep: bool = True) -> dict:
        keys = ["epsilon", "moment_k", "G_k", "G_2", "radius", "fit_intercept", "algorithm",
                "profile", "delta", "random_state"]
        return {k: getattr(self, k) for k in keys}

    def set_params(self, **params) -> _PrivateLinearModel:
        for k, v in params.items():
            if k not in self.get_params():
                raise ParameterError(f"unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    def _loss(self, w: cp.Variable):
        return getattr(losses, self._loss_name)(w)

    def _design(self, X: np.ndarray) -> np.ndarray:
        return np.hstack([X, np.ones((X.shape[0], 1))]) if self.fit_intercept else X

    def _check_X(self, X: object, fitted: bool) -> np.ndarray:
        X = finite_array("X", X, ndim=2)
        if fitted and X.shape[1] != self.n_features_in_:
            raise DataError(f"X has {X.shape[1]} features, the model was fitted with "
                            f"{self.n_features_in_}.")
        return X

    def _transform_y(self, y: object) -> np.ndarray:
        return finite_array("y", y, ndim=1)

    def fit(self, X: object, y: object) -> _PrivateLinearModel:
        """Fit an ε-DP linear model on ``(X, y)``; returns ``self``."""
        if self.G_k is None:
            raise ParameterError(
                "G_k (a public bound on the k-th moment of the per-example gradient norm) is "
                "required; it must come from domain knowledge or a separate private estimate, "
                "never from the training data itself."
            )
        if not isinstance(self.fit_intercept, bool):
            raise ParameterError("fit_intercept must be True or False.")
        positive_finite("radius", self.radius)
        X = self._check_X(X, fitted=False)
        yt = self._transform_y(y)
        if yt.shape[0] != X.shape[0]:
            raise DataError(f"X has {X.shape[0]} rows but y has {yt.shape[0]}.")
        Z = self._design(X)
        w = cp.Variable(Z.shape[1])
        model = Model(self._loss(w), [cp.norm(w, 2) <= self.radius])
        result = PrivateProblem(model).solve(
            {"x": Z, "y": yt}, epsilon=self.epsilon, moment_k=self.moment_k, G_k=self.G_k,
            G_2=self.G_2, algorithm=self.algorithm, profile=self.profile, delta=self.delta,
            random_state=self.random_state)
        self.n_features_in_ = X.shape[1]
        self.result_: PrivateResult = result
        self.ledger_ = result.ledger
        self.epsilon_spent_ = result.epsilon_spent
        coef = result.w
        self.coef_ = coef[:-1].copy() if self.fit_intercept else coef.copy()
        self.intercept_ = float(coef[-1]) if self.fit_intercept else 0.0
        return self

    def decision_function(self, X: object) -> np.ndarray:
        if not hasattr(self, "coef_"):
            raise ParameterError("this estimator is not fitted yet; call fit(X, y) first.")
        X = self._check_X(X, fitted=True)
        return X @ self.coef_ + self.intercept_

    def predict(self, X: object) -> np.ndarray:
        return self.decision_function(X)

    def score(self, X: object, y: object) -> float:
        """Coefficient of determination R² of the predictions."""
        y = finite_array("y", y, ndim=1)
        pred = self.predict(X)
        ss_res = float(np.sum((y - pred) ** 2))
        ss_tot = float(np.sum((y - y.mean()) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0


class PrivateLinearSVM(_PrivateLinearModel):
    """ε-DP linear SVM (hinge loss).  ``classes_`` holds the two labels; the second maps to ``+1``."""

    _loss_name = "hinge"

    def _transform_y(self, y: object) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim != 1:
            raise DataError(f"y must be one-dimensional, got shape {y.shape}.")
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            raise DataError("y contains NaN or infinite labels.")
        classes = np.unique(y)
        if classes.size != 2:
            raise DataError(f"PrivateLinearSVM needs exactly two classes, found {classes.size}.")
        self.classes_ = classes
        return np.where(y == classes[1], 1.0, -1.0)

    def predict(self, X: object) -> np.ndarray:
        scores = self.decision_function(X)
        return np.where(scores >= 0, self.classes_[1], self.classes_[0])

    def score(self, X: object, y: object) -> float:
        """Accuracy."""
        y = np.asarray(y)
        return float(np.mean(self.predict(X) == y))


class PrivateLADRegressor(_PrivateLinearModel):
    """ε-DP least-absolute-deviations (median) regression."""

    _loss_name = "absolute"


class PrivateQuantileRegressor(_PrivateLinearModel):
    """ε-DP quantile regression (pinball loss at ``quantile``)."""

    _loss_name = "pinball"

    def __init__(self, *, quantile: float = 0.5, **kwargs) -> None:
        super().__init__(**kwargs)
        self.quantile = quantile

    def get_params(self, deep: bool = True) -> dict:
        return {**super().get_params(deep), "quantile": self.quantile}

    def _loss(self, w: cp.Variable):
        if not isinstance(self.quantile, numbers.Real) or not 0 < float(self.quantile) < 1:
            raise ParameterError(f"quantile must lie in (0, 1), got {self.quantile!r}.")
        return losses.pinball(w, float(self.quantile))


__all__ = ["PrivateLADRegressor", "PrivateLinearSVM", "PrivateQuantileRegressor"]
