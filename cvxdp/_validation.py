"""Input checks shared by every public entry point.

All checks run before any solve or any noise draw, and raise cvxdp exceptions
whose message names the offending argument and the fix.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from cvxdp.error import DataError, ParameterError


def positive_finite(name: str, value: object, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking it is a real number > 0 (NaN rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.floating | np.integer):
        raise ParameterError(
            f"{name} must be a real number > 0, got {value!r} of type {type(value).__name__}."
        )
    v = float(value)
    if math.isnan(v):
        raise ParameterError(f"{name} is NaN; pass a finite number > 0.")
    if math.isinf(v) and not (allow_inf and v > 0):
        raise ParameterError(f"{name} must be finite, got {v}; pass a finite number > 0.")
    if v <= 0:
        raise ParameterError(f"{name} must be > 0, got {v}.")
    return v


#: Smallest and largest ε that cvxdp accepts or accepts silently.
EPSILON_MIN = 1e-10
EPSILON_WARN = 100.0
#: Largest |value| accepted in data: squares and products of such values stay finite in float64.
DATA_MAX = 1e100
#: Largest moment order k (larger k is the Lipschitz case in all but name).
MOMENT_MAX = 1000.0


def privacy_epsilon(value: object, *, warn: bool = True) -> float:
    """Validate a privacy parameter ε: finite, ≥ 1e-10; above 100 warn that it protects nothing."""
    import warnings

    from cvxdp.error import PrivacyLeakWarning

    eps = positive_finite("epsilon", value)
    if eps < EPSILON_MIN:
        raise ParameterError(
            f"epsilon = {eps:g} is below {EPSILON_MIN:g}: the noise would be so large (scale ∝ 1/ε) that "
            "the output is pure noise and its arithmetic overflows; choose a larger epsilon."
        )
    if warn and eps > EPSILON_WARN:
        warnings.warn(f"epsilon = {eps:g} gives no meaningful privacy protection (e^ε overflows any "
                      "useful bound); proceeding as asked.", PrivacyLeakWarning, stacklevel=3)
    return eps


def at_least(name: str, value: object, lower: float) -> float:
    """Return ``value`` as a finite float after checking ``value >= lower``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.floating | np.integer):
        raise ParameterError(f"{name} must be a real number >= {lower}, got {value!r}.")
    v = float(value)
    if not math.isfinite(v):
        raise ParameterError(f"{name} must be finite, got {v}.")
    if v < lower:
        raise ParameterError(f"{name} must be >= {lower}, got {v}.")
    return v


def probability(name: str, value: object) -> float:
    """Return ``value`` as a float in the open interval (0, 1)."""
    v = positive_finite(name, value)
    if v >= 1:
        raise ParameterError(f"{name} must lie strictly between 0 and 1, got {v}.")
    return v


def positive_int(name: str, value: object) -> int:
    """Return ``value`` as an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"{name} must be a positive integer, got {value!r}.")
    if int(value) < 1:
        raise ParameterError(f"{name} must be >= 1, got {value}.")
    return int(value)


def finite_array(name: str, value: object, *, ndim: int | None = None,
                 shape: tuple[int | None, ...] | None = None) -> np.ndarray:
    """Return ``value`` as a float64 array after checking dtype, shape and finiteness."""
    try:
        arr = np.asarray(value)
    except Exception as exc:  # pragma: no cover - numpy raises many types here
        raise DataError(f"{name} could not be converted to an array: {exc}") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        # the dtype's kind only: a string dtype's width (<U7) is the longest entry, a data-derived number
        kind = {"U": "text", "S": "bytes", "O": "Python objects", "M": "datetimes",
                "m": "timedeltas"}.get(arr.dtype.kind, "non-numeric values")
        raise DataError(f"{name} must be numeric (float, int or bool), got {kind}; convert it to numbers "
                        "before fitting.")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise DataError(f"{name} must be real, got complex dtype {arr.dtype}.")
    arr = arr.astype(np.float64, copy=False)
    if ndim is not None and arr.ndim != ndim:
        raise DataError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}.")
    if shape is not None:
        if arr.ndim != len(shape) or any(
            s is not None and s != a for s, a in zip(shape, arr.shape, strict=True)
        ):
            want = "(" + ", ".join("m" if s is None else str(s) for s in shape) + ")"
            raise DataError(f"{name} must have shape {want}, got {arr.shape}.")
    if arr.size and not np.all(np.isfinite(arr)):
        raise DataError(  # no count or position of the bad entries: those are data-derived
            f"{name} contains NaN or infinite values; remove or impute them before fitting."
        )
    if arr.size and float(np.max(np.abs(arr))) > DATA_MAX:
        raise DataError(
            f"{name} has entries of magnitude above {DATA_MAX:g}, whose squares overflow float64. "
            "Rescale the data (a public rescaling keeps privacy)."
        )
    return arr
