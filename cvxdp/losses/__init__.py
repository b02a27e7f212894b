"""Canned per-example losses: one-liners that build the CVXPY expression a user would write."""

from cvxdp.losses.absolute import absolute
from cvxdp.losses.affine import affine
from cvxdp.losses.hinge import hinge
from cvxdp.losses.huber import huber
from cvxdp.losses.logistic import logistic
from cvxdp.losses.max_affine import max_affine
from cvxdp.losses.pinball import pinball
from cvxdp.losses.squared import squared

__all__ = ["absolute", "affine", "hinge", "huber", "logistic", "max_affine", "pinball", "squared"]
