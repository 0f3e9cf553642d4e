"""Scenario files: typed, frozen, validated (schema) and loaded with overrides (load)."""

from .load import load_scenario, parse_override
from .schema import Scenario

__all__ = ["Scenario", "load_scenario", "parse_override"]
