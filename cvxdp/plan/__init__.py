"""Plan, before any data is touched: every constant the privacy proof reads, from public inputs.

:class:`~cvxdp.plan.inputs.PublicInputs` (validated once) → :class:`~cvxdp.plan.planner.Planner`
(profiles, schedules, the one radius recursion) → :class:`~cvxdp.plan.planner.ReleasePlan`
(every release's ε, β, C, λ, α, sensitivity, mechanism and radii), printable with
:meth:`~cvxdp.plan.planner.ReleasePlan.describe`.  Nothing here imports ``erm/``, ``extension/`` or
``run/``.
"""
