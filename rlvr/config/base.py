"""What every config section is: unknown keys are errors, values are validated on assignment; and a part
chosen by name with arguments (data.sampler, data.filter)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Section(BaseModel):
    """A config section: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class NamedPart(Section):
    """A registered part chosen by name, with keyword arguments."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        """`data.sampler=ucb` is short for `{name: ucb}`."""
        return {"name": data} if isinstance(data, str) else data
