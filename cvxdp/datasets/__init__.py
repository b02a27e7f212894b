"""Built-in data: heavy-tailed synthetic tasks with known moments and exact population risks,
and loaders for real data shipped inside installed packages."""

from cvxdp.datasets.real import REAL, breast_cancer, cpssw8, diamonds, engel, fertility, randhie
from cvxdp.datasets.synthetic import (
    TASKS,
    Task,
    high_leverage_tail,
    linear_lower_bound,
    multivariate_t,
    student_t_hinge,
    student_t_lad,
    student_t_norm_moment,
)

__all__ = [
    "REAL",
    "TASKS",
    "Task",
    "breast_cancer",
    "cpssw8",
    "diamonds",
    "engel",
    "fertility",
    "high_leverage_tail",
    "linear_lower_bound",
    "multivariate_t",
    "randhie",
    "student_t_hinge",
    "student_t_lad",
    "student_t_norm_moment",
]
