"""Configuration of the proposals stage (tags -> boxes -> class-count NMS -> filters -> masks).

Every weight, config and text encoder is a local path: nothing is downloaded at run time.
Relative paths in a build YAML resolve against the YAML's folder (``ProposalsConfig.resolve``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reasonvqa.paths import TEMPLATES_DIR

DEFAULT_STOP_LIST = TEMPLATES_DIR / "proposals" / "stop_tags.txt"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


def _local(path: Path | None) -> Path | None:
    if path is not None and "://" in str(path):
        raise ValueError(f"must be a local path, not a URL: {path}")
    return path


class TaggingConfig(_Strict):
    """Which classes to ask the detector for (see tasks/proposals/tagging.py)."""

    backend: Literal["labels", "vocabulary", "open_clip", "ram_plus"] = "labels"
    vocabulary: list[str] = Field(default_factory=list, description="Classes of the vocabulary and open_clip backends.")
    stop_list: Path = Field(default=DEFAULT_STOP_LIST, description="File of tags never sent to the detector.")
    extra_stop_tags: list[str] = Field(default_factory=list)
    batch_size: int = Field(default=8, ge=1, description="Images per tagger forward pass.")
    open_clip_model: str = "ViT-B-32"
    open_clip_weights: Path | None = None
    open_clip_template: str = "a photo of a {}."
    threshold: float = Field(default=0.05, ge=0, le=1, description="open_clip: least softmax probability of a tag.")
    top_k: int = Field(default=20, ge=1, description="open_clip: at most this many tags per image.")
    ram_checkout: Path | None = Field(default=None, description="Local checkout of recognize-anything (RAM++).")
    ram_weights: Path | None = None
    ram_image_size: int = 384

    _check_local = field_validator("stop_list", "open_clip_weights", "ram_checkout", "ram_weights")(_local)


class DetectorConfig(_Strict):
    """GroundingDINO (groundingdino-py): model config file, checkpoint and text encoder folder."""

    config_file: Path | None = Field(default=None, description="GroundingDINO model config (.py), e.g. GroundingDINO_SwinT_OGC.py.")
    weights: Path | None = Field(default=None, description="Checkpoint (.pth) with a 'model' state dict.")
    text_encoder: Path | None = Field(default=None, description="Local folder of a BERT model + fast tokenizer (bert-base-uncased for the released weights).")
    box_threshold: float = Field(default=0.35, ge=0, le=1, description="Least max token probability of a kept box.")
    text_threshold: float = Field(default=0.25, ge=0, le=1, description="Least probability of the box's class (max over its tokens).")
    image_size: int = Field(default=800, ge=32, description="Shorter side after resizing (GroundingDINO's inference default: 800).")
    max_size: int = Field(default=1333, ge=32, description="Longer side cap after resizing.")
    batch_size: int = Field(default=1, ge=1, description="(image, prompt) pairs per forward pass.")
    max_text_len: int = Field(default=256, ge=8, description="Token limit of one prompt (the model's max_text_len).")

    _check_local = field_validator("config_file", "weights", "text_encoder")(_local)


class SuppressionConfig(_Strict):
    """Class-count NMS and the filters after it (GroundingME section 3.2.1)."""

    iou_threshold: float = Field(default=0.5, ge=0, le=1, description="A box overlapping a preferred box by IoU above this is dropped.")
    min_class_instances: int = Field(default=3, ge=1, description="Drop classes with fewer boxes than this after NMS.")
    max_area_fraction: float = Field(default=0.5, gt=0, le=1, description="Drop boxes covering more of the image than this.")


class SegmenterConfig(_Strict):
    """SAM-family masks for the kept boxes."""

    backend: Literal["segment_anything", "sam2"] = "segment_anything"
    model_type: str = Field(default="vit_b", description="segment_anything registry key (vit_b, vit_l, vit_h).")
    weights: Path | None = Field(default=None, description="Checkpoint file.")
    sam2_config: str | None = Field(default=None, description="sam2: model config name, e.g. configs/sam2.1/sam2.1_hiera_t.yaml.")
    batch_size: int = Field(default=64, ge=1, description="Box prompts per mask decoder call.")

    _check_local = field_validator("weights")(_local)


class ProposalsConfig(_Strict):
    """The proposals stage of a build; off unless ``enabled``."""

    enabled: bool = False
    device: str = Field(default="cpu", description="torch device of all models: cpu, cuda, cuda:1, ...")
    image_roots: dict[str, Path] = Field(default_factory=dict, description="Source kind -> folder the images' file_path is relative to; sources without one get no proposals.")
    images_per_call: int = Field(default=4, ge=1, description="Images per cached call (the unit a killed shard resumes from).")
    tagging: TaggingConfig = Field(default_factory=TaggingConfig)
    detector: DetectorConfig = Field(default_factory=DetectorConfig)
    suppression: SuppressionConfig = Field(default_factory=SuppressionConfig)
    segmenter: SegmenterConfig | None = Field(default_factory=SegmenterConfig, description="null: boxes without masks.")

    def resolve(self, base: Path) -> None:
        """Make every relative path absolute against ``base`` (a build YAML's folder)."""

        def fix(path: Path | None) -> Path | None:
            return path if path is None or path.is_absolute() else base / path

        self.image_roots = {k: v if v.is_absolute() else base / v for k, v in self.image_roots.items()}
        for model, names in ((self.tagging, ("stop_list", "open_clip_weights", "ram_checkout", "ram_weights")),
                             (self.detector, ("config_file", "weights", "text_encoder")),
                             (self.segmenter, ("weights",))):
            for name in names if model is not None else ():
                setattr(model, name, fix(getattr(model, name)))
