"""SAM-family masks for boxes: one image embedding per image, box prompts in batches, COCO RLE out
(the runs found on the model's device, the strings written by ``reasonvqa/masks.py``).

Backends behind ``Segmenter``: segment-anything's ``SamPredictor`` (tested here with a small
randomly initialized model built by the library's own builder) and SAM 2's
``SAM2ImagePredictor`` from the ``sam2`` package (same calls; not installed or verified here).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from reasonvqa import masks as mask_codec
from reasonvqa.tasks.proposals.config import SegmenterConfig

STABILITY_OFFSET = 1.0  # SAM's automatic mask generator default (stability_score_offset)


@dataclass(frozen=True)
class Masks:
    """Per box: COCO RLE ``{"size": [h, w], "counts": str}``, mask area in pixels, predicted IoU,
    and the stability score where the backend gives mask logits (None otherwise)."""

    rles: list[dict]
    areas: np.ndarray
    predicted_iou: np.ndarray
    stability: np.ndarray | None = None


def column_major_changes(masks: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each of the ``(N, H, W)`` bool ``masks`` (a torch tensor, on its own device) changes value
    in the column-major scan COCO RLE runs along: ``(owner, position, first)`` as
    ``reasonvqa.masks.coco_encode_changes`` takes them. Only the changes cross to the host, sorted there
    by one key (owner, position); no transposed copy of the pixels is made."""
    import torch

    count, height, width = masks.shape
    inside = (masks[:, 1:, :] != masks[:, :-1, :]).nonzero()  # (mask, row - 1, column): a new run at row
    across = (masks[:, 0, 1:] != masks[:, -1, :-1]).nonzero()  # (mask, column - 1): a new run at the column's top
    keys = torch.cat((inside[:, 0] * (height * width) + inside[:, 2] * height + inside[:, 1] + 1,
                      across[:, 0] * (height * width) + (across[:, 1] + 1) * height))
    keys = torch.sort(keys).values.cpu().numpy()
    return keys // (height * width), keys % (height * width), masks[:, 0, 0].cpu().numpy()


class Segmenter(ABC):
    """Masks for boxes of one image. ``name`` goes into the regions' origin."""

    name: str

    def __init__(self, predictor: Any, batch_size: int, device: str) -> None:
        self.predictor = predictor
        self.batch_size = batch_size
        self.device = device
        self.forward_seconds = 0.0
        self.mask_runs_seconds = 0.0

    @abstractmethod
    def _predict(self, boxes: np.ndarray, image_shape: tuple[int, int]) -> tuple[Any, np.ndarray, np.ndarray | None]:
        """Masks ``(B, H, W)`` bool (a torch tensor on the model's device, or a numpy array), predicted
        IoU ``(B,)`` and stability ``(B,)`` (or None) for XYXY pixel boxes of the set image."""

    def segment(self, image: np.ndarray, boxes: np.ndarray) -> Masks:
        """Masks of XYXY pixel ``boxes`` in an RGB ``(H, W, 3)`` uint8 image (embedding computed once).

        The masks stay on the model's device: only where their column-major scan changes value comes
        to the host, which writes the COCO RLE strings from those runs (time on the device:
        ``forward_seconds`` for the model, ``mask_runs_seconds`` for finding the changes)."""
        import torch

        boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
        if not len(boxes):
            return Masks([], np.zeros(0), np.zeros(0, dtype=np.float32))
        rles: list[dict] = []
        areas: list[np.ndarray] = []
        ious: list[np.ndarray] = []
        stability: list[np.ndarray] | None = []
        started = time.perf_counter()
        self.predictor.set_image(image)
        self.forward_seconds += time.perf_counter() - started
        try:
            for start in range(0, len(boxes), self.batch_size):
                started = time.perf_counter()
                masks, iou, stable = self._predict(boxes[start : start + self.batch_size], image.shape[:2])
                self.forward_seconds += time.perf_counter() - started
                started = time.perf_counter()
                owner, position, first = column_major_changes(torch.as_tensor(masks))
                height, width = masks.shape[1:]
                del masks  # the device's memory back with its work (on the CPU device: 40 MB unmapped per 50 masks)
                self.mask_runs_seconds += time.perf_counter() - started
                encoded, area = mask_codec.coco_encode_changes(owner, position, first, height, width)
                rles += encoded
                areas.append(area)
                ious.append(np.asarray(iou, dtype=np.float32).reshape(-1))
                stability = None if stable is None or stability is None else stability + [np.asarray(stable, dtype=np.float32)]
        finally:
            self.predictor.reset_image()
        return Masks(rles, np.concatenate(areas), np.concatenate(ious), np.concatenate(stability) if stability else None)


class SamSegmenter(Segmenter):
    """segment-anything 1.0: ``SamPredictor.predict_torch`` with a batch of boxes."""

    def __init__(self, model: Any, batch_size: int, device: str, name: str = "sam") -> None:
        from segment_anything import SamPredictor

        model.to(device).eval()
        super().__init__(SamPredictor(model), batch_size, device)
        self.name = name

    @classmethod
    def from_config(cls, config: SegmenterConfig, device: str) -> "SamSegmenter":
        """Load ``config.model_type`` from the local checkpoint with the library's model registry."""
        from segment_anything import sam_model_registry

        if config.weights is None or not config.weights.is_file():
            raise FileNotFoundError(f"segmenter.weights: SAM checkpoint not found: {config.weights}")
        if config.model_type not in sam_model_registry:
            raise ValueError(f"segmenter.model_type {config.model_type!r} is not one of {sorted(sam_model_registry)}")
        model = sam_model_registry[config.model_type](checkpoint=str(config.weights))
        return cls(model, config.batch_size, device, name=f"sam:{config.model_type}")

    def _predict(self, boxes: np.ndarray, image_shape: tuple[int, int]) -> tuple[Any, np.ndarray, np.ndarray]:
        import torch
        from segment_anything.utils.amg import calculate_stability_score

        prompt = torch.as_tensor(boxes, device=self.predictor.device)
        prompt = self.predictor.transform.apply_boxes_torch(prompt, image_shape)
        with torch.no_grad():
            logits, iou, _ = self.predictor.predict_torch(point_coords=None, point_labels=None, boxes=prompt,
                                                          multimask_output=False, return_logits=True)
            threshold = self.predictor.model.mask_threshold
            stability = calculate_stability_score(logits[:, 0], threshold, STABILITY_OFFSET)
        return logits[:, 0] > threshold, iou[:, 0].float().cpu().numpy(), stability.float().cpu().numpy()


class Sam2Segmenter(Segmenter):
    """SAM 2 (``sam2`` package): ``SAM2ImagePredictor.predict`` with a batch of boxes. Not verified here."""

    def __init__(self, config: SegmenterConfig, device: str) -> None:
        from sam2.build_sam import build_sam2
        from sam2.sam2_image_predictor import SAM2ImagePredictor

        if config.weights is None or not config.weights.is_file() or not config.sam2_config:
            raise FileNotFoundError(f"segmenter.weights and segmenter.sam2_config are required for sam2: {config.weights}")
        super().__init__(SAM2ImagePredictor(build_sam2(config.sam2_config, str(config.weights), device=device)),
                         config.batch_size, device)
        self.name = f"sam2:{config.sam2_config}"

    def _predict(self, boxes: np.ndarray, image_shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, None]:
        masks, iou, _ = self.predictor.predict(box=boxes, multimask_output=False)
        masks, iou = np.asarray(masks), np.asarray(iou)
        if masks.ndim == 3:  # one box: (1, H, W)
            masks, iou = masks[None], iou[None]
        return masks[:, 0] > 0, iou[:, 0], None


def build_segmenter(config: SegmenterConfig, device: str) -> Segmenter:
    """The configured segmenter, loaded on ``device``."""
    if config.backend == "sam2":
        return Sam2Segmenter(config, device)
    return SamSegmenter.from_config(config, device)
