"""cvxdp."""
