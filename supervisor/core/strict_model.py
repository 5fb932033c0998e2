"""The base of the package's typed settings and state models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A key the model does not know is an error, not ignored (a misspelt setting, or a field a
    worker or repository slipped in), and the model is built when first validated, so a command
    pays only for the models it uses: a submission builds 13 of them, not 61."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
