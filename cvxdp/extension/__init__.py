"""The certified Lipschitz-extension oracle ``f_{C,U}`` (the paper's Section 2.2 and Appendix E.3)."""

from cvxdp.extension.oracle import (
    METHODS,
    ExtensionEvaluation,
    ExtensionSettings,
    LipschitzExtension,
)

__all__ = ["METHODS", "ExtensionEvaluation", "ExtensionSettings", "LipschitzExtension"]
