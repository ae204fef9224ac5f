"""GroundingDINO boxes (groundingdino-py) for text prompts, with local weights and text encoder only.

Each box's class is the argmax over classes of its best token probability inside the class's
character span in the caption (tasks/proposals/prompts.py), so a box never gets a sub-word
phrase ("##van") or a merge of two classes as its class name. Boxes come back as XYXY pixels
of the original image.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from reasonvqa.tasks.proposals.config import DetectorConfig
from reasonvqa.tasks.proposals.prompts import Prompt, assign_classes, class_token_mask

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


@dataclass(frozen=True)
class Detections:
    """Boxes of one (image, prompt) pair above both thresholds."""

    boxes: np.ndarray  # (n, 4) XYXY pixels of the original image, clipped to it
    labels: list[str]  # class of each box, one of the prompt's classes
    scores: np.ndarray  # class score: max token probability inside the class's span
    box_scores: np.ndarray  # max token probability over the whole caption
    best: dict[str, float] = field(default_factory=dict)  # per prompt class: its highest probability over every box


def cxcywh_to_xyxy_pixels(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
    """Normalized center-size boxes -> XYXY pixel corners, clipped to the image."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    cx, cy, w, h = boxes.T
    xyxy = np.stack([(cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width, (cy + h / 2) * height], axis=1)
    return np.clip(xyxy, 0.0, [width, height, width, height])


def require_file(path: Any, field: str) -> str:
    from pathlib import Path

    if path is None or not Path(path).exists():
        raise FileNotFoundError(f"{field}: not found: {path} (weights and encoders are read from local paths only)")
    return str(path)


class GroundingDinoDetector:
    """A GroundingDINO model built from its config file, loaded from a local checkpoint."""

    name = "grounding_dino"

    def __init__(self, config: DetectorConfig, device: str) -> None:
        import torch
        from groundingdino.models import build_model
        from groundingdino.util.misc import clean_state_dict
        from groundingdino.util.slconfig import SLConfig

        self.torch = torch
        self.config = config
        self.device = device
        args = SLConfig.fromfile(require_file(config.config_file, "detector.config_file"))
        args.device = device
        args.text_encoder_type = require_file(config.text_encoder, "detector.text_encoder")
        if getattr(args, "max_text_len", config.max_text_len) != config.max_text_len:
            raise ValueError(f"detector.max_text_len {config.max_text_len} != the model's max_text_len {args.max_text_len}")
        model = build_model(args)
        checkpoint = torch.load(require_file(config.weights, "detector.weights"), map_location="cpu", weights_only=True)
        result = model.load_state_dict(clean_state_dict(checkpoint.get("model", checkpoint)), strict=False)
        if len(result.missing_keys) == len(model.state_dict()):
            raise ValueError(f"detector.weights: no parameter of the model is in {config.weights}")
        self.model = model.to(device).eval()
        self.tokenizer = model.tokenizer
        self.forward_seconds = 0.0

    def transform(self, image: Any) -> Any:
        """GroundingDINO's inference transform: resize (shorter side, capped longer side), normalize."""
        import groundingdino.datasets.transforms as T

        pipeline = T.Compose([T.RandomResize([self.config.image_size], max_size=self.config.max_size),
                              T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
        tensor, _ = pipeline(image.convert("RGB"), None)
        return tensor

    def detect(self, items: Sequence[tuple[Any, Prompt]], inputs: Sequence[Any] | None = None) -> list[Detections]:
        """Detections for each (PIL image, prompt) pair, ``batch_size`` pairs per forward pass. ``inputs``:
        each pair's image already through ``transform`` (the stage's loader threads), else done here."""
        out: list[Detections] = []
        size = self.config.batch_size
        for start in range(0, len(items), size):
            out += self._detect_batch(items[start : start + size], inputs[start : start + size] if inputs else None)
        return out

    def _detect_batch(self, items: Sequence[tuple[Any, Prompt]], inputs: Sequence[Any] | None) -> list[Detections]:
        from groundingdino.util.misc import nested_tensor_from_tensor_list

        torch = self.torch
        tensors = list(inputs) if inputs is not None else [self.transform(image) for image, _ in items]
        samples = nested_tensor_from_tensor_list(tensors).to(self.device)
        started = time.perf_counter()
        with torch.no_grad():
            outputs = self.model(samples, captions=[prompt.caption for _, prompt in items])
        probs = outputs["pred_logits"].sigmoid().float().cpu().numpy()  # (B, queries, max_text_len)
        boxes = outputs["pred_boxes"].float().cpu().numpy()  # (B, queries, 4) normalized cx, cy, w, h
        self.forward_seconds += time.perf_counter() - started
        return [self._select(probs[b], boxes[b], image.size, prompt) for b, (image, prompt) in enumerate(items)]

    def _select(self, probs: np.ndarray, boxes: np.ndarray, size: tuple[int, int], prompt: Prompt) -> Detections:
        mask = class_token_mask(prompt, self.tokenizer, probs.shape[1])
        assigned = assign_classes(probs, mask)
        keep = (assigned.box_score > self.config.box_threshold) & (assigned.class_score > self.config.text_threshold)
        width, height = size
        return Detections(
            boxes=cxcywh_to_xyxy_pixels(boxes[keep], width, height),
            labels=[prompt.classes[k] for k in assigned.label[keep]],
            scores=assigned.class_score[keep],
            box_scores=assigned.box_score[keep],
            best={c: float(assigned.best[k]) for k, c in enumerate(prompt.classes)},
        )
