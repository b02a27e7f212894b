"""Baselines a user would otherwise pick (DESIGN §6)."""

from cvxdp.baselines.nonprivate import empirical_objective, nonprivate_erm

__all__ = ["empirical_objective", "nonprivate_erm"]
