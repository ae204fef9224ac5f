"""The templated questions stage: one source shard of images (unit: its ``SourceShard``) -> questions,
joined to the shard's entity links by its build-wide number (``shard.questions_for_shard``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from reasonvqa import schemas
from reasonvqa.stage import StageResult
from reasonvqa.stage_contract import ShardContext, Stage
from reasonvqa.tasks.questions.config import QuestionConfig


class QuestionsStageConfig(BaseModel):
    """The question config and what every shard joins to: the links folder, the merged facts, the
    seed and the knowledge snapshot the questions name."""

    model_config = ConfigDict(extra="forbid")

    questions: QuestionConfig
    link_dir: Path
    facts_path: Path
    seed: int
    knowledge_snapshot: str


class QuestionsStage(Stage):
    """Templated questions of one source shard (written as questions shard ``shard.number``)."""

    name = "questions"
    outputs = {"questions": schemas.QUESTIONS}

    def read(self, unit: Any) -> dict[str, pa.Table]:
        return {}  # questions_for_shard reads the shard's tables and links itself

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        from reasonvqa.tasks.questions.shard import questions_for_shard

        config: QuestionsStageConfig = self.config  # type: ignore[assignment]
        return questions_for_shard(ctx.unit, config.link_dir, config.facts_path, config.questions, config.seed,
                                   config.knowledge_snapshot)
