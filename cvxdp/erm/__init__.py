"""Certified solvers for the regularized extension ERM (Lemma 2.6, Algorithm 4, Appendix E.3)."""

from cvxdp.erm.adaptive_subgradient import adaptive_subgradient
from cvxdp.erm.cutting_plane import ellipsoid_method, iteration_bound
from cvxdp.erm.joint import light_mask, solve_joint
from cvxdp.erm.problem import ERMCertificate, RegularizedERM, bundle_lower_bound, model_minimum
from cvxdp.erm.solver import METHODS, ERMSettings, solve_certified

__all__ = [
    "METHODS",
    "ERMCertificate",
    "ERMSettings",
    "RegularizedERM",
    "adaptive_subgradient",
    "bundle_lower_bound",
    "ellipsoid_method",
    "iteration_bound",
    "light_mask",
    "model_minimum",
    "solve_certified",
    "solve_joint",
]
