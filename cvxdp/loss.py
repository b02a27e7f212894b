"""The declarative per-example loss ``f(w, z)``: a CVXPY expression and its data placeholders.

A user writes the loss of *one* example with a ``cp.Variable`` ``w`` for the
model and ``cp.Parameter`` placeholders for the example's data::

    w = cp.Variable(d)
    x, y = cp.Parameter(d, name="x"), cp.Parameter(name="y")
    loss = cvxdp.Loss(cp.pos(1 - y * (x @ w)), w, data=[x, y])

:class:`Loss` checks that the expression is convex in ``w`` (CVXPY's DCP
rules), depends on ``w`` and on no other variable, and that every parameter is
a declared data placeholder.  :meth:`Loss.bind` validates an array per
placeholder (leading axis = examples) and computes the numeric structure the
certified oracle uses — without creating any CVXPY object per example and
without ever storing the whole data set in a CVXPY parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import cvxpy as cp
import numpy as np

from cvxdp._validation import finite_array
from cvxdp.error import DataError, ModelError, NonConvexLossError
from cvxdp.evaluation import UnsupportedAtom, evaluate, evaluate_per_example, is_batchable
from cvxdp.links import Link, PiecewiseLinearLink
from cvxdp.numerics import EPS, row_all, row_norm
from cvxdp.structure import (
    GenericStructure,
    PiecewiseLinearStructure,
    SharedArgument,
    SmoothGLMStructure,
    Structure,
    affine_coefficients,
    recognize_structure,
)

DataValidator = Callable[[np.ndarray], None]
#: Rows per block where a per-row computation over ``(m, pieces, d)`` arrays is done in blocks
#: (:func:`_glm_of_pieces`): its temporaries stay this many rows' size; the bits do not depend on it.
FORM_BLOCK = 8192


class Loss:
    """A per-example convex loss ``f(w, z)`` stated in CVXPY.

    Parameters
    ----------
    expr:
        Scalar CVXPY expression, convex in ``variable`` under DCP.
    variable:
        The model variable ``w`` (a ``cp.Variable`` of shape ``(d,)``).
    data:
        The per-example data placeholders: a sequence of ``cp.Parameter`` or a
        mapping ``name -> cp.Parameter``.  Every parameter of ``expr`` must be
        listed.
    validators:
        Optional ``name -> callable(array)`` raising :class:`DataError` for
        values outside the expected set (e.g. labels must be ``±1``).

    Raises
    ------
    NonConvexLossError
        ``expr`` is not convex in ``w`` under DCP.
    ModelError
        ``expr`` is not scalar, does not involve ``w``, involves another
        variable, or uses an undeclared parameter.
    """

    def __init__(self, expr: cp.Expression, variable: cp.Variable,
                 data: Iterable[cp.Parameter] | Mapping[str, cp.Parameter] = (),
                 validators: Mapping[str, DataValidator] | None = None) -> None:
        if not isinstance(variable, cp.Variable):
            raise ModelError(f"variable must be a cp.Variable, got {type(variable).__name__}.")
        if variable.ndim != 1:
            raise ModelError(f"the model variable must be a vector: cp.Variable(d), shape (d,); got shape "
                             f"{variable.shape}. A column cp.Variable((d, 1)) is the same model written "
                             "with an extra axis: declare cp.Variable(d) and write x @ w.")
        if not isinstance(expr, cp.Expression):
            raise ModelError(f"the loss must be a CVXPY expression, got {type(expr).__name__}.")
        if expr.size != 1:
            raise ModelError(f"the loss must be scalar (one example's loss), got shape {expr.shape}; "
                             "sum or index it to a scalar.")
        if isinstance(data, Mapping):
            placeholders = dict(data)
        else:
            data = list(data)
            names = [p.name() if isinstance(p, cp.Parameter) else repr(p) for p in data]
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                raise ModelError(f"two data placeholders share the name {repeated[0]!r}; data are bound by "
                                 "name, so give each cp.Parameter its own name=... (or pass "
                                 "data={'name': parameter, ...}).")
            placeholders = {p.name(): p for p in data}
        for name, p in placeholders.items():
            if not isinstance(p, cp.Parameter):
                raise ModelError(f"data placeholder {name!r} must be a cp.Parameter, got "
                                 f"{type(p).__name__}.")
        var_ids = {v.id for v in expr.variables()}
        if variable.id not in var_ids:
            raise ModelError("the loss does not depend on the model variable w; a constant loss "
                             "has nothing to learn.")
        if len(var_ids) > 1:
            others = [v.name() for v in expr.variables() if v.id != variable.id]
            raise ModelError(f"the loss involves variables other than w ({', '.join(others)}); "
                             "per-example auxiliary variables are introduced by cvxdp itself.")
        declared = {p.id for p in placeholders.values()}
        undeclared = [p.name() for p in expr.parameters() if p.id not in declared]
        if undeclared:
            raise ModelError(f"parameter(s) {', '.join(undeclared)} appear in the loss but are not "
                             "declared as data placeholders; pass them in data=[...] or make them "
                             "constants.")
        if not expr.is_dcp() or not expr.is_convex():
            raise NonConvexLossError(
                "the loss is not convex in w under CVXPY's DCP rules. Common fixes: use cp.pos, "
                "cp.abs, cp.maximum, cp.huber, cp.logistic of expressions affine in w; declare "
                "sign-carrying data with cp.Parameter(..., nonneg=True) when it multiplies a "
                "convex term."
            )
        self.expr = expr
        self.variable = variable
        self.placeholders = placeholders
        self.validators = dict(validators or {})
        self.structure: Structure = recognize_structure(expr, variable)
        self._batchable = is_batchable(expr)

    @property
    def dim(self) -> int:
        """Dimension ``d`` of the model variable."""
        return int(self.variable.size)

    @property
    def is_dpp(self) -> bool:
        """Whether CVXPY can compile the loss once with its data as parameters (DPP)."""
        return bool(self.expr.is_dpp())

    def bind(self, data: Mapping[str | cp.Parameter, object]) -> Examples:
        """Validate per-example arrays and compute the numeric structure.

        ``data`` maps each placeholder (or its name) to an array whose leading
        axis indexes examples and whose remaining shape is the placeholder's.
        """
        if not isinstance(data, Mapping):
            raise DataError("data must be a mapping from placeholder (or its name) to an array.")
        arrays: dict[cp.Parameter, np.ndarray] = {}
        by_id = {p.id: (n, p) for n, p in self.placeholders.items()}
        for key, value in data.items():
            if isinstance(key, cp.Parameter):
                if key.id not in by_id:
                    raise DataError(f"{key.name()!r} is not a data placeholder of this loss.")
                name, p = by_id[key.id]
            else:
                if key not in self.placeholders:
                    raise DataError(f"unknown data placeholder {key!r}; expected one of "
                                    f"{sorted(self.placeholders)}.")
                name, p = key, self.placeholders[key]
            arrays[p] = (name, value)  # type: ignore[assignment]
        missing = [n for n, p in self.placeholders.items() if p not in arrays]
        if missing:
            raise DataError(f"no data for placeholder(s) {', '.join(missing)}.")
        m = None
        checked: dict[cp.Parameter, np.ndarray] = {}
        for p, (name, value) in arrays.items():  # type: ignore[misc]
            arr = finite_array(f"data {name!r}", value)
            if arr.ndim == 0:
                raise DataError(f"data {name!r} must have a leading example axis, got a scalar.")
            want = tuple(p.shape)
            if tuple(arr.shape[1:]) != want:
                expected = "(m, " + ", ".join(map(str, want)) + ")" if want else "(m,)"
                raise DataError(f"data {name!r} must have shape {expected} (one row per "
                                f"example), got {arr.shape}.")
            if m is None:
                m = arr.shape[0]
            elif arr.shape[0] != m:
                raise DataError(f"data {name!r} has {arr.shape[0]} examples but another "
                                f"placeholder has {m}; all must have the same number of rows.")
            _check_attributes(name, p, arr)
            if name in self.validators:
                self.validators[name](arr)
            # C order: numpy's reductions and einsum round a row by the array's memory layout, and a row
            # subset is a C-ordered copy, so a Fortran-ordered input (pandas' to_numpy) gave a row other bits
            # in a subset than in its batch (found by review); one copy here makes every row's bits its own
            checked[p] = np.ascontiguousarray(arr)
        if m is None or m == 0:
            raise DataError("the data set is empty; at least one example is needed.")
        examples = Examples(loss=self, arrays=checked, m=int(m))
        _require_finite_affine_data(examples)
        return examples

    def values(self, points: np.ndarray, examples: Examples) -> np.ndarray:
        """``f(y_i, z_i)`` for each example (``points`` is ``(m, d)`` or ``(d,)``)."""
        y = np.asarray(points, float)
        vals: dict = dict(examples.arrays)
        vals[self.variable] = y.reshape((-1, self.dim))
        if self._batchable:
            try:
                out = evaluate(self.expr, vals)
                return np.broadcast_to(np.asarray(out, float).reshape(-1), (examples.m,)).copy()
            except UnsupportedAtom:
                pass
        return evaluate_per_example(self.expr, vals, examples.m).reshape(-1)

    def __repr__(self) -> str:
        return f"Loss({self.expr}, structure={self.structure.kind}, d={self.dim})"


def _require_finite_affine_data(examples: Examples) -> None:
    """Precondition of the data domain: every example's loss has finite affine data.

    A loss that multiplies data placeholders (``|s t (y − <x, w>)|``) can overflow float64 on one record
    even though each of its values is finite and at most ``1e100``: its coefficients in ``w`` (or a
    piece's slope ``κ_j ||a||``) are then infinite, no certificate can be built for that record, and a
    fit would refuse *later*, after the tail histogram's release, on the strength of one record.  So the
    data domain of such a loss excludes those records, decided here, at binding — before any release —
    for each example from its own numbers (its generalized-linear form and, where kept, its pieces).  A
    :class:`~cvxdp.error.DataError` like the one for a NaN; the message carries no data-derived number.
    Generic (conic-template) losses are not checked here (their data go through the conic path).
    """
    st = examples.loss.structure
    if not isinstance(st, PiecewiseLinearStructure | SmoothGLMStructure):
        return
    glm = examples.glm()
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(glm.a).all(axis=1) & np.isfinite(glm.b)
        if isinstance(glm.link, PiecewiseLinearLink):
            link = glm.link
            finite &= row_all(np.isfinite(link.slopes)) & row_all(np.isfinite(link.intercepts))
        if "pieces" in examples._cache:
            A, b = examples._cache["pieces"]
            finite &= np.isfinite(A).all(axis=(1, 2)) & np.isfinite(b).all(axis=1)
    if not bool(np.all(finite)):
        raise DataError("the loss's coefficients or levels in the model variable (or their norms, or the "
                        "slopes they make) overflow float64 for some example (a product of data values "
                        "beyond 1.8e308); such records are outside the data domain of this loss: rescale the "
                        "data placeholders or the loss's constants.")


def _check_attributes(name: str, p: cp.Parameter, arr: np.ndarray) -> None:
    attrs = p.attributes
    if attrs.get("nonneg") and np.any(arr < 0):
        raise DataError(f"data {name!r} is declared nonneg but has negative entries.")
    if attrs.get("nonpos") and np.any(arr > 0):
        raise DataError(f"data {name!r} is declared nonpos but has positive entries.")
    if attrs.get("boolean") and np.any((arr != 0) & (arr != 1)):
        raise DataError(f"data {name!r} is declared boolean but has entries other than 0/1.")
    if attrs.get("integer") and np.any(arr != np.round(arr)):
        raise DataError(f"data {name!r} is declared integer but has fractional entries.")


@dataclass
class Examples:
    """Validated per-example data bound to a :class:`Loss`, with its numeric structure.

    Attributes
    ----------
    arrays:
        ``placeholder -> array (m, *placeholder.shape)``.
    m:
        Number of examples.
    """

    loss: Loss
    arrays: dict[cp.Parameter, np.ndarray]
    m: int
    _cache: dict = field(default_factory=dict, repr=False)

    def subset(self, index: np.ndarray | slice) -> Examples:
        """The examples selected by ``index`` (an index array, a boolean mask, or a slice — whose
        arrays are views, not copies)."""
        idx = index if isinstance(index, slice) else np.asarray(index)
        arrays = {p: a[idx] for p, a in self.arrays.items()}
        m = int(next(iter(arrays.values())).shape[0])
        sub = Examples(self.loss, arrays, m)
        for key, val in self._cache.items():
            sub._cache[key] = _subset_cached(val, idx)
        return sub

    # -- numeric structure --------------------------------------------------
    def pieces(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A, b)`` with ``f(y, z_i) = max_j A[i, j] · y + b[i, j]`` (piecewise-linear losses).

        For a generalized-linear example these are *read off its generalized-linear form*
        (:func:`glm_pieces`: ``A_ij = fl(κ_ij â_i)``, ``b_ij = e_ij``), the function every certified
        path evaluates, so they are the same bits whatever the other examples of the batch are — and
        a reduced or translated batch's pieces are those of its substitute by construction.  The
        others keep their own (recovered, or transformed with the batch).
        """
        if "pieces" in self._cache:
            return self._cache["pieces"]
        st = self.loss.structure
        if not isinstance(st, PiecewiseLinearStructure):
            raise TypeError("pieces() is only defined for piecewise-linear losses")
        if "glm" not in self._cache:
            self.glm()  # from the recovered pieces; keeps them too unless every example is a GLM
        if "pieces" not in self._cache:
            glm = self._cache["glm"]
            if not bool(np.all(glm.is_glm)):  # a batch with other examples always keeps its pieces
                raise RuntimeError("a batch with examples that are not generalized linear lost its pieces")
            self._cache["pieces"] = glm_pieces(glm)  # released, or never kept: read off the form
        return self._cache["pieces"]

    def set_pieces(self, A: np.ndarray, b: np.ndarray, changed: np.ndarray | None = None,
                   before: GLMRepresentation | None = None, canonical: bool = False) -> None:
        """Make ``(A, b)`` this batch's pieces, and the generalized-linear form of the rows ``changed`` (all
        by default) derived from them row by row (:meth:`glm`'s test); the other rows keep their form in
        ``before`` bit for bit, whatever happened to other rows.

        ``canonical`` (the pieces recovered from the expression): the generalized-linear examples' pieces
        are then read off their form (:func:`glm_pieces`), the function every path evaluates, so a
        released and re-read batch has the same bits (when every example is generalized linear, they are
        not kept: :meth:`pieces` reads them off the form when asked).  Otherwise — pieces transformed
        by a per-row map on a region without the closed form (substituted, scaled, translated) — they
        are kept as given and the form follows them, as the map made them.
        """
        if changed is None or before is None:
            glm = _glm_of_pieces(A, b)
        else:
            rows = np.nonzero(np.asarray(changed, dtype=bool))[0]
            new = _glm_of_pieces(A[rows], b[rows])
            a, lab = before.a.copy(), before.b.copy()
            slopes = np.array(np.broadcast_to(before.link.slopes, (self.m, before.link.slopes.shape[-1])))
            inter = np.array(np.broadcast_to(before.link.intercepts, slopes.shape))
            flags = np.array(before.is_glm, dtype=bool)
            a[rows], lab[rows], slopes[rows], inter[rows] = new.a, new.b, new.link.slopes, new.link.intercepts
            flags[rows] = new.is_glm
            glm = GLMRepresentation(a, lab, PiecewiseLinearLink(slopes, inter), flags)
        self._cache["glm"] = glm
        if canonical and bool(np.all(glm.is_glm)):
            # every row's pieces are read off the form: :meth:`pieces` does so when a path asks (the
            # same bits); until then the batch holds the form only, not J + 1 times the features
            self._cache.pop("pieces", None)
        else:
            self._cache["pieces"] = _consistent_pieces(glm, A, b) if canonical else (A, b)

    def set_glm(self, glm: GLMRepresentation, others: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """Make ``glm`` this batch's generalized-linear form; ``others`` are the pieces of the examples
        that are not generalized linear (rows at their positions; the generalized-linear rows' entries
        are ignored), needed when there are such examples: the pieces of the others are read off
        ``glm``."""
        self._cache["glm"] = glm
        self._cache.pop("pieces", None)
        if isinstance(self.loss.structure, PiecewiseLinearStructure) and not bool(np.all(glm.is_glm)):
            if others is None:
                raise ValueError("a batch with examples that are not generalized linear needs their pieces")
            self._cache["pieces"] = _consistent_pieces(glm, *others)

    def release_pieces(self) -> None:
        """Drop the pieces ``(A, b)`` of a piecewise-linear loss whose every example is generalized
        linear (they hold ``J`` times the features): :meth:`pieces` reads them off :meth:`glm` again
        — the same bits — if a path asks.  Memory only."""
        glm = self.glm()
        if ("pieces" in self._cache and isinstance(self.loss.structure, PiecewiseLinearStructure)
                and glm is not None and bool(np.all(glm.is_glm))):
            del self._cache["pieces"]

    def glm(self) -> GLMRepresentation | None:
        """The generalized-linear form ``f(y, z_i) = φ_i(<a_i, y> + b_i)``, decided per example.

        Returns ``None`` only when the loss's *structure* (public: the expression,
        not the data) is neither piecewise linear nor a smooth generalized linear
        loss.  Otherwise a :class:`GLMRepresentation` with ``is_glm[i]`` telling
        whether example ``i`` has that form:

        * smooth links (Huber, square, logistic): every example, by structure;
        * piecewise-linear losses whose pieces are public multiples of one affine
          argument, ``κ_j u + e_j`` (hinge, absolute value, pinball:
          :class:`~cvxdp.structure.SharedArgument`): read off that argument's
          coefficients (:func:`_glm_of_shared`); example ``i`` qualifies when its
          numbers are finite (the pieces are parallel by the expression);
        * other piecewise-linear losses: example ``i`` qualifies when all its pieces'
          slopes are parallel, ``a_ij = κ_ij â_i`` (affine, max-affine with parallel
          rows), tested on that example's own pieces only
          (``||a_ij − κ_ij â_i|| ≤ 1e-12 (1 + ||a_ij||)`` for every ``j``, with
          ``â_i`` its steepest piece's direction).

        Either way ``φ_i(u) = max_j (κ_ij u + b_ij)`` with ``u = <â_i, y>`` and ``â_i`` the
        steepest piece's unit direction (``b_i = 0``: a piecewise-linear example's level
        lives in its link's intercepts).

        Privacy: every row of the result, ``is_glm`` included, is a function of its
        own example's recovered pieces and
        public inputs — never a decision taken for the whole data set, so replacing
        one example cannot move another's representation, Lipschitz constant or
        oracle path.  Rows with ``is_glm`` false carry a stand-in (the pieces projected
        on ``â_i``; finite where the pieces are) so that array code can run on all rows
        at fixed positions; it is *not* that example's loss and must not be used for it.
        """
        if "glm" in self._cache:
            return self._cache["glm"]
        st = self.loss.structure
        out = None
        if isinstance(st, SmoothGLMStructure):
            A, b = affine_coefficients((st.argument,), self.loss.variable, self.arrays, self.m)
            out = GLMRepresentation(A[:, 0, :], b[:, 0], st.link, np.ones(self.m, dtype=bool))
        elif isinstance(st, PiecewiseLinearStructure) and st.shared is not None:
            A, b = affine_coefficients((st.shared.argument,), self.loss.variable, self.arrays, self.m)
            glm = _glm_of_shared(A[:, 0, :], b[:, 0], st.shared)
            others = None
            if not bool(np.all(glm.is_glm)):
                # the rows that fail (their argument's coefficients overflowed) keep their pieces, κ_j u + e_j
                # as the expression states them, for the general path (which fails closed on them)
                kappa, e = np.asarray(st.shared.slopes), np.asarray(st.shared.intercepts)
                with np.errstate(invalid="ignore", over="ignore"):
                    others = (kappa[None, :, None] * A[:, 0, None, :], kappa[None, :] * b[:, 0, None] + e)
            self.set_glm(glm, others)
            return glm
        elif isinstance(st, PiecewiseLinearStructure):
            self.set_pieces(*affine_coefficients(st.pieces, self.loss.variable, self.arrays, self.m),
                            canonical=True)
            return self._cache["glm"]
        self._cache["glm"] = out
        return out

    def glm_pieces_gap(self, reach: float) -> np.ndarray:
        """``δ_i ≥ max_{||u|| ≤ reach} |f_pieces(u, z_i) − f_glm(u, z_i)|`` for piecewise-linear examples.

        For a generalized-linear example the certified loss is its :meth:`glm` form
        ``max_j κ_ij <â_i, u> + b_ij`` (what the closed form and the exact path evaluate);
        a bound built from the recovered pieces ``max_j <a_ij, u> + b_ij`` (the joint conic
        program's multipliers) is moved by at most ``max_j ||a_ij − κ_ij â_i|| · reach`` —
        about ``10⁻¹⁶ ||a_ij|| reach`` for pinball's ``fl(−τx)``, ``fl((1 − τ)x)``.  The norm
        is bounded *above* in float: the rounding of ``κ â`` and of the difference (``2ε`` of
        the terms) and of the norm itself are added.  Per example; ``0`` for smooth links
        (their pieces are the link's argument, exactly).
        """
        glm = self.glm()
        if glm is None or not isinstance(glm.link, PiecewiseLinearLink):
            return np.zeros(self.m)
        A, _ = self.pieces()
        d = A.shape[2]
        kappa = np.broadcast_to(glm.link.slopes, A.shape[:2])
        with np.errstate(invalid="ignore", over="ignore"):
            scaled = kappa[:, :, None] * glm.a[:, None, :]
            diff = np.linalg.norm(A - scaled, axis=2)
            terms = np.linalg.norm(A, axis=2) + np.abs(kappa) * np.linalg.norm(glm.a, axis=1)[:, None]
            grow = 1.0 + (d + 4.0) * EPS
            gap = (diff * grow + 2.0 * EPS * terms * grow).max(axis=1) * float(reach) * grow
        return np.where(np.isfinite(gap), gap, np.inf)


@dataclass(eq=False)
class GLMRepresentation:
    """Per-example generalized-linear data ``f(y, z_i) = φ_i(<a_i, y> + b_i)`` where ``is_glm[i]``.

    Attributes
    ----------
    a, b:
        ``(m, d)`` and ``(m,)``.
    link:
        The links ``φ_i`` (a :class:`~cvxdp.links.Link` vectorized over examples).
    is_glm:
        ``(m,)`` booleans; each decided from its own example (see :meth:`Examples.glm`).
        Where it is false, ``(a_i, b_i, φ_i)`` is a stand-in, not the loss.

    Iterating yields ``(a, b, link)``, so code written for all-GLM data sets keeps
    unpacking ``a, b, link = glm``; it must then consult ``is_glm`` (always true for
    smooth links, per example for piecewise-linear losses).
    """

    a: np.ndarray
    b: np.ndarray
    link: Link
    is_glm: np.ndarray
    #: ``row_norm(a)`` once :meth:`a_norm` computed it (a row's norm is its own: subsets carry it)
    _a_norm: np.ndarray | None = field(default=None, repr=False)

    def a_norm(self) -> np.ndarray:
        """``||a_i||`` per row (:func:`cvxdp.numerics.row_norm`, a function of the row alone), computed once
        and carried by :meth:`subset` and :meth:`with_levels` — every phase's reduction, size test and
        oracle data read the same norms instead of taking them again."""
        if self._a_norm is None:
            self._a_norm = row_norm(self.a)
        return self._a_norm

    def with_levels(self, b: np.ndarray, link: Link) -> GLMRepresentation:
        """The same directions ``a`` (and their norms) with other labels ``b`` and links."""
        return GLMRepresentation(self.a, b, link, self.is_glm, self._a_norm)

    def __iter__(self) -> Iterator:
        return iter((self.a, self.b, self.link))

    def __len__(self) -> int:
        return 3

    def __getitem__(self, i: int) -> object:
        return (self.a, self.b, self.link)[i]

    def subset(self, index: np.ndarray) -> GLMRepresentation:
        """The representation of the examples selected by ``index``, row for row."""
        return GLMRepresentation(self.a[index], self.b[index], self.link.subset(index),
                                 self.is_glm[index], None if self._a_norm is None else self._a_norm[index])


def _scaled_norms(V: np.ndarray) -> np.ndarray:
    """``||v||`` over the last axis without overflow or underflow of the squares.

    The plain ``sqrt(Σ v_j²)`` where the sum of squares lies in ``(2⁻⁹⁶⁰, 2¹⁰⁰⁰)`` — no square overflowed
    (the terms are nonnegative, so no partial sum did either) and any square that underflowed is below
    ``10⁻¹⁸`` of the sum; elsewhere the norm scaled by ``s = max|v_j|``, ``s ||v/s||`` (a row with a NaN
    gets 0 there, as before: callers test their entries' finiteness).  The choice is per row, from that
    row's own values."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
        # np.sum of the products (as cvxdp.numerics.row_norm on this C-ordered array): einsum rounds a row
        # beyond 8192 entries differently when it is alone (found by review), and subsets are data-dependent
        squares = np.sum(V * V, axis=-1)
        out = np.sqrt(squares)
        risky = ~((squares > 2.0**-960) & (squares < 2.0**1000))
        if np.any(risky):
            sub = V[risky]
            top = np.max(np.abs(sub), axis=-1)
            safe = np.where((top > 0) & np.isfinite(top), top, 1.0)
            out[risky] = np.where(top > 0, safe * np.linalg.norm(sub / safe[..., None], axis=-1), 0.0)
    return out


def _glm_of_pieces(A: np.ndarray, b: np.ndarray) -> GLMRepresentation:
    """:meth:`Examples.glm`'s form of piecewise-linear pieces, row by row.

    Norms are taken scaled (``||v|| = s ||v/s||``, ``s = max|v_j|``): squares of coefficients beyond
    ``10¹⁵⁴`` overflow, and an infinite norm made ``â = 0`` — a constant loss passing the parallel test
    (found when the pieces came to be read off this form).  The rows are taken ``FORM_BLOCK`` at a time:
    every step is arithmetic within a row, so a row's form has the same bits in any block, and the
    temporaries (several arrays the size of ``A``) stay a block's size — they set the peak memory of a
    fit of a million rows."""
    m, J, d = A.shape
    ahat, kappa = np.empty((m, d)), np.empty((m, J))
    parallel = np.empty(m, dtype=bool)
    for start in range(0, m, FORM_BLOCK):
        rows = slice(start, min(start + FORM_BLOCK, m))
        ahat[rows], kappa[rows], parallel[rows] = _glm_block(A[rows])
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        link = PiecewiseLinearLink(kappa, b)
    return GLMRepresentation(ahat, np.zeros(m), link, parallel)


def _glm_of_shared(g: np.ndarray, c: np.ndarray, shared: SharedArgument) -> GLMRepresentation:
    """:meth:`Examples.glm`'s form of pieces ``κ_j u + e_j`` of one affine argument ``u = <g_i, y> + c_i``
    (:class:`~cvxdp.structure.SharedArgument`), row by row.

    ``κ_j u + e_j = (s κ_j ||g_i||) <â_i, y> + (κ_j c_i + e_j)`` with ``â_i = s g_i/||g_i||``, where the sign
    ``s`` makes ``â_i`` the steepest piece's direction (the convention of the pieces' test, decided by the
    public ``κ``); a row with ``g_i = 0`` is constant and takes ``â_i = e_1``, ``κ_ij = 0``.  The pieces
    are parallel by the expression, so a row is generalized linear exactly when its numbers are finite
    (an overflowed coefficient or level fails and takes the general path, which fails closed).  Every
    step is arithmetic within a row and on public constants: a row's form is a function of that row."""
    kappa = np.asarray(shared.slopes, dtype=float)
    e = np.asarray(shared.intercepts, dtype=float)
    lead = int(np.argmax(np.abs(kappa)))
    sign = -1.0 if kappa[lead] < 0 else 1.0
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        norms = _scaled_norms(g)
        positive = norms > 0
        # a division, not a product with 1/||g||: that reciprocal overflows for subnormal features
        ahat = np.where(positive[:, None], (sign * g) / np.where(positive, norms, 1.0)[:, None], 0.0)
        ahat[norms == 0, 0] = 1.0
        slopes = (sign * kappa)[None, :] * norms[:, None]
        intercepts = kappa[None, :] * c[:, None] + e[None, :]
        finite = (np.isfinite(norms) & np.isfinite(c) & row_all(np.isfinite(g))
                  & row_all(np.isfinite(slopes)) & row_all(np.isfinite(intercepts)))
        link = PiecewiseLinearLink(slopes, intercepts)
    return GLMRepresentation(ahat, np.zeros(c.size), link, finite)


def _glm_block(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(â, κ, parallel)`` of a block of rows' pieces (:func:`_glm_of_pieces`)."""
    rows = np.arange(A.shape[0])
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        norms = _scaled_norms(A)
        lead = np.argmax(norms, axis=1)
        nrm = norms[rows, lead]
        ahat = np.where(nrm[:, None] > 0, A[rows, lead] / np.where(nrm > 0, nrm, 1.0)[:, None], 0.0)
        # any unit vector will do for examples whose pieces are all constant
        ahat[nrm == 0, 0] = 1.0
        kappa = np.sum(A * ahat[:, None, :], axis=-1)  # not einsum: see _scaled_norms
        resid = A - kappa[:, :, None] * ahat[:, None, :]
        # an example with a coefficient that is not finite fails the test and takes the general path
        # (which fails closed on it): an overflowing one has an infinite norm, and a NaN one — which
        # validated data cannot produce — would otherwise be scaled to a norm of 0 and pass
        parallel = (_scaled_norms(resid) <= 1e-12 * (1.0 + norms)) & np.isfinite(norms)
        finite = np.all(np.isfinite(A), axis=(1, 2))
    return ahat, kappa, np.all(parallel, axis=1) & finite


def _consistent_pieces(glm: GLMRepresentation, A: np.ndarray, b: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Pieces whose generalized-linear rows are read off ``glm`` and whose other rows are ``(A, b)``
    (the other rows copied into the pieces read off ``glm``, not a third array of that size)."""
    A_glm, b_glm = glm_pieces(glm)
    others = np.flatnonzero(~np.asarray(glm.is_glm, dtype=bool))
    if others.size:
        A_glm[others], b_glm[others] = A[others], b[others]
    return A_glm, b_glm


def glm_pieces(glm: GLMRepresentation) -> tuple[np.ndarray, np.ndarray]:
    """The pieces ``A_ij = κ_ij a_i``, ``b_ij = κ_ij b_i + e_ij`` of a piecewise-linear link's
    generalized-linear form ``max_j κ_ij (<a_i, y> + b_i) + e_ij`` (row by row)."""
    link = glm.link
    with np.errstate(invalid="ignore", over="ignore"):
        kappa = np.broadcast_to(link.slopes, (glm.a.shape[0], link.slopes.shape[-1]))
        e = np.broadcast_to(link.intercepts, kappa.shape)
        return kappa[:, :, None] * glm.a[:, None, :], kappa * glm.b[:, None] + e


def _subset_cached(val: object, idx: np.ndarray) -> object:
    if isinstance(val, GLMRepresentation):
        return val.subset(idx)
    if isinstance(val, tuple):
        return tuple(_subset_cached(v, idx) for v in val)
    if isinstance(val, np.ndarray):
        return val[idx]
    if isinstance(val, Link):
        return val.subset(idx)
    return val


__all__ = ["Examples", "GLMRepresentation", "GenericStructure", "Loss", "glm_pieces"]
