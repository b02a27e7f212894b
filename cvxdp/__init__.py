"""cvxdp: pure ε-differentially private convex learning on heavy-tailed data, built on CVXPY.

State a per-example convex loss and a bounded domain in CVXPY; cvxdp
optimizes the loss's Lipschitz extension
``f_{C,U}(w, z) = min_{y ∈ U} f(y, z) + C ||w − y||`` with certified conic
solvers and privatizes the result (Lowy, arXiv 2604.06492).
"""

from cvxdp import error, geometry, losses
from cvxdp.conic.program import ConicSettings
from cvxdp.error import (
    CertificationError,
    CvxdpError,
    DataError,
    DomainError,
    EmptyDomainError,
    ModelError,
    NonConvexLossError,
    ParameterError,
    PrivacyBudgetError,
    PrivacyLeakWarning,
    SolverError,
    UnboundedDomainError,
    UncertifiableLossError,
)
from cvxdp.extension import ExtensionEvaluation, ExtensionSettings, LipschitzExtension
from cvxdp.loss import Examples, Loss
from cvxdp.model import Model

__version__ = "0.1.0"

__all__ = [
    "CertificationError",
    "ConicSettings",
    "CvxdpError",
    "DataError",
    "DomainError",
    "EmptyDomainError",
    "Examples",
    "ExtensionEvaluation",
    "ExtensionSettings",
    "LipschitzExtension",
    "Loss",
    "Model",
    "ModelError",
    "NonConvexLossError",
    "ParameterError",
    "PrivacyBudgetError",
    "PrivacyLeakWarning",
    "SolverError",
    "UnboundedDomainError",
    "UncertifiableLossError",
    "__version__",
    "error",
    "geometry",
    "losses",
]
