"""Batched numeric evaluation of CVXPY expressions over many examples.

``evaluate(expr, {w: W, x: X, y: Y})`` returns ``f(w_i, z_i)`` for every
example ``i`` in one pass of numpy operations, where each leaf's value carries
a leading batch axis (length ``m``, or 1 to broadcast).  CVXPY itself
evaluates one assignment of values at a time; looping over 10^5 examples
through ``Parameter.value`` and ``Expression.value`` would dominate the cost of
every certificate, so cvxdp walks the expression tree itself.

Supported: the affine atoms (sums, products, matrix products, indexing,
reshapes, stacking, transposes, sums along axes), the elementwise atoms
``abs, maximum, minimum, huber, power, exp, log, logistic, entr, xexp`` and the
reductions ``max, min, pnorm, norm1, norm_inf, quad_over_lin, quad_form,
log_sum_exp, sum_largest``.  Anything else raises
:class:`UnsupportedAtom`, and :func:`evaluate_per_example` is the (slow,
exact) fallback through CVXPY.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import cvxpy as cp
import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from cvxdp.numerics import row_combine, row_dot

logger = logging.getLogger(__name__)


class UnsupportedAtom(NotImplementedError):
    """The batched evaluator has no rule for an atom; use :func:`evaluate_per_example`."""


def _expand(val: np.ndarray, shape: tuple[int, ...], out_ndim: int) -> np.ndarray:
    """Reshape a batched value ``(B, *shape)`` so numpy broadcasts it against ``out_ndim`` axes."""
    pad = out_ndim - len(shape)
    return val.reshape((val.shape[0],) + (1,) * pad + tuple(shape))


def _const(expr: cp.Expression) -> np.ndarray:
    v = expr.value
    if sp.issparse(v):
        v = v.toarray()
    return np.asarray(v, dtype=float)[None, ...]


def _flatten_f(val: np.ndarray) -> np.ndarray:
    nd = val.ndim - 1
    return val.transpose((0,) + tuple(range(nd, 0, -1))).reshape(val.shape[0], -1)


def _unflatten_f(flat: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    rev = tuple(reversed(shape))
    arr = flat.reshape((flat.shape[0],) + rev)
    nd = len(shape)
    return arr.transpose((0,) + tuple(range(nd, 0, -1)))


def _axis(expr: cp.Expression, n_arg_dims: int) -> tuple[int, ...] | None:
    ax = getattr(expr, "axis", None)
    if ax is None:
        return tuple(range(1, n_arg_dims + 1)) if n_arg_dims else None
    if isinstance(ax, int):
        ax = (ax,)
    return tuple((a % n_arg_dims) + 1 for a in ax)


def _reduce(expr: cp.Expression, val: np.ndarray, fn: Callable) -> np.ndarray:
    nd = val.ndim - 1
    axes = _axis(expr, nd)
    if axes is None:
        return val
    out = fn(val, axis=axes)
    return out.reshape((val.shape[0],) + tuple(expr.shape))


def _matmul(a: np.ndarray, ashape: tuple, b: np.ndarray, bshape: tuple) -> np.ndarray:
    if len(ashape) == 0 or len(bshape) == 0:
        nd = max(len(ashape), len(bshape))
        return _expand(a, ashape, nd) * _expand(b, bshape, nd)
    # row by row (cvxdp.numerics.row_dot), so an example's value does not depend on the batch
    if len(ashape) == 1:
        return row_dot(a, b) if len(bshape) == 1 else row_combine(a, b)
    if len(bshape) == 1:
        return row_dot(a, b[..., None, :])
    return row_combine(a, b[..., None, :, :])


def _power(x: np.ndarray, p: float) -> np.ndarray:
    if p == 2:
        return x * x
    if p == 1:
        return x
    with np.errstate(divide="ignore", invalid="ignore"):
        if p < 0:
            return np.where(x > 0, np.power(np.maximum(x, 1e-300), p), np.inf)
        if 0 < p < 1:
            return np.where(x >= 0, np.power(np.maximum(x, 0.0), p), -np.inf)
        if float(p).is_integer() and int(p) % 2 == 0:
            return np.power(x, p)
        return np.where(x >= 0, np.power(np.maximum(x, 0.0), p), np.inf)


def _huber(x: np.ndarray, M: float) -> np.ndarray:
    ax = np.abs(x)
    return np.where(ax <= M, x * x, 2.0 * M * ax - M * M)


def evaluate(expr: cp.Expression, values: Mapping[cp.Expression | int, np.ndarray]) -> np.ndarray:
    """``expr`` evaluated for every example.

    Parameters
    ----------
    expr:
        A CVXPY expression.
    values:
        Maps each leaf (``cp.Variable`` / ``cp.Parameter``, or its ``id``) to an
        array of shape ``(B, *leaf.shape)``; ``B`` is the batch size (or 1 to
        broadcast one value to every example).

    Returns
    -------
    numpy.ndarray of shape ``(B, *expr.shape)``.

    Raises
    ------
    UnsupportedAtom
        When the tree contains an atom without a batched rule.
    """
    vals = {(k if isinstance(k, int) else k.id): np.asarray(v, dtype=float) for k, v in values.items()}
    memo: dict[int, np.ndarray] = {}
    return _eval(expr, vals, memo)


def _eval(e: cp.Expression, vals: dict[int, np.ndarray], memo: dict[int, np.ndarray]) -> np.ndarray:
    key = id(e)
    if key in memo:
        return memo[key]
    out = _eval_node(e, vals, memo)
    memo[key] = out
    return out


def _eval_node(e: cp.Expression, vals: dict[int, np.ndarray],
               memo: dict[int, np.ndarray]) -> np.ndarray:
    name = type(e).__name__
    if isinstance(e, cp.Variable | cp.Parameter):
        if e.id not in vals:
            raise KeyError(f"no value for {name} {e.name()}")
        v = vals[e.id]
        return v.reshape((v.shape[0],) + tuple(e.shape))
    if isinstance(e, cp.Constant):
        return _const(e)
    args = [_eval(a, vals, memo) for a in e.args]
    shapes = [tuple(a.shape) for a in e.args]
    out_shape = tuple(e.shape)
    nd = len(out_shape)
    B = max(a.shape[0] for a in args) if args else 1

    def ex(i: int) -> np.ndarray:
        return _expand(args[i], shapes[i], nd)

    if name == "AddExpression":
        total = ex(0)
        for i in range(1, len(args)):
            total = total + ex(i)
        return np.broadcast_to(total, (total.shape[0],) + out_shape)
    if name == "NegExpression":
        return -args[0]
    if name == "MulExpression":
        return _matmul(args[0], shapes[0], args[1], shapes[1]).reshape((-1,) + out_shape)
    if name == "multiply":
        return np.broadcast_to(ex(0) * ex(1), (B,) + out_shape)
    if name == "DivExpression":
        return np.broadcast_to(ex(0) / ex(1), (B,) + out_shape)
    if name == "Sum":
        return _reduce(e, args[0], np.sum)
    if name == "Promote":
        return np.broadcast_to(args[0].reshape((args[0].shape[0],) + (1,) * nd), (args[0].shape[0],)
                               + out_shape)
    if name in ("broadcast_to",):
        return np.broadcast_to(ex(0), (args[0].shape[0],) + out_shape)
    if name in ("index", "special_index"):
        key = e.key if isinstance(e.key, tuple) else (e.key,)
        sub = args[0][(slice(None),) + tuple(key)]
        return sub.reshape((sub.shape[0],) + out_shape)
    if name == "reshape":
        return _unflatten_f(_flatten_f(args[0]), out_shape) if getattr(e, "order", "F") == "F" \
            else args[0].reshape((args[0].shape[0],) + out_shape)
    if name == "transpose":
        axes = e.axes if getattr(e, "axes", None) is not None else tuple(range(len(shapes[0])))[::-1]
        return args[0].transpose((0,) + tuple(a + 1 for a in axes))
    if name in ("Hstack", "Vstack"):
        Bm = max(a.shape[0] for a in args)
        parts = [np.broadcast_to(a, (Bm,) + a.shape[1:]) for a in args]
        if name == "Hstack":
            axis = 1 if len(shapes[0]) == 1 else 2
            return np.concatenate(parts, axis=axis)
        parts = [p.reshape((Bm, 1, -1)) if len(s) == 1 else p for p, s in zip(parts, shapes,
                                                                             strict=True)]
        return np.concatenate(parts, axis=1).reshape((Bm,) + out_shape)
    if name == "abs":
        return np.abs(args[0])
    if name == "maximum":
        res = ex(0)
        for i in range(1, len(args)):
            res = np.maximum(res, ex(i))
        return np.broadcast_to(res, (res.shape[0],) + out_shape)
    if name == "minimum":
        res = ex(0)
        for i in range(1, len(args)):
            res = np.minimum(res, ex(i))
        return np.broadcast_to(res, (res.shape[0],) + out_shape)
    if name == "huber":
        return _huber(args[0], float(np.asarray(e.M.value)))
    if name in ("PowerApprox", "Power", "power"):
        p = e.p.value if hasattr(e.p, "value") else e.p
        return _power(args[0], float(p))
    if name == "exp":
        return np.exp(args[0])
    if name == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(args[0] > 0, np.log(np.maximum(args[0], 1e-300)), -np.inf)
    if name == "logistic":
        return np.logaddexp(0.0, args[0])
    if name == "entr":
        x = args[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x > 0, -x * np.log(np.maximum(x, 1e-300)), np.where(x == 0, 0.0, -np.inf))
    if name == "xexp":
        return args[0] * np.exp(args[0])
    if name == "max":
        return _reduce(e, args[0], np.max)
    if name == "min":
        return _reduce(e, args[0], np.min)
    if name in ("Pnorm", "PnormApprox"):
        p = float(e.p)
        return _reduce(e, args[0], lambda v, axis: np.sum(np.abs(v) ** p, axis=axis) ** (1.0 / p))
    if name == "norm1":
        return _reduce(e, args[0], lambda v, axis: np.sum(np.abs(v), axis=axis))
    if name == "norm_inf":
        return _reduce(e, args[0], lambda v, axis: np.max(np.abs(v), axis=axis))
    if name == "quad_over_lin":
        x = args[0]
        num = np.sum(x.reshape(x.shape[0], -1) ** 2, axis=1)
        den = args[1].reshape(args[1].shape[0])
        return (num / den).reshape((-1,) + out_shape)
    if name == "QuadForm":
        x = args[0].reshape(args[0].shape[0], -1)
        P = args[1].reshape(args[1].shape[0], x.shape[1], x.shape[1])
        return row_dot(x, row_combine(x, P)).reshape((-1,) + out_shape)
    if name == "log_sum_exp":
        return _reduce(e, args[0], logsumexp)
    if name == "sum_largest":
        k = int(e.k)
        flat = args[0].reshape(args[0].shape[0], -1)
        return np.sort(flat, axis=1)[:, -k:].sum(axis=1).reshape((-1,) + out_shape)
    raise UnsupportedAtom(f"no batched rule for CVXPY atom {name!r}")


class _Identity:
    """The Jacobian of the model variable itself (materialized only where a rule needs the array)."""


_IDENTITY = _Identity()


def affine_jacobian(expr: cp.Expression, w: cp.Variable,
                    values: Mapping[cp.Expression | int, np.ndarray]) -> np.ndarray:
    """The coefficients of ``expr`` in ``w`` for every example: ``J`` of shape ``(B, *expr.shape, d)`` with
    ``expr(y) = expr(0) + J · y``, for an expression affine in the vector variable ``w``.

    Forward mode on the expression tree: each node's coefficients from its arguments' by the rule of
    its atom (a sum adds them, a product with a ``w``-free factor scales them, a matrix product with
    ``w`` itself reads the matrix), so each coefficient is rounded as the expression's own operations
    round it — no difference quotient, whose cancellation loses the coefficient beside a large constant.
    ``values`` holds the data leaves as for :func:`evaluate` (``w``'s entry, if any, is not read).  Every
    operation is within a row (products through :func:`cvxdp.numerics.row_combine`, which keeps a
    row's bits whatever the batch around it), so a row's coefficients depend on its own data only.
    Atoms without a rule here (reshapes, stacks, transposes, sums
    along an axis, anything not affine) raise :class:`UnsupportedAtom`.
    """
    if len(w.shape) != 1:
        raise UnsupportedAtom("coefficients are read for a vector variable only")
    vals = {(k if isinstance(k, int) else k.id): np.asarray(v, dtype=float) for k, v in values.items()}
    vals[w.id] = np.zeros((1,) + tuple(w.shape))
    memo: dict[int, np.ndarray] = {}
    out = _jac(expr, w, vals, memo, {})
    d = int(w.size)
    if out is None:
        return np.zeros((1,) + tuple(expr.shape) + (d,))
    return _dense(out, d)


def _dense(J: np.ndarray | _Identity, d: int) -> np.ndarray:
    return np.eye(d)[None] if isinstance(J, _Identity) else J


def _jac(e: cp.Expression, w: cp.Variable, vals: dict, memo: dict,
         jmemo: dict) -> np.ndarray | _Identity | None:
    key = id(e)
    if key not in jmemo:
        jmemo[key] = _jac_node(e, w, vals, memo, jmemo)
    return jmemo[key]


def _jac_node(e: cp.Expression, w: cp.Variable, vals: dict, memo: dict,
              jmemo: dict) -> np.ndarray | _Identity | None:
    if isinstance(e, cp.Variable):
        if e.id != w.id:
            raise UnsupportedAtom("an expression in another variable")
        return _IDENTITY
    if isinstance(e, cp.Parameter | cp.Constant) or w.id not in {v.id for v in e.variables()}:
        return None
    name = type(e).__name__
    d = int(w.size)
    out_shape = tuple(e.shape)
    nd = len(out_shape)
    shapes = [tuple(a.shape) for a in e.args]
    jacs = [_jac(a, w, vals, memo, jmemo) for a in e.args]

    def expand(J: np.ndarray | _Identity, shape: tuple) -> np.ndarray:
        J = _dense(J, d)
        return J.reshape((J.shape[0],) + (1,) * (nd - len(shape)) + tuple(shape) + (d,))

    def value(i: int) -> np.ndarray:
        return _eval(e.args[i], vals, memo)

    if name == "AddExpression":
        terms = [expand(J, s) for J, s in zip(jacs, shapes, strict=True) if J is not None]
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return np.broadcast_to(total, (total.shape[0],) + out_shape + (d,))
    if name == "NegExpression":
        return -_dense(jacs[0], d)
    if name in ("multiply", "MulExpression", "DivExpression"):
        free = [i for i, J in enumerate(jacs) if J is None]
        if len(free) != 1:
            raise UnsupportedAtom(f"{name} of two factors in w is not affine")
        c_i = free[0]
        j_i = 1 - c_i
        c, cs, J = value(c_i), shapes[c_i], jacs[j_i]
        if name == "DivExpression":
            if c_i != 1:
                raise UnsupportedAtom("division by an expression in w")
            out = expand(J, shapes[0]) / _expand(c, cs, nd)[..., None]
            return np.broadcast_to(out, (out.shape[0],) + out_shape + (d,))
        if name == "multiply" or len(cs) == 0 or len(shapes[j_i]) == 0:
            out = _expand(c, cs, nd)[..., None] * expand(J, shapes[j_i])
            return np.broadcast_to(out, (out.shape[0],) + out_shape + (d,))
        js = shapes[j_i]
        if len(js) != 1:
            raise UnsupportedAtom("a matrix product with a matrix in w")
        if isinstance(J, _Identity):  # c @ w reads c's rows; w @ c reads c's columns
            out = c if c_i == 0 else np.swapaxes(c, -1, -2) if len(cs) == 2 else c
        elif c_i == 0:
            out = row_combine(c, J if len(cs) == 1 else J[..., None, :, :])
        else:
            out = (row_combine(c, J) if len(cs) == 1
                   else row_combine(np.swapaxes(c, -1, -2), J[..., None, :, :]))
        return out.reshape((out.shape[0],) + out_shape + (d,))
    if name == "Sum" and getattr(e, "axis", None) is None:
        J = _dense(jacs[0], d)
        axes = tuple(range(1, J.ndim - 1))
        return np.sum(J, axis=axes) if axes else J
    if name == "Promote":
        J = _dense(jacs[0], d)
        return np.broadcast_to(J.reshape((J.shape[0],) + (1,) * nd + (d,)), (J.shape[0],) + out_shape + (d,))
    if name == "index":
        key = e.key if isinstance(e.key, tuple) else (e.key,)
        if any(k is Ellipsis or k is None for k in key):
            raise UnsupportedAtom("an index with an ellipsis or a new axis")
        sub = _dense(jacs[0], d)[(slice(None),) + tuple(key) + (slice(None),)]
        return sub.reshape((sub.shape[0],) + out_shape + (d,))
    raise UnsupportedAtom(f"no coefficient rule for CVXPY atom {name!r}")


def evaluate_per_example(expr: cp.Expression, leaves: Mapping[cp.Expression, np.ndarray],
                         m: int) -> np.ndarray:
    """The exact, slow fallback: set each leaf's ``.value`` per example and read ``expr.value``.

    Every leaf gets its previous value back afterwards — ``None`` included: a placeholder left holding
    the last example's data would be data stored on the user's model (found by review).
    """
    out = np.empty((m,) + tuple(expr.shape))
    saved = {leaf: leaf.value for leaf in leaves}
    try:
        for i in range(m):
            for leaf, arr in leaves.items():
                a = np.asarray(arr)
                _assign(leaf, (a[i] if a.shape[0] == m else a[0]).reshape(leaf.shape))
            out[i] = np.asarray(expr.value, dtype=float)
    finally:
        for leaf, v in saved.items():
            _assign(leaf, v)
    return out


def _assign(leaf: cp.Expression, value: np.ndarray) -> None:
    """Set a leaf's value; a variable's without CVXPY's attribute check (a query point outside ``W``'s
    sign or bounds is still a point the extension evaluates ``f`` at)."""
    if isinstance(leaf, cp.Variable):
        leaf.save_value(value)
    else:
        leaf.value = value  # None clears it


def is_batchable(expr: cp.Expression) -> bool:
    """True when every atom in ``expr`` has a batched rule."""
    try:
        leaves = {leaf: np.zeros((1,) + tuple(leaf.shape)) for leaf in expr.variables()
                  + expr.parameters()}
        evaluate(expr, leaves)
    except UnsupportedAtom:
        return False
    except (ValueError, FloatingPointError, KeyError, ZeroDivisionError):
        return True
    return True
