"""A declarative convex learning problem: a per-example loss on a bounded domain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cvxpy as cp
import numpy as np

from cvxdp.error import DomainError, ModelError
from cvxdp.geometry import Domain, domain_from_constraints
from cvxdp.loss import Examples, Loss

#: The largest domain diameter a model accepts.  With data values up to ``1e100`` (the data domain), one
#: record's loss on a ball of radius ``1e15`` spans magnitudes the certificate could not resolve to the
#: accuracy a release needs, and the fit refused *after* its tail histogram and output perturbation were
#: charged — a refusal decided by one record (found by review, 2026-12-03).  Measured with records of
#: features ``1e100``: balls of radius ``1e12`` released for every canned loss, and boxes up to
#: ``[−3e11, 3e11]²`` for hinge, while ``[−7e11, 7e11]²`` refused; the limit keeps a margin below both.
#: A public precondition of the model, checked before any data are read.
DIAMETER_MAX = 2e11
#: The largest distance from 0 of a domain's points (query points beyond the data domain are refused).
REACH_MAX = 1e100


class Model:
    """``min_{w ∈ W} E f(w, z)`` stated in CVXPY.

    Parameters
    ----------
    loss:
        The per-example :class:`~cvxdp.loss.Loss`.
    domain:
        CVXPY constraints on the loss's variable (recognized as a ball, box,
        ellipsoid, simplex, polytope, intersection or generic set), or a
        :class:`~cvxdp.geometry.Domain`.  Must be nonempty and bounded.

    Attributes
    ----------
    domain:
        The recognized :class:`~cvxdp.geometry.Domain` ``W``.
    diameter:
        ``D``, the ℓ2 diameter of ``W`` (an upper bound when not exact).
    """

    def __init__(self, loss: Loss, domain: Sequence[cp.Constraint] | cp.Constraint | Domain
                 ) -> None:
        if not isinstance(loss, Loss):
            raise ModelError(f"loss must be a cvxdp.Loss, got {type(loss).__name__}; wrap a CVXPY "
                             "expression with cvxdp.Loss(expr, w, data=[...]).")
        self.loss = loss
        if isinstance(domain, Domain):
            W = domain
        else:
            if isinstance(domain, cp.Constraint):
                domain = [domain]
            W = domain_from_constraints([*list(domain or []), *attribute_constraints(loss.variable)],
                                        loss.variable)
        if W.dim != loss.dim:
            raise DomainError(f"the domain lives in R^{W.dim} but w has dimension {loss.dim}.")
        self.domain = W
        if not np.isfinite(W.diameter):
            raise DomainError("the domain's diameter is not finite; add bounds on w.")
        if not (W.diameter <= DIAMETER_MAX and W.norm_bound() <= REACH_MAX):
            raise DomainError(f"the domain is too large: its diameter must be at most {DIAMETER_MAX:g} and "
                              f"its points within {REACH_MAX:g} of 0 (a record's loss there could not be "
                              "certified); rescale w (e.g. change the units of the features).")
        self.diameter = float(W.diameter)

    @property
    def dim(self) -> int:
        return self.loss.dim

    @property
    def variable(self) -> cp.Variable:
        return self.loss.variable

    def bind(self, data: Mapping) -> Examples:
        """Validate data for the loss's placeholders (see :meth:`Loss.bind`)."""
        return self.loss.bind(data)

    def empirical_risk(self, w: np.ndarray, examples: Examples) -> float:
        """``(1/m) Σ f(w, z_i)``."""
        return float(np.mean(self.loss.values(np.asarray(w, float), examples)))

    def __repr__(self) -> str:
        return f"Model(loss={self.loss.structure.kind}, d={self.dim}, W={self.domain!r})"


#: Variable attributes that are convex sets: they join the domain constraints.
_SET_ATTRIBUTES = ("nonneg", "nonpos", "pos", "neg", "bounds")


def attribute_constraints(w: cp.Variable) -> list[cp.Constraint]:
    """The domain constraints that ``w``'s CVXPY attributes state (CVXPY's own convention).

    ``nonneg`` / ``pos`` give ``w ≥ 0``, ``nonpos`` / ``neg`` give ``w ≤ 0`` (a strict sign is the
    same closed set for a domain), ``bounds=[lb, ub]`` gives ``lb ≤ w ≤ ub`` (``None`` for no bound).
    ``integer`` and ``boolean`` are refused: the domain must be convex, and cvxdp's guarantee is for a
    continuous ``w``.  Other attributes (``symmetric``, ``PSD``, ``complex``, ``sparsity``, ...) are
    refused too: they belong to matrix variables, and ``w`` is a vector.
    """
    if not isinstance(w, cp.Variable):
        return []
    attrs = {k: v for k, v in w.attributes.items() if v is not None and v is not False}
    for name in ("integer", "boolean"):
        if name in attrs:
            raise DomainError(f"the model variable is declared {name}=True; a private convex fit needs a "
                              f"continuous w (the domain must be convex): drop {name}=True.")
    other = sorted(set(attrs) - set(_SET_ATTRIBUTES))
    if other:
        raise DomainError(f"the model variable has attributes {other} that cvxdp does not support; declare "
                          "a plain vector cp.Variable(d), optionally nonneg, nonpos or bounds=[lb, ub].")
    out: list[cp.Constraint] = []
    if (attrs.get("nonneg") or attrs.get("pos")) and (attrs.get("nonpos") or attrs.get("neg")):
        raise DomainError("the model variable is declared both nonneg and nonpos: its domain would be the "
                          "single point 0, with nothing to learn.")
    if attrs.get("nonneg") or attrs.get("pos"):
        out.append(w >= 0)
    if attrs.get("nonpos") or attrs.get("neg"):
        out.append(w <= 0)
    if "bounds" in attrs:
        for bound, side in zip(attrs["bounds"], ("lower", "upper"), strict=True):
            if bound is None:
                continue
            b = np.broadcast_to(np.asarray(bound, float), w.shape)
            if np.any(np.isnan(b)) or np.any(b == (np.inf if side == "lower" else -np.inf)):
                raise DomainError(f"the model variable's {side} bounds must be numbers (±inf for none on the "
                                  "open side); no point satisfies them.")
            finite = np.flatnonzero(np.isfinite(b))  # an infinite entry is no bound on that coordinate
            if finite.size:
                out.append(w[finite] >= b[finite] if side == "lower" else w[finite] <= b[finite])
    return out
