"""A declarative convex learning problem: a per-example loss on a bounded domain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cvxpy as cp
import numpy as np

from cvxdp.error import DomainError, ModelError
from cvxdp.geometry import Domain, domain_from_constraints
from cvxdp.loss import Examples, Loss


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
            W = domain_from_constraints(domain, loss.variable)
        if W.dim != loss.dim:
            raise DomainError(f"the domain lives in R^{W.dim} but w has dimension {loss.dim}.")
        self.domain = W
        if not np.isfinite(W.diameter):
            raise DomainError("the domain's diameter is not finite; add bounds on w.")
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
