"""Exceptions and warnings raised by cvxdp.

Every exception subclasses :class:`CvxdpError` and the built-in that fits the
failure, so ``except ValueError`` keeps working for callers who do not know
cvxdp.  Messages say what was wrong and how to fix it.
"""


class CvxdpError(Exception):
    """Base class of every cvxdp exception."""


class ModelError(CvxdpError, ValueError):
    """The loss or its data placeholders do not describe a per-example convex loss."""


class NonConvexLossError(ModelError):
    """The loss is not convex in the model variable under CVXPY's DCP rules."""


class DomainError(CvxdpError, ValueError):
    """The domain constraints do not describe a nonempty, bounded convex set."""


class UnboundedDomainError(DomainError):
    """The domain is unbounded, so no diameter D exists."""


class EmptyDomainError(DomainError):
    """The domain constraints have no feasible point."""


class DataError(CvxdpError, ValueError):
    """Per-example data are missing, non-finite, or of the wrong shape."""


class DataTypeError(DataError, TypeError):
    """Data of a type that is not a number (a missing-value marker, an object)."""


class ParameterError(CvxdpError, ValueError):
    """A numeric argument (epsilon, C, k, G_k, a radius, ...) is outside its domain."""


class UncertifiableLossError(CvxdpError, TypeError):
    """The requested mode cannot certify this loss class."""


class CertificationError(CvxdpError, RuntimeError):
    """A required accuracy could not be certified; nothing was released."""


class SolverError(CvxdpError, RuntimeError):
    """A conic solver failed in a way cvxdp could not recover from."""


class PrivacyBudgetError(CvxdpError, ValueError):
    """Spending more privacy budget would exceed the total that was granted."""


class PrivacyLeakWarning(UserWarning):
    """A setting weakens the privacy guarantee (for example seeded, reproducible noise)."""


class UtilityWarning(UserWarning):
    """A setting or a private estimate will cost accuracy, never privacy; the message says how to avoid it."""
