"""A typed task for the console tests: its submit form is built from its input schema."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from leasehold import JobContext, task


class ChargeIn(BaseModel):
    amount: int = Field(gt=0, description="in cents")
    currency: Literal["EUR", "USD"] = "EUR"
    express: bool = False


class ChargeOut(BaseModel):
    charged: int
    currency: str


@task("typed-charge", input=ChargeIn, output=ChargeOut)
def typed_charge(payload: ChargeIn, ctx: JobContext) -> ChargeOut:
    return ChargeOut(charged=payload.amount * (2 if payload.express else 1),
                     currency=payload.currency)
