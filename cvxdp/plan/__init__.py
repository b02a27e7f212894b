"""Plan, before any data is touched: every constant the privacy proof reads, from public inputs.

:class:`~cvxdp.plan.inputs.PublicInputs` (validated once) → :class:`~cvxdp.plan.planner.Planner`
(profiles, schedules, the one radius recursion) → :class:`~cvxdp.plan.planner.ReleasePlan`
(every release's ε, β, C, λ, α, sensitivity, mechanism and radii), printable with
:meth:`~cvxdp.plan.planner.ReleasePlan.describe`.  Nothing here imports ``erm/``, ``extension/`` or
``run/``.
"""


def clear_plan_caches() -> None:
    """Empty the planner's process-wide caches (the moment curves of ``(k, G_k)`` and the schedules of
    public inputs).  Their keys hold moment bounds — with ``G_k="auto"``, a private estimate; a fit
    releases its estimate anyway, but :func:`~cvxdp.selection.private_selection` must leave no trace of
    its unchosen trials, so it calls this after them.  Performance only: the caches refill on demand."""
    from cvxdp.plan.schedule import _cached_schedule
    from cvxdp.plan.tail_models import moment_tail

    moment_tail.cache_clear()
    _cached_schedule.cache_clear()


__all__ = ["clear_plan_caches"]
