"""Configuration of answer balancing and image-disjoint splitting.

The ReasonVQA and GQA papers leave the balancing bound and the consecutive-answer ratios
unpublished; the defaults below are this project's choices, explained field by field and in
tasks/balance/README.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class BalanceConfig(BaseModel):
    """Answer balancing per property group (ReasonVQA 3.3.1, GQA's question balancing).

    Per group (property_id) and round, the answers are ranked by count (ties: answer text).
    Each of the ``top_k`` most frequent answers that has a non-empty tail (the answers ranked
    after it) is cut to at most ``head_tail_bound`` times its tail mass and at most
    ``max_ratio`` times the next answer's count, but never below ``min_ratio`` times the
    next answer's count (this keeps the frequency order) and never by more than
    ``max_round_fraction`` of its questions in one round. Rounds repeat until nothing
    changes or ``rounds`` is reached.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    rounds: int = Field(
        default=20,
        ge=0,
        description="Upper bound on balancing rounds (the paper's 20); the loop stops early at a fixed point.",
    )
    top_k: int = Field(default=10, ge=1, description="Only the top-k answers of a group are downsampled (the paper's 10).")
    head_tail_bound: float = Field(
        default=1.0,
        ge=1.0,
        description="An answer may hold at most this many times the questions of all less frequent answers "
        "of its group together (1.0: never more than the rest; a two-answer group ends 50/50, like GQA's yes/no).",
    )
    min_ratio: float = Field(
        default=1.0,
        ge=1.0,
        description="An answer is never cut below this many times the next answer's count (1.0 keeps the order, ties allowed).",
    )
    max_ratio: float = Field(
        default=1.5,
        ge=1.0,
        description="An answer may hold at most this many times the next answer's count (smooths steep heads).",
    )
    max_round_fraction: float = Field(
        default=0.25,
        gt=0.0,
        le=1.0,
        description="At most this share of an answer's questions is removed in one round, so image "
        "question counts (the removal preference) are refreshed between small steps.",
    )

    hallucination_share: float | None = Field(
        default=0.27, ge=0, lt=1,
        description="Share of hallucination questions among the grounded questions kept by balancing "
        "(VistaQA 3.1: 314 of 1,157, about 27%); extra ones are removed as hallucination_share. null: keep all.",
    )
    # left out of dumps when unset, so configs (and their hashes) without it read as before it existed
    absence_bases: list[str] | None = Field(
        default=None, exclude_if=lambda value: value is None,
        description="Bases of absence claims a release takes (tasks/questions/absence.py BASES: taxonomy, review, "
        "annotated_attribute, refuting_boxes, annotated_relation, detector, vlm, cooccurrence); hallucination rows "
        "with another basis are set aside (absence_basis_not_allowed), those with none always (no_absence_basis). "
        "null: every basis.",
    )
    hop_shares: dict[int, float] | None = Field(
        default_factory=lambda: {1: 0.305, 2: 0.634, 3: 0.061},
        description="Target share of questions per hop count after balancing (default: ReasonVQA-U, 23,767 / "
        "49,459 / 4,781 of 78,007, supplementary Table 2). Over-represented hops are downsampled (reason hop_mix) "
        "so no hop exceeds its share among the hops present; null keeps every hop as balanced.",
    )

    @model_validator(mode="after")
    def _hop_shares_valid(self) -> "BalanceConfig":
        if self.hop_shares is not None:
            if not self.hop_shares or any(h not in (1, 2, 3) or s < 0 for h, s in self.hop_shares.items()):
                raise ValueError("hop_shares maps hop counts 1..3 to non-negative shares")
            if abs(sum(self.hop_shares.values()) - 1.0) > 0.01:
                raise ValueError(f"hop_shares must sum to 1 (got {sum(self.hop_shares.values()):.3f})")
        return self

    @model_validator(mode="after")
    def _absence_bases_known(self) -> "BalanceConfig":
        from reasonvqa.absence_bases import BASES

        unknown = sorted(set(self.absence_bases or ()) - set(BASES))
        if unknown:
            raise ValueError(f"absence_bases: unknown basis {unknown}; known: {', '.join(BASES)}")
        if self.absence_bases is not None and not self.absence_bases:
            raise ValueError("absence_bases: give at least one basis (null takes every basis)")
        return self

    @model_validator(mode="after")
    def _ratios_consistent(self) -> "BalanceConfig":
        if self.max_ratio < self.min_ratio:
            raise ValueError(f"max_ratio ({self.max_ratio}) must be >= min_ratio ({self.min_ratio})")
        if self.head_tail_bound < self.min_ratio:
            raise ValueError(f"head_tail_bound ({self.head_tail_bound}) must be >= min_ratio ({self.min_ratio})")
        return self


class SplitConfig(BaseModel):
    """Image-disjoint, answer-stratified split (ReasonVQA 3.3.2)."""

    model_config = ConfigDict(extra="forbid")

    train_ratio: float = Field(default=0.7, gt=0, lt=1)
    pool_min_share: float = Field(
        default=0.01, gt=0, lt=1, description="An answer enters the pool with at least this share of all answers."
    )
    drop_test_pairs_seen_in_train: bool = Field(
        default=True,
        description="Remove from test the questions whose (question text, answer) pair also occurs in train "
        "(answerable from the question alone; reason seen_in_train). Keeps the question-only prior of the "
        "bias report low; false keeps the paper's split as it is.",
    )


class PartitionConfig(BaseModel):
    """Where balance + split + write hold the pool: in memory (``pipeline.plan_release``) or in Parquet
    files on disk, a few columns in memory (``partitioned.plan_partitioned``). Both write the same release
    bytes (tested), so this setting is not part of the config hash or the manifest."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["auto", "on", "off"] = Field(
        default="auto", description="on: always on disk; off: always in memory; auto: on disk from min_rows pool rows.")
    min_rows: int = Field(
        default=10_000_000, ge=0,
        description="auto switches to the on-disk path from this many pool rows (the in-memory path peaks near "
        "0.8 KB per question: about 8 GB at 10 M questions).")

    def on_disk(self, pool_rows: int) -> bool:
        """True when a pool of ``pool_rows`` rows is balanced, split and written from disk."""
        return self.mode == "on" or (self.mode == "auto" and pool_rows >= self.min_rows)
