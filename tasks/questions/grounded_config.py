"""Configuration of grounded questions (VistaQA-style): region rules, hallucination share, the VLM."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

TASK_TYPES = ("identification", "attribute", "ocr", "spatial", "counting", "comparison")
RULE_TASK_TYPES = ("identification", "attribute", "spatial", "counting", "comparison")  # OCR needs text annotations


class VLMConfig(BaseModel):
    """Questions written by a vision-language model through the OpenAI-compatible LLM client."""

    model_config = ConfigDict(extra="forbid")

    llm: dict = Field(default_factory=dict, description="reasonvqa.llm.LLMConfig fields (base_url, model, ...).")
    judge_llm: dict | None = Field(default=None, description="LLMConfig of the text judge (default: llm).")
    image_roots: dict[str, Path] = Field(default_factory=dict, description="Per source kind, the folder that "
                                         "images' file_path is relative to; images without a readable file are rejected.")
    task_types: list[str] = Field(default_factory=lambda: list(TASK_TYPES))
    questions_per_task: int = Field(default=5, ge=1, description="Candidates asked per image and task type (VistaQA A.7: five).")
    negatives_per_image: int = Field(default=3, ge=0, description="Negative (hallucination) candidates per image (VistaQA 3.2: three).")
    max_regions_listed: int = Field(default=40, ge=1, description="Regions listed in the prompt (largest first).")
    max_image_side: int = Field(default=1024, ge=64, description="Images are downscaled to this longest side before upload.")
    text_judge: bool = True
    near_duplicate_threshold: float | None = Field(default=0.9, ge=-1, le=1, description="SemDeDup cosine per image "
                                                   "(all-MiniLM-L6-v2); null: exact duplicates only.")
    taboo_file: Path | None = None


class GroundedConfig(BaseModel):
    """Region-based questions without an LLM, hallucination questions, and optional VLM questions."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="Generate grounded questions from the regions of every source.")
    task_types: list[str] = Field(default_factory=lambda: list(RULE_TASK_TYPES))
    hallucination_candidates_per_image: int = Field(default=25, ge=0, description="Hallucination questions made per "
                                                    "image and form (absent objects, most co-occurring first; wrong "
                                                    "attributes; impossible relations); balancing then keeps "
                                                    "balance.hallucination_share of the grounded questions.")
    # at their defaults left out of dumps, so configs (and their hashes) read as before they existed
    absence_probability: float = Field(default=0.05, gt=0, le=1, exclude_if=lambda value: value == 0.05, description="An absent object whose only basis is "
                                       "corpus co-occurrence needs an estimated probability for the scene below this: the largest over the "
                                       "image's labels s of (C[s,x] + 1) / (C[s,s] + 2), C the corpus images per label pair.")
    absence_min_label_images: int = Field(default=2, ge=1, exclude_if=lambda value: value == 2, description="Labels claimed absent by co-occurrence come "
                                          "from those held by at least this many images of the source.")
    spatial_margin: float = Field(default=0.02, ge=0, description="Least gap between two boxes along the asked axis, "
                                  "as a share of the image's width (left/right) or height (above/below); closer pairs are skipped.")
    depth_margin_m: float = Field(default=2.0, ge=0, description="Least difference in camera-frame depth (metres) for "
                                  "in front of / behind and nearest-object questions (nuScenes 3D boxes).")
    size_ratio: float = Field(default=1.25, ge=1, description="Least ratio of the larger to the smaller area in a size comparison.")
    duplicate_iou: float = Field(default=0.7, gt=0, le=1, description="Two boxes of one label overlapping this much "
                                 "make the label's count unreliable (duplicate annotations): no counting question.")
    max_count: int = Field(default=20, ge=1, description="Largest count asked.")
    max_pairs_per_image: int = Field(default=6, ge=0, description="Spatial and comparison questions per image and task type.")
    vlm: VLMConfig | None = Field(default=None, description="VLM-written grounded questions; off when null.")
