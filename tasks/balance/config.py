"""Configuration of answer balancing and image-disjoint splitting."""

from __future__ import annotations

from pydantic import BaseModel, Field


class BalanceConfig(BaseModel):
    """Answer balancing per property group (ReasonVQA 3.3.1, after GQA)."""

    enabled: bool = True
    rounds: int = Field(default=20, ge=0)


class SplitConfig(BaseModel):
    """Image-disjoint, answer-stratified split (ReasonVQA 3.3.2)."""

    train_ratio: float = Field(default=0.7, gt=0, lt=1)
    pool_min_share: float = Field(default=0.01, gt=0, lt=1, description="An answer enters the pool with at least this share of all answers.")
