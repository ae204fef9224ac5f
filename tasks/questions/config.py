"""Configuration of templated question generation."""

from __future__ import annotations

from pydantic import BaseModel, Field


class QuestionConfig(BaseModel):
    """Which questions to generate."""

    domains: list[str] | None = Field(default=None, description="Restrict to these domains (names from templates/domains.yaml); null = all.")
    max_hops: int = Field(default=3, ge=1, le=3)
    scene_graph_clauses: bool = Field(default=True, description="Use Visual Genome relations as sub-clauses.")
