"""Run a plan: the one layer that binds data to noise.

:func:`~cvxdp.run.release.release_round` (Algorithm 2) is the single release path, used by
:mod:`cvxdp.run.recursive` (Algorithm 3), :mod:`cvxdp.run.population` (Algorithm 1), the baselines
and the audit; :mod:`cvxdp.run.executor` runs the independent groups of a phase.
"""
