"""Grounded questions written by a vision-language model (VistaQA 3.2, appendix A.7).

Per image with regions: one prompt per task type (``templates/prompts/grounded_vqa.md``) and one
for negative candidates (``grounded_negatives.md``), each with the image attached (OpenAI chat
``image_url`` data URL, downscaled to ``max_image_side``) and the regions listed under short
handles R1..Rn. Calls go through the verified-QA ``LLMClient`` (cache, retries, batch export).

The unit of accounting is the candidate QA pair; a reply without a parsable ``qa`` list counts as
one candidate rejected as ``llm_broken_json``; an image without a readable file as one rejected
as ``image_unavailable``. Checks, in order (each drop counted by reason):

1. ``malformed_candidate``: no question/answer text, region ids not a list, a negative without ``absent``;
2. ``unknown_region``: a handle not in the list; ``no_evidence``: a positive without regions;
   ``negative_with_evidence``: a negative with regions;
3. against the regions: ``count_mismatch`` (a counting answer that is not the number of evidence
   regions, or evidence of several classes), ``label_mismatch`` (an identification answer that does
   not name the evidence's class), ``geometry_mismatch`` / ``ambiguous_spatial`` (left/right/above/below
   answers over two regions, checked on the boxes as grounded.spatial_answer does), ``not_absent``
   (a negative's entity is among the image's labels);
4. ``taboo_word``; 5. ``judge_trivial`` / ``judge_incomplete`` / ``judge_unnatural`` / ``judge_no_verdict``;
6. ``near_duplicate`` per image (all-MiniLM-L6-v2 cosine, or exact text when no threshold).
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from pathlib import Path
from string import Template

import pyarrow as pa

from reasonvqa import schemas
from reasonvqa.absence_bases import VLM_BASIS
from reasonvqa.stage_contract import Resources, ShardContext, Stage
from reasonvqa.paths import TEMPLATES_DIR
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.questions.grounded import Candidate, spatial_answer, to_rows
from reasonvqa.tasks.questions.grounded_config import GroundedConfig, VLMConfig
from reasonvqa.tasks.questions.hallucination import is_absent
from reasonvqa.tasks.questions.regions import Region, regions_by_image

KIND = "grounded_vlm"
PROMPTS = ("grounded_vqa", "grounded_negatives")
NEGATIVE_TEMPLATE_ID = "hallucination:vlm_negative"  # the template_ids of its negative candidates
TASK_INSTRUCTIONS = {  # VistaQA appendix A.7, one line each
    "identification": "Questions should require recognizing and naming objects, entities, or scene elements present in "
                      "the image based on their functional role, spatial position, or contextual relationships.",
    "attribute": "Questions should rely on attributes such as color, size, shape, texture, or similar properties.",
    "ocr": "Questions should require reading visible text (signs, labels, logos, printed content); answers must be "
           "the exact text. Skip this task if the image has no legible text (reply with an empty list).",
    "spatial": "Questions should involve spatial relations such as left/right, above/below, in front of/behind, near/far.",
    "counting": "Questions should ask for the number of instances of a category; the answer is a number.",
    "comparison": "Questions should compare two or more objects or regions by size, color, shape, quantity or position.",
}
_NUMBER_WORDS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}


def prompt_versions() -> dict[str, str]:
    """sha256 (16 hex digits) of each grounded prompt file, for the manifest's inputs."""
    return {name: hashlib.sha256((TEMPLATES_DIR / "prompts" / f"{name}.md").read_bytes()).hexdigest()[:16]
            for name in PROMPTS}


def render(name: str, image_url: str, **fields: object) -> list[dict]:
    """One user message: the prompt text and the attached image."""
    text = Template((TEMPLATES_DIR / "prompts" / f"{name}.md").read_text(encoding="utf-8")).substitute(
        {k: str(v) for k, v in fields.items()})
    return [{"role": "user", "content": [{"type": "text", "text": text},
                                         {"type": "image_url", "image_url": {"url": image_url}}]}]


def image_data_url(path: Path, max_side: int) -> str:
    """The image as a JPEG data URL, longest side at most ``max_side`` (deterministic bytes)."""
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        scale = min(1.0, max_side / max(image.size))
        if scale < 1.0:
            image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def region_listing(regions: list[Region], limit: int) -> tuple[str, dict[str, Region]]:
    """The prompt's region list (largest first, at most ``limit``) and handle -> region."""
    chosen = sorted(regions, key=lambda r: (-r.area, r.region_id))[:limit]
    chosen.sort(key=lambda r: r.region_id)
    handles = {f"R{n}": r for n, r in enumerate(chosen, 1)}
    lines = [f"{h}: {r.label or 'unlabeled segment'}, box [{round(r.x)}, {round(r.y)}, {round(r.w)}, {round(r.h)}]"
             for h, r in handles.items()]
    return "\n".join(lines), handles


def parse_count(answer: str) -> int | None:
    """The number an answer states (digits or a word up to twelve), else None."""
    match = re.search(r"\b(\d+)\b", answer)
    if match:
        return int(match.group(1))
    words = [w for w in re.findall(r"[a-z]+", answer.lower()) if w in _NUMBER_WORDS]
    return _NUMBER_WORDS[words[0]] if words else None


def check_against_regions(c: Candidate, evidence: list[Region], labels: set[str], image: dict,
                          rules: GroundedConfig) -> str | None:
    """The reason a candidate contradicts its regions, or None (unchecked answers pass)."""
    if c.is_hallucination:
        return None if is_absent(c.detail["absent"], labels) else "not_absent"
    classes = {r.label for r in evidence if r.label}
    if c.task_type == "counting":
        n = parse_count(c.answer)
        return None if n == len(evidence) and len(classes) <= 1 else "count_mismatch"
    if c.task_type == "identification" and len(classes) == 1:
        (label,) = classes
        return None if label in c.answer.lower() else "label_mismatch"
    if c.task_type == "spatial" and len(evidence) == 2:
        said = re.findall(r"\b(left|right|above|below)\b", c.answer.lower())
        if len(set(said)) == 1:
            axis = "horizontal" if said[0] in ("left", "right") else "vertical"
            truth = spatial_answer(evidence[0], evidence[1], axis, image.get("width") or 0, image.get("height") or 0, rules)
            if truth is None:
                return "ambiguous_spatial"
            return None if truth == said[0] else "geometry_mismatch"
    return None


class GroundedVLMStage(Stage):
    """One shard of images with regions -> VLM-written grounded questions (config: VLMConfig)."""

    name = "grounded_vlm"
    resources = Resources(device="cpu", memory_mb=2048)
    inputs = {"images": schemas.IMAGES, "regions": schemas.REGIONS}
    outputs = {"questions": schemas.QUESTIONS}

    def setup(self) -> None:
        from reasonvqa.llm import LLMClient, LLMConfig
        from reasonvqa.text_filters import DEFAULT_TABOO_FILE, Embedder, load_taboo_words

        config: VLMConfig = self.config  # type: ignore[assignment]
        self.llm_config = LLMConfig.model_validate(config.llm)
        self.generator = LLMClient(self.llm_config)
        self.judge = LLMClient(LLMConfig.model_validate(config.judge_llm)) if config.judge_llm else self.generator
        self.taboo = load_taboo_words(config.taboo_file or DEFAULT_TABOO_FILE)
        device = self.device
        assert device is not None, "a stage that declares resources has its device resolved in __init__"
        self.embedder = Embedder(device=device) if config.near_duplicate_threshold is not None else None
        self.rules = GroundedConfig()

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        from reasonvqa.llm import parse_json_output

        config: VLMConfig = self.config  # type: ignore[assignment]
        rejects = Rejects(self.name, ctx.shard)
        by_image = regions_by_image(inputs["regions"])
        images = sorted((r for r in inputs["images"].to_pylist() if by_image.get(r["image_id"])), key=lambda r: r["image_id"])
        cache = ctx.cache
        assert cache is not None, "a stage that declares resources gets a call cache (run_stage_shard)"
        rows_in = 0
        conversations: list[list[dict]] = []
        keys: list[tuple[dict, str | None]] = []  # (image row, task type; None for the negatives prompt)
        handles_of: dict[str, dict[str, Region]] = {}
        for image in images:
            path = self._image_path(image)
            if path is None:
                rows_in += 1
                rejects.add("image_unavailable", f"images#{image['image_id']}", {"file_path": image.get("file_path")})
                continue
            url = image_data_url(path, config.max_image_side)
            listing, handles = region_listing(by_image[image["image_id"]], config.max_regions_listed)
            handles_of[image["image_id"]] = handles
            for task in config.task_types:
                conversations.append(render("grounded_vqa", url, task_type=task, n_questions=config.questions_per_task,
                                            task_instructions=TASK_INSTRUCTIONS[task], regions=listing))
                keys.append((image, task))
            if config.negatives_per_image:
                conversations.append(render("grounded_negatives", url, n_questions=config.negatives_per_image,
                                            task_types=", ".join(config.task_types), regions=listing))
                keys.append((image, None))
        replies = self.generator.complete_many(conversations, cache)

        candidates: list[Candidate] = []
        for (image, task), reply in zip(keys, replies):
            image_id = image["image_id"]
            value = parse_json_output(reply)
            items = value.get("qa") if isinstance(value, dict) else value
            where = f"llm:{image_id}#{task or 'negatives'}"
            if not isinstance(items, list):
                rows_in += 1
                rejects.add("llm_broken_json", where, (reply or "")[:2000])
                continue
            for n, item in enumerate(items):
                rows_in += 1
                c, reason = self._candidate(item, image, task, handles_of[image_id])
                if reason:
                    rejects.add(reason, f"{where}[{n}]", item)
                else:
                    assert c is not None  # _candidate gives a candidate whenever it gives no reason
                    c.detail["where"] = f"{where}[{n}]"
                    candidates.append(c)

        labels = {i: {r.label for r in rs if r.label} for i, rs in by_image.items()}
        image_rows = {r["image_id"]: r for r in images}
        kept = []
        for c in candidates:
            evidence = [r for rs in [by_image[c.image_id]] for r in rs if r.region_id in c.evidence]
            evidence.sort(key=lambda r: c.evidence.index(r.region_id))
            reason = check_against_regions(c, evidence, labels[c.image_id], image_rows[c.image_id], self.rules)
            if reason is None:
                reason = "taboo_word" if _taboo(f"{c.question} {c.answer}", self.taboo) else None
            if reason:
                rejects.add(reason, c.detail["where"], _record(c))
            else:
                kept.append(c)
        if config.text_judge:
            kept = self._judge(kept, ctx, rejects)
        kept = self._deduplicate(kept, rejects)
        questions = to_rows(kept, {i: r["source"] for i, r in image_rows.items()}, {}, kind=KIND,
                            generator_model=self.llm_config.model)
        rejected = rejects.reason_counts()
        return StageResult(outputs={"questions": questions}, rejects=rejects, rows_in=rows_in,
                           requests=len(conversations), extra={"rejected_by_reason": dict(sorted(rejected.items())),
                                                                "prompt_versions": prompt_versions()})

    def _image_path(self, image: dict) -> Path | None:
        root = self.config.image_roots.get(image["source"])  # type: ignore[union-attr]  # ModelStage.config is typed BaseModel | None (reasonvqa/model_stage.py)
        if root is None or not image.get("file_path"):
            return None
        path = Path(root) / image["file_path"]
        return path if path.is_file() else None

    def _candidate(self, item, image: dict, task: str | None, handles: dict[str, Region]) -> tuple[Candidate | None, str | None]:
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item[k].strip() for k in ("question", "answer")):
            return None, "malformed_candidate"
        ids = item.get("region_ids", [])
        if not isinstance(ids, list) or not all(isinstance(h, str) for h in ids):
            return None, "malformed_candidate"
        negative = task is None
        task_type = task or item.get("task_type")
        if task_type not in TASK_INSTRUCTIONS or (negative and not (isinstance(item.get("absent"), str) and item["absent"].strip())):
            return None, "malformed_candidate"
        if any(h not in handles for h in ids):
            return None, "unknown_region"
        if negative and ids:
            return None, "negative_with_evidence"
        if not negative and not ids:
            return None, "no_evidence"
        evidence = list(dict.fromkeys(handles[h].region_id for h in ids))
        c = Candidate(image["image_id"], task_type, item["question"].strip(), item["answer"].strip(), evidence,
                      is_hallucination=negative, detail={
                          "absent": item["absent"].strip().lower(), "absence_basis": VLM_BASIS,
                          "absence_evidence": {"model": self.llm_config.model, "checked": "not among the image's labels"},
                      } if negative else {},
                      template_id=NEGATIVE_TEMPLATE_ID if negative else None)
        return c, None

    def _judge(self, kept: list[Candidate], ctx: ShardContext, rejects: Rejects) -> list[Candidate]:
        from reasonvqa.llm import judge_verdicts, parse_json_output, text_judge_reason
        from reasonvqa.templates.prompt_loader import render as render_text

        groups: dict[str, list[Candidate]] = {}
        for c in kept:
            groups.setdefault(c.image_id, []).append(c)
        conversations = [render_text("judge_text", pairs="\n".join(f"{n}. Question: {c.question}\n   Answer: {c.answer}"
                                                                    for n, c in enumerate(group, 1)))
                         for group in groups.values()]
        cache = ctx.cache
        assert cache is not None, "a stage that declares resources gets a call cache (run_stage_shard)"
        replies = self.judge.complete_many(conversations, cache)
        survivors = []
        for group, reply in zip(groups.values(), replies):
            verdicts = judge_verdicts(parse_json_output(reply), len(group))
            for n, c in enumerate(group, 1):
                reason = text_judge_reason(verdicts.get(n))
                if reason is None:
                    survivors.append(c)
                else:
                    rejects.add(reason, c.detail["where"], _record(c))
        return survivors

    def _deduplicate(self, kept: list[Candidate], rejects: Rejects) -> list[Candidate]:
        from reasonvqa.text_filters import near_duplicates

        kept = sorted(kept, key=lambda c: (c.image_id, c.question, c.answer))
        final = []
        start = 0
        while start < len(kept):
            end = start
            while end < len(kept) and kept[end].image_id == kept[start].image_id:
                end += 1
            group = kept[start:end]
            if self.embedder is not None:
                vectors = self.embedder.encode([f"{c.question} {c.answer}" for c in group])
                verdict = near_duplicates(vectors, self.config.near_duplicate_threshold)  # type: ignore[union-attr]  # ModelStage.config is typed BaseModel | None
            else:
                first: dict[tuple[str, str], int] = {}
                verdict = [first.setdefault((c.question.lower(), c.answer.lower()), i) for i, c in enumerate(group)]
                verdict = [None if v == i else v for i, v in enumerate(verdict)]
            for c, dup in zip(group, verdict):
                if dup is None:
                    final.append(c)
                else:
                    rejects.add("near_duplicate", c.detail["where"], _record(c))
            start = end
        return final


def _taboo(text: str, words: frozenset[str]) -> bool:
    from reasonvqa.text_filters import taboo_hits

    return bool(taboo_hits(text, words))


def _record(c: Candidate) -> dict:
    return {"task_type": c.task_type, "question": c.question, "answer": c.answer, "evidence": c.evidence,
            "is_hallucination": c.is_hallucination}

