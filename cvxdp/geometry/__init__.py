"""Domains ``W`` and localized sets ``U = W ∩ B(c, r)`` (the paper's Section 2.3: localization)."""

from cvxdp.geometry.ball import Ball
from cvxdp.geometry.box import Box
from cvxdp.geometry.convex_set import ConvexSet
from cvxdp.geometry.domain import Domain
from cvxdp.geometry.ellipsoid import Ellipsoid
from cvxdp.geometry.intersection import Intersection
from cvxdp.geometry.lens import Lens, intersect_balls
from cvxdp.geometry.localized import LocalizedDomain, inexact_projection, localize
from cvxdp.geometry.polytope import Polytope
from cvxdp.geometry.recognize import domain_from_constraints
from cvxdp.geometry.simplex import Simplex, project_onto_simplex

__all__ = [
    "Ball",
    "Box",
    "ConvexSet",
    "Domain",
    "Ellipsoid",
    "Intersection",
    "Lens",
    "LocalizedDomain",
    "Polytope",
    "Simplex",
    "domain_from_constraints",
    "inexact_projection",
    "intersect_balls",
    "localize",
    "project_onto_simplex",
]
