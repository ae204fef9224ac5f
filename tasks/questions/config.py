"""Configuration of templated question generation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class QuestionConfig(BaseModel):
    """Which questions to generate and how their references and distractors are chosen."""

    model_config = ConfigDict(extra="forbid")

    domains: list[str] | None = Field(
        default=None,
        description="Restrict to these domains (names or slugs from templates/domains.yaml, any case; stored as names); null = all.",
    )
    max_hops: int = Field(default=3, ge=1, le=3)
    scene_graph_clauses: bool = Field(default=True, description="Use Visual Genome relations as sub-clauses.")
    max_scene_graph_refs: int = Field(
        default=1, ge=0, description="Scene-graph phrases used per linked item and image (taken in relation-id order)."
    )
    max_predicate_words: int = Field(default=4, ge=1, description="Longest relationship predicate used in a scene-graph phrase.")
    fallback_class_name: str = Field(
        default="landmark",
        min_length=1,
        description="Name of a linked landmark whose item has no English instance-of/subclass-of label.",
    )
    distractors: Literal["exchangeable", "paper"] = Field(
        default="exchangeable",
        description="exchangeable: number/date distractors from real values of the same property where enough exist, "
        "else on the answer's rounding grid, the answer at a uniform rank; item/literal "
        "distractors drawn in proportion to how often each value is an answer (a choice-only model is at chance); "
        "paper: ReasonVQA 3.2.2 (a window around the answer, uniform pool draws), for reproduction.",
    )
    latest_year: int = Field(
        default=2026,
        description="Date distractors never fall after this year (unless the answer does); a config value, never the clock.",
    )
    max_questions_per_image: int | None = Field(
        default=None,
        ge=1,
        description="Keep at most this many questions per image (lowest question ids); the rest are rejected as over_image_cap. null = all.",
    )

    @field_validator("domains")
    @classmethod
    def _canonical_domains(cls, value: list[str] | None) -> list[str] | None:
        from reasonvqa.tasks.questions.bank import resolve_domain_names

        return None if value is None else resolve_domain_names(value)
