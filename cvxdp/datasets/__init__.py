"""Built-in data: heavy-tailed synthetic tasks with known moment bounds."""

from cvxdp.datasets.synthetic import (
    TASKS,
    Task,
    high_leverage_tail,
    multivariate_t,
    student_t_hinge,
    student_t_lad,
    student_t_norm_moment,
)

__all__ = [
    "TASKS",
    "Task",
    "high_leverage_tail",
    "multivariate_t",
    "student_t_hinge",
    "student_t_lad",
    "student_t_norm_moment",
]
