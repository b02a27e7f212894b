"""Direct conic programming: cones, program assembly and solver calls."""

from cvxdp.conic.cones import Cone, ConeRows, in_dual, project_dual, project_soc
from cvxdp.conic.program import (
    ConicProgram,
    ConicSettings,
    ConicSolution,
    ProgramBuilder,
    replicate_rows,
    solve,
)

__all__ = [
    "Cone",
    "ConeRows",
    "ConicProgram",
    "ConicSettings",
    "ConicSolution",
    "ProgramBuilder",
    "in_dual",
    "project_dual",
    "project_soc",
    "replicate_rows",
    "solve",
]
