"""Real data shipped inside installed packages (no download at run time).

* :func:`engel` — statsmodels' Engel food-expenditure data (235 Belgian households,
  1857): quantile regression of food expenditure on income; income is heavy-tailed.
* :func:`breast_cancer` — scikit-learn's Wisconsin diagnostic data (569 × 30):
  a linear SVM (hinge loss).
* :func:`randhie` — statsmodels' RAND Health Insurance Experiment (20,190 rows):
  LAD regression of outpatient visits, a heavy-tailed count.

statsmodels and scikit-learn are optional: ``pip install "cvxdp[data]"``.

**Public preprocessing only.**  A private analyst may not rescale features by
statistics of the training data.  Every transformation here uses fixed
constants chosen from the variables' *meaning* (units, documented ranges) and
never looks at the values: unit changes (francs → thousands of francs, visits
→ tens of visits), ``log1p`` of non-negative measurements divided by a fixed
constant, an intercept column of ones.  The train/test split is a seeded random
permutation, independent of the data.  No moment bound ``G_k`` is reported for
real data: the runs estimate it privately (``G_k="auto"``).
"""

from __future__ import annotations

import numpy as np

from cvxdp.datasets.synthetic import Task
from cvxdp.error import DataError


def _split(X: np.ndarray, y: np.ndarray, seed: int, test_fraction: float = 0.3):
    rng = np.random.default_rng(seed)
    order = rng.permutation(X.shape[0])
    cut = round(X.shape[0] * (1.0 - test_fraction))
    tr, te = order[:cut], order[cut:]
    return X[tr], y[tr], X[te], y[te]


def _require(module: str):
    try:
        return __import__(module)
    except ImportError as exc:  # pragma: no cover - exercised when the extra is missing
        raise DataError(f"this loader needs {module}; install it with pip install 'cvxdp[data]'.") from exc


def engel(seed: int = 0, quantile: float = 0.5) -> Task:
    """Food expenditure on income (thousands of Belgian francs), with an intercept; pinball loss."""
    _require("statsmodels")
    from statsmodels.datasets import engel as source

    df = source.load_pandas().data
    income = df["income"].to_numpy(float) / 1000.0
    food = df["foodexp"].to_numpy(float) / 1000.0
    X = np.column_stack([income, np.ones_like(income)])
    Xtr, ytr, Xte, yte = _split(X, food, seed)
    return Task(name="engel (statsmodels)", loss="pinball", X_train=Xtr, y_train=ytr, X_test=Xte,
                y_test=yte, radius=2.0, moments={},
                description="235 households, 1857 Belgium: food expenditure vs income (k-francs)",
                meta={"quantile": quantile})


def breast_cancer(seed: int = 0) -> Task:
    """Wisconsin breast cancer: ``log1p`` of the 30 non-negative measurements / 5, an intercept; labels ±1."""
    _require("sklearn")
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    X = np.log1p(np.asarray(data.data, float)) / 5.0
    X = np.column_stack([X, np.ones(X.shape[0])])
    y = np.where(np.asarray(data.target) == 1, 1.0, -1.0)
    Xtr, ytr, Xte, yte = _split(X, y, seed)
    return Task(name="breast cancer (scikit-learn)", loss="hinge", X_train=Xtr, y_train=ytr, X_test=Xte,
                y_test=yte, radius=5.0, moments={},
                description="569 tumours, 30 measurements: benign (+1) vs malignant (−1)")


def randhie(seed: int = 0) -> Task:
    """RAND HIE: outpatient visits / 10 on nine covariates (fixed scalings) and an intercept; LAD."""
    _require("statsmodels")
    from statsmodels.datasets import randhie as source

    df = source.load_pandas().data
    y = df["mdvis"].to_numpy(float) / 10.0
    scales = {"lncoins": 5.0, "idp": 1.0, "lpi": 10.0, "fmde": 10.0, "physlm": 1.0, "disea": 10.0,
              "hlthg": 1.0, "hlthf": 1.0, "hlthp": 1.0}
    X = np.column_stack([df[c].to_numpy(float) / s for c, s in scales.items()] + [np.ones(len(df))])
    Xtr, ytr, Xte, yte = _split(X, y, seed)
    return Task(name="randhie (statsmodels)", loss="absolute", X_train=Xtr, y_train=ytr, X_test=Xte,
                y_test=yte, radius=2.0, moments={},
                description="20,190 person-years: outpatient visits (tens) vs insurance and health")


REAL = {"engel": engel, "breast-cancer": breast_cancer, "randhie": randhie}
