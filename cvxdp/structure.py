"""Recognizing the structure of a per-example loss from its CVXPY expression tree.

cvxdp certifies the Lipschitz extension through the conjugate representation

    f(y, z) = max_{π ∈ Π} [ πᵀ (A(z) y + b(z)) − ψ(π) ],

which it can evaluate exactly when the loss has one of these shapes:

* **piecewise linear** (polyhedral): ``max_j (a_j(z)ᵀ y + b_j(z))`` — built from
  affine expressions with ``maximum``, ``max``, ``pos``, ``neg``, ``abs``,
  nonnegative scaling and sums (a sum of maxima is a maximum over all
  combinations).  ``Π`` is the simplex and ``ψ = 0`` (Appendix E.3).
* **generalized linear with a smooth link**: ``c · φ(a(z)ᵀ y + b(z))`` with
  ``φ`` Huber, square or logistic.

Everything else is *generic*: certified through the conic dual of the
compiled problem (see :mod:`cvxdp.extension.generic`).  Recognition is
symbolic; the numeric coefficients ``a_j(z_i), b_j(z_i)`` are computed per
batch by :func:`affine_coefficients`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from cvxdp.evaluation import UnsupportedAtom, affine_jacobian, evaluate, evaluate_per_example
from cvxdp.links import HuberLink, LogisticLink, SquareLink

#: A sum of piecewise-linear terms multiplies piece counts; beyond this many
#: pieces the loss is treated as generic.
MAX_PIECES = 64


@dataclass(frozen=True)
class SharedArgument:
    """Pieces that are public multiples of one scalar affine argument: ``piece_j = κ_j · u + e_j``.

    Hinge ``max(u, 0)``, absolute value ``max(u, −u)`` and pinball ``max(τ r, (τ − 1) r)`` have this
    shape: the loss is ``φ(u)`` with the public link ``φ(t) = max_j (κ_j t + e_j)``, so an example's
    generalized-linear form needs the coefficients of ``u`` alone — one affine recovery instead of one
    per piece, and no test that the pieces are parallel (they are, by the expression).  ``κ`` and ``e``
    are read off the expression's constants (no data placeholder enters them).
    """

    argument: cp.Expression
    slopes: tuple[float, ...]
    intercepts: tuple[float, ...]


@dataclass(frozen=True)
class PiecewiseLinearStructure:
    """``f(y) = max_j piece_j(y)`` with each piece a scalar expression affine in ``y`` (and, where the
    pieces are public multiples of one affine argument, that argument: :class:`SharedArgument`)."""

    pieces: tuple[cp.Expression, ...]
    kind: str = "piecewise-linear"
    shared: SharedArgument | None = None


@dataclass(frozen=True)
class SmoothGLMStructure:
    """``f(y) = link(argument(y))`` with ``argument`` scalar affine and ``link`` smooth."""

    argument: cp.Expression
    link: HuberLink | SquareLink | LogisticLink
    kind: str = "smooth-glm"


@dataclass(frozen=True)
class GenericStructure:
    """No recognized structure; certified through the conic dual, if at all."""

    kind: str = "generic"


Structure = PiecewiseLinearStructure | SmoothGLMStructure | GenericStructure


def _scalar_const(e: cp.Expression) -> float | None:
    if e.is_constant() and e.size == 1 and not e.parameters():
        return float(np.asarray(e.value).ravel()[0])
    return None


def _scaled(e: cp.Expression) -> tuple[float, cp.Expression] | None:
    """``(c, inner)`` when ``e = c · inner`` with a constant scalar ``c``."""
    name = type(e).__name__
    if name in ("multiply", "MulExpression") and len(e.args) == 2:
        a, b = e.args
        ca, cb = _scalar_const(a), _scalar_const(b)
        if ca is not None:
            return ca, b
        if cb is not None:
            return cb, a
    if name == "DivExpression":
        c = _scalar_const(e.args[1])
        if c is not None and c != 0:
            return 1.0 / c, e.args[0]
    if name == "NegExpression":
        return -1.0, e.args[0]
    return None


def _pieces(e: cp.Expression, w: cp.Variable) -> list[cp.Expression] | None:
    """Scalar affine pieces whose maximum equals ``e``, or ``None``."""
    if e.size != 1:
        return None
    if e.is_affine():
        return [e]
    name = type(e).__name__
    if name == "maximum":
        out: list[cp.Expression] = []
        for a in e.args:
            if a.size != 1:
                return None
            p = _pieces(a, w)
            if p is None:
                return None
            out += p
        return out
    if name == "max" and e.axis is None and e.args[0].is_affine():
        arg = e.args[0]
        return [arg[idx] for idx in np.ndindex(*arg.shape)]
    if name == "abs" and e.args[0].is_affine():
        return [e.args[0], -e.args[0]]
    sc = _scaled(e)
    if sc is not None:
        c, inner = sc
        if c >= 0:
            p = _pieces(inner, w)
            return None if p is None else [c * q for q in p]
        # -min(affine...) = max(-affine...)
        if type(inner).__name__ == "minimum" and all(a.is_affine() and a.size == 1
                                                      for a in inner.args):
            return [c * a for a in inner.args]
        if type(inner).__name__ == "min" and inner.axis is None and inner.args[0].is_affine():
            arg = inner.args[0]
            return [c * arg[idx] for idx in np.ndindex(*arg.shape)]
        return None
    if name == "AddExpression":
        groups = []
        for a in e.args:
            p = _pieces(a, w) if a.size == 1 else None
            if p is None:
                return None
            groups.append(p)
        count = int(np.prod([len(g) for g in groups]))
        if count > MAX_PIECES:
            return None
        return [sum(combo[1:], combo[0]) for combo in itertools.product(*groups)]
    return None


def _public_multiple(e: cp.Expression) -> tuple[float, cp.Expression]:
    """``(c, core)`` with ``e = c · core``: the public scalar factors (constants, negations, divisions by
    constants) stripped from ``e`` and multiplied together."""
    factor = 1.0
    sc = _scaled(e)
    while sc is not None:
        c, e = sc
        factor *= c
        sc = _scaled(e)
    return factor, e


def _shared_argument(pieces: list[cp.Expression], w: cp.Variable) -> SharedArgument | None:
    """The argument ``u`` with ``piece_j = κ_j u + e_j`` for public constants, or ``None``.

    A piece is either a public constant (no variable, no data placeholder: ``κ_j = 0``) or a public
    multiple of one and the same expression object ``u`` (which must contain ``w``)."""
    core, slopes, intercepts = None, [], []
    for p in pieces:
        if not p.variables() and not p.parameters():
            value = _scalar_const(p)
            if value is None or not np.isfinite(value):
                return None
            slopes.append(0.0)
            intercepts.append(value)
            continue
        factor, inner = _public_multiple(p)
        if core is None:
            core = inner
        if inner is not core or not np.isfinite(factor) or w.id not in {v.id for v in inner.variables()}:
            return None
        slopes.append(factor)
        intercepts.append(0.0)
    if core is None or not core.is_affine() or core.size != 1:
        return None
    return SharedArgument(core, tuple(slopes), tuple(intercepts))


def _smooth(e: cp.Expression) -> SmoothGLMStructure | None:
    scale = 1.0
    sc = _scaled(e)
    if sc is not None:
        scale, e = sc
        if scale <= 0:
            return None
    name = type(e).__name__
    if e.size != 1:
        return None
    arg = e.args[0] if e.args else None
    if arg is None or not arg.is_affine() or arg.size != 1:
        return None
    if name == "huber":
        return SmoothGLMStructure(arg, HuberLink(float(np.asarray(e.M.value)), scale))
    if name in ("PowerApprox", "Power", "power"):
        p = e.p.value if hasattr(e.p, "value") else e.p
        if float(p) == 2.0:
            return SmoothGLMStructure(arg, SquareLink(scale))
        return None
    if name == "quad_over_lin" and _scalar_const(e.args[1]) is not None:
        return SmoothGLMStructure(arg, SquareLink(scale / _scalar_const(e.args[1])))
    if name == "logistic":
        return SmoothGLMStructure(arg, LogisticLink(scale))
    return None


def recognize_structure(expr: cp.Expression, w: cp.Variable) -> Structure:
    """The most specific structure cvxdp can certify for the loss ``expr`` in ``w``."""
    pieces = _pieces(expr, w)
    if pieces is not None and len(pieces) <= MAX_PIECES:
        return PiecewiseLinearStructure(tuple(pieces), shared=_shared_argument(pieces, w))
    smooth = _smooth(expr)
    if smooth is not None:
        return smooth
    return GenericStructure()


def is_affine(structure: Structure) -> bool:
    """Whether the loss is affine in ``w`` (one linear piece, ``<a(z), w> + b(z)``): read off the
    expression, so public; the affine plan (:mod:`cvxdp.plan.mean_gradient`) runs on such losses."""
    return isinstance(structure, PiecewiseLinearStructure) and len(structure.pieces) == 1


def affine_coefficients(exprs: tuple[cp.Expression, ...], w: cp.Variable,
                        data: Mapping[cp.Parameter, np.ndarray], m: int
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Numeric ``(A, b)`` with ``expr_j(y, z_i) = A[i, j] · y + b[i, j]`` for scalar affine ``expr_j``.

    ``b`` is each expression evaluated at ``y = 0``.  ``A`` is read off the expression
    tree in forward mode (:func:`~cvxdp.evaluation.affine_jacobian`: each coefficient
    rounded as the expression's own products and sums round it) where every atom has a
    rule — the canned losses' do; otherwise by difference quotients, as follows.

    Evaluates each expression at ``y = 0`` and ``y = t e_k`` for every example at
    once; ``A[i, j, k] = (expr_j(t e_k) − expr_j(0))/t``.  With ``t = 1`` the
    difference loses the coefficient when the constant dwarfs it (a label of
    1e17 beside unit features rounds ``a`` to 0).  Each estimate carries the
    rounding bound ``4u(|expr(t e_k)| + |expr(0)|)/t``; a coefficient not yet
    known to ``2^-40`` of its example's largest (``max_k (|a_k| − bound_k)``, a
    lower bound on ``||a||_∞``) is evaluated again — for the examples still
    refining it only, never the whole batch — at ``t = 2^26, 2^52, 2^104, 2^208``
    (powers of two: the scaling is exact), keeping the finite estimate with the
    smallest bound.  Each example's steps depend on its own data only, so its
    recovered ``(a, b)`` does too (the sensitivity arguments rely on that) — to the
    last bit: the batched evaluations go through :mod:`cvxdp.evaluation`, whose
    contractions go through :func:`cvxdp.numerics.row_dot`, which reduces each row on its own, so a
    row's rounding does not depend on which other rows share its batch (a BLAS
    matrix-vector product, by contrast, rounds a row differently by its position;
    ``tests/test_per_example.py`` checks this on refining neighbours).  A
    step that overflows is skipped, and a slope the expression's own
    intermediate sums round away at every finite step stays rounded.  The
    expressions are exactly affine, so every ``t`` estimates the same
    coefficients; the certificates read only the returned ``(A, b)``, so this is
    about fidelity to the user's loss, not soundness.  Returns ``A`` of shape
    ``(m, M, d)`` and ``b`` of shape ``(m, M)``.
    """
    d = w.size
    M = len(exprs)
    A = np.empty((m, M, d))
    b = np.empty((m, M))
    unit = np.finfo(float).eps / 2.0
    leaves: dict = {p: np.asarray(v, float) for p, v in data.items()}
    for j, ex in enumerate(exprs):
        def ev(point: np.ndarray, rows: np.ndarray | None = None, ex: cp.Expression = ex) -> np.ndarray:
            vals = dict(leaves) if rows is None else {p: v[rows] for p, v in leaves.items()}
            count = m if rows is None else rows.size
            vals[w] = point.reshape((1,) + tuple(w.shape), order="F")
            try:
                out = evaluate(ex, vals)
            except UnsupportedAtom:
                out = evaluate_per_example(ex, vals, count)
            return np.broadcast_to(np.asarray(out, float).reshape(-1), (count,))
        negated = type(ex).__name__ == "NegExpression"
        mirror = next((i for i in range(j) if negated and ex.args[0] is exprs[i]), None)
        if mirror is not None:
            # −e of an earlier piece e (|r| = max(r, −r)): every evaluation below is e's negated exactly,
            # and fl(−v − (−b)) = −fl(v − b) for every nonzero difference, so the whole computation is e's
            # with the signs flipped — the same values; only the sign of a zero or NaN coefficient may
            # differ from a full evaluation (found by review), and nothing reads those signs (the GLM form
            # sums from +0, the norms drop them, a NaN row fails closed)
            b[:, j] = -b[:, mirror]
            A[:, j, :] = -A[:, mirror, :]
            continue
        b[:, j] = ev(np.zeros(d))
        bj = b[:, j]
        if w.id not in {v.id for v in ex.variables()}:
            # a piece without w (hinge's 0): every evaluation below is b's, so each difference is b − b
            # exactly (0, or NaN where b overflowed) at every step — the same bits without d evaluations
            # (the rows are C-ordered by Loss.bind, so a subset's evaluation rounds as the batch's does)
            with np.errstate(invalid="ignore"):
                A[:, j, :] = (bj - bj)[:, None]
            continue
        try:
            # the coefficients read off the expression's own operations (forward mode): no difference
            # quotients, so none of the refinement below is needed
            J = affine_jacobian(ex, w, leaves)
        except UnsupportedAtom:
            J = None
        if J is not None:
            A[:, j, :] = np.broadcast_to(J.reshape(J.shape[0], d), (m, d))
            continue
        abs_b = np.abs(bj)
        bound = np.empty((d, m))  # rounding bound of each coefficient, by coefficient
        scale = np.zeros(m)  # a lower bound on each example's largest |coefficient|
        # the same arithmetic as `a = v − b; err = 4u(|v| + |b|)` in a few reused buffers (a fit of 10⁶
        # rows spent seconds making and freeing the temporaries)
        a, tmp = np.empty(m), np.empty(m)
        good, good_err = np.empty(m, dtype=bool), np.empty(m, dtype=bool)
        for k in range(d):
            e = np.zeros(d)
            e[k] = 1.0
            v = ev(e)
            err = bound[k]
            with np.errstate(over="ignore", invalid="ignore"):
                np.subtract(v, bj, out=a)
                np.abs(v, out=err)
                err += abs_b
                err *= 4.0 * unit
            A[:, j, k] = a  # as before, even where it is not finite (then the data overflow)
            np.isfinite(a, out=good)
            good &= np.isfinite(err, out=good_err)
            err[~good] = np.inf
            with np.errstate(invalid="ignore"):
                np.abs(a, out=tmp)
                tmp -= err
                np.fmax(scale, tmp, out=scale)
        for t in _DIFFERENCE_STEPS[1:]:
            with np.errstate(invalid="ignore"):
                rows = np.flatnonzero(~(bound.max(axis=0) <= 2.0**-40 * scale))
            if rows.size == 0:
                break
            target = 2.0**-40 * scale[rows]
            for k in range(d):
                r = rows[~(bound[k, rows] <= target)]
                if r.size == 0:
                    continue
                e = np.zeros(d)
                e[k] = t
                with np.errstate(over="ignore", invalid="ignore"):
                    v = ev(e, r)
                    a = (v - bj[r]) / t
                    err = 4.0 * unit * (np.abs(v) + abs_b[r]) / t
                better = np.isfinite(a) & np.isfinite(err) & (err < bound[k, r])
                A[r[better], j, k] = a[better]
                bound[k, r[better]] = err[better]
            with np.errstate(invalid="ignore"):
                scale[rows] = np.max(np.fmax(np.abs(A[rows, j, :]) - bound[:, rows].T, 0.0), axis=1)
    return A, b


_DIFFERENCE_STEPS = (1.0, 2.0**26, 2.0**52, 2.0**104, 2.0**208)
