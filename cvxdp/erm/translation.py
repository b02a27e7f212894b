"""The regularized extension ERM solved in coordinates centred near ``U``: ``w = o + v``.

A record's terms in the certified oracle and in the conic programs are of the size of its slope
times ``max_{y∈U} ||y||`` (the *reach* of ``U``), while what the certificate needs is their
variation across ``U`` — the slope times ``diam U``.  On a set far from the origin (a box
``[10⁶, 10⁶ + 1]³``, or a deep localization ball around a released centre) the reach exceeds the
diameter by orders of magnitude, and float64 — and a conic solver's relative tolerance — pay for
it: a single steep record (``x = (1, 1, 1), y = 10⁷``, scaled to the slope limit) made every
algorithm refuse on that box while its neighbour released.

So when ``U``'s bounding ball ``B(c, r)`` lies far from the origin (a coordinate ``|c_j| > 4r``),
:func:`regularized_erm` solves the problem in ``v = w − o`` for a public origin ``o``
(:func:`public_origin`: ``c`` rounded to a multiple of a power of two ``q ≥ r`` on those
coordinates, ``0`` on the others), with

* ``U − o``, ``w₀ − o`` and ``W − o`` (:meth:`Domain.translate <cvxdp.geometry.Domain.translate>`:
  exact for a box, a ball or an ellipsoid whose own bounding ball gave ``o``, by Sterbenz's lemma,
  since ``|c_j − o_j| ≤ q/2 ≤ r`` and ``|c_j| > 4r`` put every coordinate of the set within a factor
  2 of ``o_j``; a lens, a polytope or a localized set is rebuilt from its translated parts, up to
  rounding — a public set all the same);
* each record's affine data ``f(w, z) = φ(<a, w> + b)`` carried as ``φ(<a, v> + b')`` with
  ``b' = fl(b + <a, o>)`` (:func:`translate_examples`).

**Privacy.**  ``o`` is a function of ``U`` (public: ``W`` and released centres) only.  ``b'`` is a
function of its own record and ``o`` — a public per-record map (its rounding, of the size of the
level's ulp, moves the record's loss by that much; a level that leaves the float range is
brought to ``±2¹⁰⁰⁰``), so the release is ε-DP for the mapped data set exactly as for the data
set as given: the sensitivity argument (Theorem 2.3) holds for any convex per-record losses, and
the mapped data set of two neighbours are neighbours.  The minimizer ``v̂`` of the translated
problem is ``ŵ − o`` for the minimizer ``ŵ`` of the mapped problem over ``(U − o) + o``, a public
set.

**Accuracy.**  The point returned is ``w̃ = fl(ṽ + o)``, which errs from ``ṽ + o`` by at most
``δ = u (||o|| + reach(U − o))(1 + (d + 8)ε)`` in norm (``u = 2⁻⁵³``, ``ε = 2u``).  The sensitivity reads
``||w̃ − ŵ|| ≤ sqrt(2α/λ)``; :func:`translated_accuracy` therefore certifies the translated
problem to ``α' = (λ/2)(sqrt(2α/λ) − δ)²`` (rounded down, in exact arithmetic), so that
``||w̃ − ŵ|| ≤ sqrt(2α'/λ) + δ ≤ sqrt(2α/λ)``.  When ``δ`` would take more than half of that
distance (``α`` at the level of float64's resolution at ``o``), the problem is not translated —
a public decision.  The certificate of a translated solve reports the *accuracy-equivalent* gap
``(λ/2)(sqrt(2 gap'/λ) + δ)²`` (at most ``α``): what it proves is the distance above.

Losses without structure (a generic CVXPY expression) are not translated: their records are
evaluated through the expression itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from cvxdp.erm.problem import ERMCertificate, RegularizedERM
from cvxdp.geometry import Ball, Domain, Lens
from cvxdp.links import PiecewiseLinearLink
from cvxdp.loss import Examples
from cvxdp.model import Model
from cvxdp.numerics import EPS, float_down, float_up, row_dot
from cvxdp.structure import PiecewiseLinearStructure, SmoothGLMStructure

#: A coordinate of ``U``'s bounding-ball centre beyond this many radii is translated away.
FAR = 4.0
#: Where a translated level leaves the float range it is brought to this size (a per-record map).
LEVEL_CAP = 2.0**1000
_U = EPS / 2.0


def public_origin(region: Domain, model: Model) -> np.ndarray | None:
    """The origin ``o`` :func:`regularized_erm` translates ``region`` by, or ``None`` (no translation).

    See :func:`public_frame`, which also returns the translated set.
    """
    frame = public_frame(region, model)
    return None if frame is None else frame[0]


def public_frame(region: Domain, model: Model) -> tuple[np.ndarray, Domain] | None:
    """``(o, U − o)`` for a set far from the origin, or ``None`` (no translation).

    ``o_j = q · round(c_j / q)`` where ``|c_j| > 4r`` and ``0`` elsewhere, for ``U``'s bounding ball
    ``B(c, r)`` and ``q`` the smallest power of two ``≥ r``.  A solver's bounding box of a far
    polytope is itself loose, so the step is repeated on the translated set (at most three more
    times, while it is still far) — each from ``U`` itself, so roundings do not pile up.  ``None``
    when no coordinate is that far, when the loss has no structure to translate, or when ``U`` has
    no translated form.  A function of ``U`` and the loss's expression only.
    """
    if not isinstance(model.loss.structure, PiecewiseLinearStructure | SmoothGLMStructure):
        return None
    origin = np.zeros(region.dim)
    current = region
    for _ in range(4):
        step = _far_step(*current.bounding_ball())
        if step is None:
            break
        moved = _translated(region, origin + step)
        if moved is None:
            break
        origin, current = origin + step, moved
    return None if current is region else (origin, current)


def _translated(region: Domain, shift: np.ndarray) -> Domain | None:
    """``region.translate(shift)``, or ``None`` if the translated set cannot be built (a decision on
    public sets only: the fit then runs untranslated)."""
    try:
        return region.translate(shift)
    except Exception:  # the set's own construction failed (an LP, a check): no translation
        return None


def _far_step(c: np.ndarray, r: float) -> np.ndarray | None:
    c = np.asarray(c, float)
    if not (np.all(np.isfinite(c)) and math.isfinite(r) and r > 0.0):
        return None
    far = np.abs(c) > FAR * r
    if not np.any(far):
        return None
    q = 2.0 ** math.ceil(math.log2(r))
    return np.where(far, np.round(c / q) * q, 0.0)


def translate_examples(examples: Examples, origin: np.ndarray, glm_form: bool = False) -> Examples:
    """The records in ``v = w − o``: each affine argument ``<a, w> + b`` becomes ``<a, v> + fl(b + <a, o>)``.

    Row by row (:func:`cvxdp.numerics.row_dot`, whose bits for one row do not depend on the others); a
    level that is not finite after the shift (``|<a, o>|`` beyond float range) is brought to ``±2¹⁰⁰⁰``
    (``0`` for a NaN) — both per-record maps.  The raw arrays are kept; the translated structure lives in the
    cache every certified path reads, as the affine reduction's does.

    ``glm_form`` (a ball or lens, where every path certifies a generalized-linear example by its
    generalized-linear form): a piecewise-linear loss is translated in that form, ``u = <a, w> + b``
    shifted like a smooth link's; the pieces are translated too only for the examples that are not
    generalized linear (the others' are read off the form, :meth:`Examples.pieces
    <cvxdp.loss.Examples.pieces>`).
    """
    o = np.asarray(origin, float)
    st = examples.loss.structure
    out = Examples(examples.loss, examples.arrays, examples.m)
    with np.errstate(invalid="ignore", over="ignore"):
        if isinstance(st, PiecewiseLinearStructure) and glm_form:
            # max_j κ_j <â, w> + e_j = max_j κ_j <â, v> + fl(e_j + κ_j fl(<â, o>)): the shift goes into
            # the link's intercepts, so the pieces read off the form (b_ij = e'_j) are exact
            glm = examples.glm()
            link = glm.link
            shift = row_dot(glm.a, o)
            kappa = np.broadcast_to(link.slopes, (examples.m, link.slopes.shape[-1]))
            moved_e = _finite_level(np.broadcast_to(link.intercepts, kappa.shape) + kappa * shift[:, None])
            shifted = glm.with_levels(glm.b, PiecewiseLinearLink(kappa, moved_e))
            others = None
            if not np.all(glm.is_glm):
                A, b = examples.pieces()
                others = (A, _finite_level(b + row_dot(A, o)))
            out.set_glm(shifted, others)
        elif isinstance(st, PiecewiseLinearStructure):
            A, b = examples.pieces()
            out.set_pieces(A, _finite_level(b + row_dot(A, o)))
        elif isinstance(st, SmoothGLMStructure):
            glm = examples.glm()
            level = _finite_level(glm.b + row_dot(glm.a, o))
            out._cache["glm"] = glm.with_levels(level, glm.link)
        else:
            raise TypeError("only piecewise-linear and smooth generalized linear losses translate")
    return out


def _finite_level(b: np.ndarray) -> np.ndarray:
    b = np.where(np.isnan(b), 0.0, b)
    return np.clip(b, -LEVEL_CAP, LEVEL_CAP)


def rounding_of_return(origin: np.ndarray, inner_region: Domain) -> float:
    """``δ ≥ ||fl(v + o) − (v + o)||`` for every ``v`` of ``inner_region`` (public).

    Each coordinate's sum is correctly rounded: ``|fl(s) − s| ≤ u|s|``, so the error is at most
    ``u ||v + o|| ≤ u (||o|| + ||c'|| + r')`` for the bounding ball ``B(c', r')`` of the translated
    set; the factor ``1 + (d + 8)ε`` covers the rounding of the norms and of their sum.
    """
    c, r = inner_region.bounding_ball()
    d = origin.shape[0]
    reach = float(np.linalg.norm(origin)) + float(np.linalg.norm(c)) + float(r)
    return _U * reach * (1.0 + (d + 8.0) * EPS)


def translated_accuracy(alpha: float, lam: float, delta: float) -> float | None:
    """The largest float ``α' ≤ (λ/2)(s − δ)²`` with ``s ≤ sqrt(2α/λ)``, or ``None`` if ``δ > s/2``.

    Exact rational arithmetic: ``s`` is a float whose square is at most ``2α/λ``.  Then any point
    certified to ``α'`` in the translated problem, returned with an error of at most ``δ``, is
    within ``sqrt(2α'/λ) + δ ≤ s ≤ sqrt(2α/λ)`` of the exact minimizer.  ``None`` also when ``2α/λ``
    or ``α'`` is outside the normal float range (public inputs only: the problem is then solved as
    given).
    """
    budget = Fraction(2) * Fraction(alpha) / Fraction(lam)
    if not (Fraction(2.0**-1000) < budget < Fraction(2.0**1000)):
        return None
    s = _sqrt_down(budget)
    t = Fraction(s) - Fraction(delta)
    if not (t > Fraction(s) / 2):
        return None
    inner = float_down(Fraction(lam) / 2 * t * t)
    return inner if inner >= 2.0**-1000 else None


def accuracy_equivalent_gap(gap: float, lam: float, delta: float, alpha: float) -> float:
    """``(λ/2)(sqrt(2 gap/λ) + δ)²`` rounded up (exact arithmetic), and at most ``α`` (which
    ``gap ≤ α'`` implies)."""
    root = _sqrt_up(Fraction(2) * Fraction(gap) / Fraction(lam))
    return min(float_up(Fraction(lam) / 2 * (Fraction(root) + Fraction(delta)) ** 2), alpha)


def _sqrt_down(q: Fraction) -> float:
    """The largest float found with ``s² ≤ q`` (``q`` positive and within the normal float range)."""
    s = math.sqrt(float_down(q))
    while Fraction(s) * Fraction(s) > q:
        s = math.nextafter(s, 0.0)
    return s


def _sqrt_up(q: Fraction) -> float:
    """A float ``r ≥ sqrt(q)`` within a few ulps (``q ≥ 0``; ``inf`` beyond the float range)."""
    if q > Fraction(2.0**1000):
        return math.inf
    r = math.sqrt(float_up(q)) if q > 0 else 0.0
    while Fraction(r) * Fraction(r) < q:
        r = math.nextafter(r, math.inf)
    return r


@dataclass
class TranslatedERM:
    """A regularized extension ERM on ``U`` (w-coordinates) whose solve runs on ``inner`` in ``v = w − o``.

    The public fields mirror :class:`~cvxdp.erm.problem.RegularizedERM`'s, in the caller's
    coordinates (``examples`` as given, ``None`` when they live in partitions); ``inner`` is the
    translated problem (a
    ``RegularizedERM`` or a :class:`~cvxdp.erm.partitioned.PartitionedERM`).
    :func:`~cvxdp.erm.solver.solve_certified` solves ``inner`` to :func:`translated_accuracy`'s
    ``α'`` and returns ``fl(ṽ + o)`` (see the module's docstring for the argument).
    """

    inner: object
    origin: np.ndarray
    examples: Examples | None
    region: Domain
    w0: np.ndarray
    w_domain: Domain | None = None
    delta: float = field(init=False)

    def __post_init__(self) -> None:
        self.delta = rounding_of_return(self.origin, self.inner.feasible_set)

    @property
    def model(self) -> Model:
        return self.inner.model

    @property
    def C(self) -> float:
        return self.inner.C

    @property
    def lam(self) -> float:
        return self.inner.lam

    @property
    def m(self) -> int:
        return self.inner.m

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def feasible_set(self) -> Domain:
        return self.region if self.w_domain is None else self.w_domain

    def inner_accuracy(self, alpha: float) -> float | None:
        return translated_accuracy(alpha, self.lam, self.delta)

    def to_outer(self, v: np.ndarray) -> np.ndarray:
        return np.asarray(v, float) + self.origin

    def outer_certificate(self, cert: ERMCertificate, alpha: float) -> ERMCertificate:
        gap = accuracy_equivalent_gap(cert.gap, self.lam, self.delta, alpha)
        return replace(cert, required=alpha, gap=gap, method=f"translated({cert.method})",
                       notes=[*cert.notes, f"solved in v = w − o, certified to α' = {cert.required:.3e}"])


def regularized_erm(model: Model, examples: Examples, region: Domain, C: float, lam: float,
                    w0: np.ndarray, w_domain: Domain | None = None, *, executor=None,
                    partitions: int | None = None, alpha: float | None = None):
    """The regularized extension ERM on ``region``, translated to a public origin when ``U`` is far out.

    Returns a :class:`~cvxdp.erm.problem.RegularizedERM` (or, for
    :class:`~cvxdp.run.partitions.Partitions` or with ``executor``, a
    :class:`~cvxdp.erm.partitioned.PartitionedERM`), wrapped in a :class:`TranslatedERM` when
    :func:`public_origin` gives an origin, every set involved translates, and — for a known
    ``alpha`` — the return's rounding leaves the accuracy budget at least half of its distance.
    Every decision reads public inputs only.
    """
    from cvxdp.erm.partitioned import PartitionedERM
    from cvxdp.run.partitions import Partitions

    parts = None
    if isinstance(examples, Partitions):
        parts = examples
    elif executor is not None:
        parts = Partitions.from_examples(model, examples, executor, partitions or executor.partitions)

    def build(U, start, Wd, origin):
        if parts is not None:  # the rows are translated where they live
            return PartitionedERM(model, parts, U, C, lam, start, origin=origin)
        ex = examples if origin is None else translate_examples(examples, origin, isinstance(U, Ball | Lens))
        return RegularizedERM(model, ex, U, C, lam, start, w_domain=Wd)

    frame = public_frame(region, model)
    if frame is not None and (parts is None or w_domain is None):
        origin, U = frame
        Wd = None if w_domain is None else _translated(w_domain, origin)
        if w_domain is None or Wd is not None:
            inner_set = U if Wd is None else Wd
            delta = rounding_of_return(origin, inner_set)
            if alpha is None or translated_accuracy(alpha, lam, delta) is not None:
                inner = build(U, np.asarray(w0, float) - origin, Wd, origin)
                held = None if parts is not None else examples
                return TranslatedERM(inner, origin, held, region, np.asarray(w0, float), w_domain)
    return build(region, w0, w_domain, None)


__all__ = ["FAR", "LEVEL_CAP", "TranslatedERM", "accuracy_equivalent_gap", "public_frame", "public_origin",
           "regularized_erm",
           "rounding_of_return", "translate_examples", "translated_accuracy"]
