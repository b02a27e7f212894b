"""Algorithms 1–3: population localization, recursive localization, localized output perturbation."""

from cvxdp.localization.output_perturbation import LocalizationStep, localized_output_perturbation
from cvxdp.localization.population import (
    PhaseSchedule,
    PopulationResult,
    choose_schedule,
    initial_lambda,
    majority_vote,
    phase_schedule,
    population_localization,
    schedule_proxy,
    spread_over_phases,
)
from cvxdp.localization.profiles import (
    PROFILES,
    PaperProfile,
    Profile,
    RoundPlan,
    TightProfile,
    empirical_bias_bound,
    extension_bias_mean,
    get_profile,
)
from cvxdp.localization.recursive import (
    RecursiveResult,
    allocation,
    recursive_localization,
    round_count,
)

__all__ = [
    "PROFILES",
    "LocalizationStep",
    "PaperProfile",
    "PhaseSchedule",
    "PopulationResult",
    "Profile",
    "RecursiveResult",
    "RoundPlan",
    "TightProfile",
    "allocation",
    "choose_schedule",
    "empirical_bias_bound",
    "extension_bias_mean",
    "get_profile",
    "initial_lambda",
    "localized_output_perturbation",
    "majority_vote",
    "phase_schedule",
    "population_localization",
    "recursive_localization",
    "round_count",
    "schedule_proxy",
    "spread_over_phases",
]
