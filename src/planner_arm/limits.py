"""What a plan request may hold: the `limits` section of the configuration.

Its own module, with pydantic alone, because the request models (`plan/schemas.py`) are built
from it and the Python client imports those models without the service's dependencies.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LimitsSettings(BaseModel):
    """What a plan request may hold; over these it is refused with a 422."""

    # As every config section: unknown keys are typos, so they are refused.
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_goal_chars: int = Field(8_000, ge=1, le=1_000_000)
    max_constraints: int = Field(32, ge=0, le=10_000)
    max_constraint_chars: int = Field(1_000, ge=1, le=1_000_000)
    max_context_bytes: int = Field(32 * 1024, ge=2, le=16 * 1024 * 1024)
    max_context_depth: int = Field(8, ge=1, le=100)
