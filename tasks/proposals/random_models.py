"""Small randomly initialized models built from the libraries' own classes, saved where the
product's loaders read them (no weights can be downloaded here). The proposals tests and
``benchmarks/bench_proposals.py`` both build theirs here (tests and benchmarks do not import each other).

- text encoder: a ``BertTokenizerFast`` over a literal uncased word-piece vocabulary and a
  one-layer ``BertModel``, saved with ``save_pretrained`` (what GroundingDINO's
  ``text_encoder_type`` folder holds);
- GroundingDINO: a model config file in groundingdino's own format (Swin-T backbone, one
  encoder and one decoder layer, 30 queries) and a checkpoint ``{"model": state_dict}`` of
  the model that groundingdino's ``build_model`` builds from it;
- SAM: segment-anything's ``_build_sam`` with a 1-block, 32-wide image encoder, registered
  in ``sam_model_registry`` under ``TINY_SAM`` and saved as a checkpoint; ``SMALL_INPUT_SAM`` is the same
  with 256-pixel inputs (SAM's own classes and decoder sizes; a 16x16 instead of 64x64 image embedding, so
  the mask decoder attends over 16 times fewer positions per box), for the tests.
"""

from __future__ import annotations

import functools
import string
from pathlib import Path

from reasonvqa.tasks.proposals.config import (
    DetectorConfig, ProposalsConfig, SegmenterConfig, SuppressionConfig, TaggingConfig,
)

WORDS = ["person", "man", "car", "dog", "cat", "tree", "bus", "sky", "red", "mini", "traffic", "light", "window",
         "building", "sign", "shirt", "table", "chair", "street", "clock", "tower", "wheel", "horse"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "?", ",", "-"] + WORDS + list(string.ascii_lowercase)
         + ["##" + c for c in string.ascii_lowercase] + ["##van"])
TINY_SAM = "tiny_random"
SMALL_INPUT_SAM = "tiny_random_256"

GDINO_CONFIG = '''
batch_size = 1
modelname = "groundingdino"
backbone = "swin_T_224_1k"
position_embedding = "sine"
pe_temperatureH = 20
pe_temperatureW = 20
return_interm_indices = [1, 2, 3]
backbone_freeze_keywords = None
enc_layers = 1
dec_layers = 1
pre_norm = False
dim_feedforward = 64
hidden_dim = 256
dropout = 0.0
nheads = 8
num_queries = 30
query_dim = 4
num_patterns = 0
num_feature_levels = 4
enc_n_points = 2
dec_n_points = 2
two_stage_type = "standard"
two_stage_bbox_embed_share = False
two_stage_class_embed_share = False
transformer_activation = "relu"
dec_pred_bbox_embed_share = True
dn_box_noise_scale = 1.0
dn_label_noise_ratio = 0.5
dn_label_coef = 1.0
dn_bbox_coef = 1.0
embed_init_tgt = True
dn_labelbook_size = 2000
max_text_len = 256
text_encoder_type = "bert-base-uncased"
use_text_enhancer = True
use_fusion_layer = True
use_checkpoint = False
use_transformer_ckpt = False
use_text_cross_attention = True
text_dropout = 0.0
fusion_dropout = 0.0
fusion_droppath = 0.1
sub_sentence_present = True
'''


# The released GroundingDINO-T sizes (groundingdino/config/GroundingDINO_SwinT_OGC.py), for GPU timings
# of real-size models with random weights (the removed benchmarks/bench_proposals_stage.py --full-size, in git history).
FULL_SIZE_GDINO = {"enc_layers": 6, "dec_layers": 6, "dim_feedforward": 2048, "num_queries": 900,
                   "enc_n_points": 4, "dec_n_points": 4}


def gdino_config_text(full_size: bool = False, num_queries: int | None = None) -> str:
    """GDINO_CONFIG, or with the released model's layer counts and query count when ``full_size``;
    ``num_queries`` (boxes per (image, prompt) pair) overrides either."""
    sizes = {**(FULL_SIZE_GDINO if full_size else {}), **({"num_queries": num_queries} if num_queries else {})}
    if not sizes:
        return GDINO_CONFIG
    lines = [f"{key} = {sizes[key]}" if key in sizes else line
             for line in GDINO_CONFIG.splitlines() for key in [line.split(" = ")[0]]]
    return "\n".join(lines) + "\n"


def write_text_encoder(folder: Path, full_size: bool = False) -> Path:
    """A BERT tokenizer + random BertModel (one small layer, or BERT-base sizes) saved in ``folder``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(0)
    small = {} if full_size else {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                                  "intermediate_size": 64}
    config = BertConfig(vocab_size=len(VOCAB), max_position_embeddings=512, **small)
    BertModel(config).save_pretrained(folder)
    return folder


def write_grounding_dino(folder: Path, full_size: bool = False, num_queries: int | None = None) -> dict[str, Path]:
    """Config file, random checkpoint and text encoder of a small (or released-size) GroundingDINO."""
    import torch
    from groundingdino.models import build_model
    from groundingdino.util.slconfig import SLConfig

    folder.mkdir(parents=True, exist_ok=True)
    encoder = write_text_encoder(folder / "text_encoder", full_size)
    config_file = folder / "tiny_groundingdino.py"
    config_file.write_text(gdino_config_text(full_size, num_queries), encoding="utf-8")
    args = SLConfig.fromfile(str(config_file))
    args.device = "cpu"
    args.text_encoder_type = str(encoder)
    torch.manual_seed(0)
    model = build_model(args)
    weights = folder / "tiny_groundingdino.pth"
    torch.save({"model": model.state_dict()}, weights)
    return {"config_file": config_file, "weights": weights, "text_encoder": encoder}


def register_tiny_sam() -> None:
    """Add ``TINY_SAM`` (its own ``_build_sam``, smaller encoder) and ``SMALL_INPUT_SAM`` to segment-anything's
    model registry."""
    import importlib

    build_sam = importlib.import_module("segment_anything.build_sam")  # the package exports a function of that name
    build_sam.sam_model_registry[TINY_SAM] = functools.partial(
        build_sam._build_sam, encoder_embed_dim=32, encoder_depth=1, encoder_num_heads=2, encoder_global_attn_indexes=[0])
    build_sam.sam_model_registry[SMALL_INPUT_SAM] = functools.partial(_build_small_input_sam, image_size=256)


def _build_small_input_sam(image_size: int, checkpoint: str | None = None):
    """``_build_sam`` of segment-anything 1.0 with TINY_SAM's encoder and ``image_size`` inputs: the same classes
    and prompt encoder and mask decoder sizes, the image embedding ``image_size / 16`` on a side."""
    from functools import partial

    import torch
    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    embedding = image_size // 16
    sam = Sam(
        image_encoder=ImageEncoderViT(depth=1, embed_dim=32, img_size=image_size, mlp_ratio=4,
                                      norm_layer=partial(torch.nn.LayerNorm, eps=1e-6), num_heads=2, patch_size=16,
                                      qkv_bias=True, use_rel_pos=True, global_attn_indexes=[0], window_size=14,
                                      out_chans=256),
        prompt_encoder=PromptEncoder(embed_dim=256, image_embedding_size=(embedding, embedding),
                                     input_image_size=(image_size, image_size), mask_in_chans=16),
        mask_decoder=MaskDecoder(num_multimask_outputs=3,
                                 transformer=TwoWayTransformer(depth=2, embedding_dim=256, mlp_dim=2048, num_heads=8),
                                 transformer_dim=256, iou_head_depth=3, iou_head_hidden_dim=256),
        pixel_mean=[123.675, 116.28, 103.53], pixel_std=[58.395, 57.12, 57.375],
    )
    sam.eval()
    if checkpoint is not None:
        with open(checkpoint, "rb") as handle:
            sam.load_state_dict(torch.load(handle))
    return sam


def write_sam(folder: Path, model_type: str = TINY_SAM) -> Path:
    """A random checkpoint of ``model_type`` (TINY_SAM, or a released size such as vit_h) under ``folder``."""
    import torch
    from segment_anything import sam_model_registry

    register_tiny_sam()
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = sam_model_registry[model_type]()
    path = folder / "tiny_sam.pth"
    torch.save(model.state_dict(), path)
    return path


def tiny_proposals_config(folder: Path, image_roots: dict | None = None, full_size: bool = False,
                          num_queries: int | None = None, sam: str = TINY_SAM, **suppression: float) -> ProposalsConfig:
    """A proposals config of random-weight models written under ``folder``: tiny (``sam``: TINY_SAM or
    SMALL_INPUT_SAM), or at the released sizes (GroundingDINO-T, BERT-base, SAM ViT-H) when ``full_size``;
    ``num_queries`` boxes per pass."""
    gdino = write_grounding_dino(folder / "gdino", full_size, num_queries)
    model_type = "vit_h" if full_size else sam
    sam = write_sam(folder / "sam", model_type)
    return ProposalsConfig(
        enabled=True, image_roots=image_roots or {}, images_per_call=2,
        tagging=TaggingConfig(backend="labels"),
        detector=DetectorConfig(config_file=gdino["config_file"], weights=gdino["weights"], text_encoder=gdino["text_encoder"],
                                box_threshold=0.0, text_threshold=0.0, image_size=96, max_size=160, batch_size=2),
        suppression=SuppressionConfig.model_validate({"min_class_instances": 2, **suppression}),
        segmenter=SegmenterConfig(model_type=model_type, weights=sam, batch_size=8),
    )
