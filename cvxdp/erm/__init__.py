"""Certified solvers for the regularized extension ERM (Lemma 2.6, Algorithm 4, Appendix E.3, bundle)."""

from cvxdp.erm.adaptive_subgradient import adaptive_subgradient
from cvxdp.erm.bundle import BundleResult, bundle_method
from cvxdp.erm.cutting_plane import ellipsoid_method, iteration_bound
from cvxdp.erm.joint import light_mask, solve_joint
from cvxdp.erm.problem import (
    BundleMaster,
    ERMCertificate,
    RegularizedERM,
    bundle_lower_bound,
    bundle_master,
    model_minimum,
)
from cvxdp.erm.solver import METHODS, ERMSettings, solve_certified

__all__ = [
    "METHODS",
    "BundleMaster",
    "BundleResult",
    "ERMCertificate",
    "ERMSettings",
    "RegularizedERM",
    "adaptive_subgradient",
    "bundle_lower_bound",
    "bundle_master",
    "bundle_method",
    "ellipsoid_method",
    "iteration_bound",
    "light_mask",
    "model_minimum",
    "solve_certified",
    "solve_joint",
]
