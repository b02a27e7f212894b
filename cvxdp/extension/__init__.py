"""The certified Lipschitz-extension oracle ``f_{C,U}`` (DESIGN §2)."""

from cvxdp.extension.oracle import (
    METHODS,
    ExtensionEvaluation,
    ExtensionSettings,
    LipschitzExtension,
)

__all__ = ["METHODS", "ExtensionEvaluation", "ExtensionSettings", "LipschitzExtension"]
