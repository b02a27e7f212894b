"""cvxdp: pure ε-differentially private convex learning on heavy-tailed data, built on CVXPY.

State a per-example convex loss and a bounded domain in CVXPY; cvxdp
optimizes the loss's Lipschitz extension
``f_{C,U}(w, z) = min_{y ∈ U} f(y, z) + C ||w − y||`` with certified conic
solvers and privatizes the result (Lowy, arXiv 2604.06492).
"""

from cvxdp import datasets, error, geometry, losses, moment_bounds
from cvxdp.conic.program import ConicSettings
from cvxdp.erm import ERMCertificate, ERMSettings
from cvxdp.error import (
    CertificationError,
    CvxdpError,
    DataError,
    DataTypeError,
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
    UtilityWarning,
)
from cvxdp.estimators import PrivateLADRegressor, PrivateLinearSVM, PrivateQuantileRegressor
from cvxdp.extension import ExtensionEvaluation, ExtensionSettings, LipschitzExtension
from cvxdp.loss import Examples, Loss
from cvxdp.model import Model
from cvxdp.plan.planner import ReleasePlan
from cvxdp.plan.profiles import PaperProfile, TightProfile
from cvxdp.privacy.accountant import BudgetAccountant
from cvxdp.privacy.ledger import PrivacyLedger
from cvxdp.privacy.mechanisms import L2LaplaceMechanism
from cvxdp.problem import PrivateProblem, PrivateResult
from cvxdp.run.executor import DaskExecutor, PartitionedExecutor, ProcessExecutor, SerialExecutor
from cvxdp.selection import Candidate, SelectionResult, private_selection

__version__ = "0.1.0"

__all__ = [
    "BudgetAccountant",
    "Candidate",
    "CertificationError",
    "ConicSettings",
    "CvxdpError",
    "DaskExecutor",
    "DataError",
    "DataTypeError",
    "DomainError",
    "ERMCertificate",
    "ERMSettings",
    "EmptyDomainError",
    "Examples",
    "ExtensionEvaluation",
    "ExtensionSettings",
    "L2LaplaceMechanism",
    "LipschitzExtension",
    "Loss",
    "Model",
    "ModelError",
    "NonConvexLossError",
    "PaperProfile",
    "ParameterError",
    "PartitionedExecutor",
    "PrivacyBudgetError",
    "PrivacyLeakWarning",
    "PrivacyLedger",
    "PrivateLADRegressor",
    "PrivateLinearSVM",
    "PrivateProblem",
    "PrivateQuantileRegressor",
    "PrivateResult",
    "ProcessExecutor",
    "ReleasePlan",
    "SelectionResult",
    "SerialExecutor",
    "SolverError",
    "TightProfile",
    "UnboundedDomainError",
    "UncertifiableLossError",
    "UtilityWarning",
    "__version__",
    "datasets",
    "error",
    "geometry",
    "losses",
    "moment_bounds",
    "private_selection",
]
