"""The real GroundingDINO and SAM code paths with small random-weight models (no weights here)."""

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("torch")
pytest.importorskip("groundingdino")
pytest.importorskip("segment_anything")

from reasonvqa.masks import coco_decode  # noqa: E402
from reasonvqa.tasks.proposals.config import DetectorConfig, SegmenterConfig  # noqa: E402
from reasonvqa.tasks.proposals.detector import GroundingDinoDetector, cxcywh_to_xyxy_pixels  # noqa: E402
from reasonvqa.tasks.proposals.masks import SamSegmenter  # noqa: E402
from reasonvqa.tasks.proposals.prompts import build_prompt  # noqa: E402
from reasonvqa.tasks.proposals.random_models import TINY_SAM, write_grounding_dino, write_sam  # noqa: E402


@pytest.fixture(scope="module")
def gdino_files(tmp_path_factory):
    return write_grounding_dino(tmp_path_factory.mktemp("gdino"))


@pytest.fixture(scope="module")
def sam_weights(tmp_path_factory):
    return write_sam(tmp_path_factory.mktemp("sam"))


def noise_image(width: int, height: int, seed: int = 0) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8))


def test_box_conversion_to_original_pixels():
    boxes = cxcywh_to_xyxy_pixels(np.array([[0.5, 0.5, 0.5, 0.5], [0.05, 0.9, 0.2, 0.4]]), 640, 480)
    assert np.allclose(boxes, [[160, 120, 480, 360], [0, 336, 96, 480]], rtol=0, atol=1e-9)  # clipped at x=0, y=480


def test_detector_loads_local_files_and_returns_boxes_in_original_pixels(gdino_files):
    config = DetectorConfig(**gdino_files, box_threshold=0.0, text_threshold=0.0, image_size=96, max_size=160, batch_size=2)
    detector = GroundingDinoDetector(config, "cpu")
    prompts = [build_prompt(["minivan", "dog"]), build_prompt(["person"]), build_prompt(["traffic light", "car"])]
    images = [noise_image(300, 200), noise_image(300, 200), noise_image(120, 240, seed=1)]
    found = detector.detect(list(zip(images, prompts)))
    assert len(found) == 3
    for (image, prompt), det in zip(zip(images, prompts), found):
        assert det.boxes.shape == (30, 4)  # every query passes zero thresholds
        assert set(det.labels) <= set(prompt.classes)
        w, h = image.size
        assert (det.boxes[:, [0, 2]] <= w).all() and (det.boxes[:, [1, 3]] <= h).all() and (det.boxes >= 0).all()
        assert (det.scores <= det.box_scores + 1e-12).all()
    # thresholds: nothing above 1.0
    strict = GroundingDinoDetector(config.model_copy(update={"box_threshold": 1.0}), "cpu")
    assert strict.detect([(images[0], prompts[0])])[0].boxes.shape == (0, 4)


def test_detector_is_deterministic_and_batch_independent(gdino_files):
    one = GroundingDinoDetector(DetectorConfig(**gdino_files, box_threshold=0.0, text_threshold=0.0,
                                               image_size=96, max_size=160, batch_size=1), "cpu")
    pairs = [(noise_image(200, 150), build_prompt(["dog", "cat"])), (noise_image(200, 150, 2), build_prompt(["man"]))]
    first, second = one.detect(pairs), one.detect(pairs)
    assert all(np.array_equal(a.boxes, b.boxes) and a.labels == b.labels for a, b in zip(first, second))


def test_detector_refuses_missing_local_files(gdino_files, tmp_path):
    with pytest.raises(FileNotFoundError, match="detector.weights"):
        GroundingDinoDetector(DetectorConfig(**{**gdino_files, "weights": tmp_path / "none.pth"}), "cpu")
    with pytest.raises(FileNotFoundError, match="detector.text_encoder"):
        GroundingDinoDetector(DetectorConfig(**{**gdino_files, "text_encoder": tmp_path / "bert"}), "cpu")


def test_sam_masks_for_batched_boxes_with_one_embedding(sam_weights, monkeypatch):
    segmenter = SamSegmenter.from_config(SegmenterConfig(model_type=TINY_SAM, weights=sam_weights, batch_size=2), "cpu")
    calls = []
    original = segmenter.predictor.set_image
    monkeypatch.setattr(segmenter.predictor, "set_image", lambda image: (calls.append(image.shape), original(image))[1])
    image = np.asarray(noise_image(160, 120))
    boxes = np.array([[10, 10, 60, 50], [50, 40, 150, 110], [0, 0, 20, 20]], dtype=float)
    masks = segmenter.segment(image, boxes)
    assert calls == [(120, 160, 3)]  # one image embedding for three boxes in two batches
    assert len(masks.rles) == 3 and all(r["size"] == [120, 160] for r in masks.rles)
    assert masks.areas.tolist() == [float(coco_decode(r).sum()) for r in masks.rles]
    assert masks.predicted_iou.shape == (3,) and masks.predicted_iou.dtype == np.float32
    assert masks.stability is not None and masks.stability.shape == (3,)
    known = masks.stability[~np.isnan(masks.stability)]  # NaN: empty mask at both thresholds
    assert ((known >= 0) & (known <= 1)).all()


def test_sam_refuses_unknown_model_or_missing_weights(sam_weights, tmp_path):
    with pytest.raises(FileNotFoundError, match="segmenter.weights"):
        SamSegmenter.from_config(SegmenterConfig(model_type=TINY_SAM, weights=tmp_path / "x.pth"), "cpu")
    with pytest.raises(ValueError, match="model_type"):
        SamSegmenter.from_config(SegmenterConfig(model_type="vit_tiny_unknown", weights=sam_weights), "cpu")
