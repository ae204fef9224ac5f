"""Verified free-form QA (PROVE, section 3.1): LLM question-answer pairs with verification
programs, run in the sandbox and filtered.

The unit of accounting is the candidate QA pair: every pair an LLM reply holds ends in exactly
one question row or one reject; a reply that holds no parsable pair counts as one candidate,
rejected as ``llm_broken_json``. The cascade, in order (each drop has its reason):

1. ``malformed_candidate`` - a pair without string question, answer and program; ``duplicate_pair`` -
   the same (question, answer) again in one reply (the first is kept; counted apart from PROVE's three);
2. ``program_rejected`` (allow-list), ``program_failed`` (error or timeout), ``program_no_output``;
3. ``semantic_mismatch`` - cosine(program output, answer) below ``similarity_threshold``;
4. ``tautology`` - the program returns the same output on the graph without the queried entity
   (the longest entity name in the question, else in the program); ``ungrounded`` - neither names one;
5. ``taboo_word``;
6. ``judge_trivial`` / ``judge_incomplete`` / ``judge_unnatural`` / ``judge_no_verdict`` (LLM text judge);
7. ``not_entailed`` / ``entailment_no_verdict`` (LLM judge over the caption or the graph description);
8. ``near_duplicate`` - SemDeDup within one image, keeping the first by question_id.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from reasonvqa import schemas
from reasonvqa.llm import LLMClient, LLMConfig, judge_verdicts, parse_json_output, text_judge_reason
from reasonvqa.stage_contract import Resources, ShardContext, Stage
from reasonvqa.stage import Rejects, StageResult
from reasonvqa.tasks.verify.sandbox import Job, Sandbox, SandboxConfig
from reasonvqa.tasks.verify.scene_graph import SceneGraph
from reasonvqa.templates.prompt_loader import prompt_versions, render
from reasonvqa.text_filters import Embedder, FilterConfig, load_taboo_words, near_duplicates, output_text, taboo_hits

GRAPHS = pa.schema([("image_id", pa.string()), ("image_source", pa.string()), ("graph", pa.string())])
PROGRAM_FAILED = ("program_rejected", "program_failed", "program_no_output")
WRONG_ANSWER = ("semantic_mismatch",)
TEXT_FILTERS = ("tautology", "ungrounded", "taboo_word", "judge_trivial", "judge_incomplete", "judge_unnatural", "judge_no_verdict",
                "not_entailed", "entailment_no_verdict", "near_duplicate")
KIND = "verified"


class VerifiedQAConfig(BaseModel):
    """Generation, judging, sandbox and filter settings of verified QA."""

    model_config = ConfigDict(extra="forbid")

    llm: LLMConfig = Field(default_factory=LLMConfig)
    judge_llm: LLMConfig | None = Field(default=None, description="The judges' endpoint (default: llm).")
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    filters: FilterConfig = Field(default_factory=FilterConfig)
    questions_per_image: str = "10-15"


def question_id(image_id: str, question: str, answer: str, model: str) -> str:
    """blake2b of image, question, answer and generator model, 20 hex characters."""
    text = json.dumps([image_id, question, answer, model], separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def mentioned_entities(graph: SceneGraph, *texts: str) -> list[str]:
    """Entities named (whole words, any case) in any of ``texts``, longest name first."""
    joined = "\n".join(texts).lower()
    found = [e for e in graph.get_entities() if re.search(rf"(?<![a-z0-9]){re.escape(e.lower())}(?![a-z0-9])", joined)]
    return sorted(found, key=lambda e: (-len(e), e))


def proves_breakdown(rows_in: int, rejected: dict[str, int]) -> dict[str, Any]:
    """PROVE's numbers: program failed and wrong answer as shares of all candidates, the text
    filters as a share of what passed the programmatic filter (paper: 18.3%, 9.8%, about 50%)."""
    failed = sum(rejected.get(r, 0) for r in PROGRAM_FAILED) + rejected.get("llm_broken_json", 0) \
        + rejected.get("malformed_candidate", 0)
    wrong = sum(rejected.get(r, 0) for r in WRONG_ANSWER)
    text = sum(rejected.get(r, 0) for r in TEXT_FILTERS)
    duplicates = rejected.get("duplicate_pair", 0)  # never reached a filter: neither failed nor passed
    passed = rows_in - duplicates - failed - wrong

    def share(n: int, of: int) -> float | None:
        return round(n / of, 4) if of else None

    return {"candidates": rows_in, "duplicate_pairs": duplicates, "program_failed": failed, "wrong_answer": wrong, "passed_programmatic": passed,
            "text_filtered": text, "kept": passed - text, "program_failed_rate": share(failed, rows_in),
            "wrong_answer_rate": share(wrong, rows_in), "text_filtered_rate": share(text, passed),
            "text_filters": {r: rejected.get(r, 0) for r in TEXT_FILTERS}}


class VerifiedQAStage(Stage):
    """One shard of images (their scene graphs) -> verified free-form questions."""

    name = "verified_qa"
    resources = Resources(device="cpu", memory_mb=2048)

    def setup(self) -> None:
        config: VerifiedQAConfig = self.config  # type: ignore[assignment]
        self.generator = LLMClient(config.llm)
        self.judge = LLMClient(config.judge_llm or config.llm)
        assert self.device is not None  # a stage with resources has its device resolved in __init__
        self.embedder = Embedder(config.filters.embedding_model, config.filters.embedding_batch_size, device=self.device)
        self.sandbox = Sandbox(config.sandbox).__enter__()
        self.taboo = load_taboo_words(config.filters.taboo_file)
        self.versions = prompt_versions()

    def teardown(self) -> None:
        self.sandbox.close()

    def process(self, inputs: dict[str, pa.Table], ctx: ShardContext) -> StageResult:
        config: VerifiedQAConfig = self.config  # type: ignore[assignment]
        fc = config.filters
        rejects = Rejects(self.name, ctx.shard)
        assert ctx.cache is not None, "a model stage's shards get its call cache"
        images = sorted(inputs["graphs"].to_pylist(), key=lambda r: r["image_id"])
        graphs = {r["image_id"]: SceneGraph.from_json(json.loads(r["graph"])) for r in images}
        sources = {r["image_id"]: r["image_source"] for r in images}

        # 1. generation
        prompts = [render("generate_qa", caption=graphs[i].caption or graphs[i].describe(),
                          tuples=json.dumps(graphs[i].to_tuples(), sort_keys=True), n_questions=config.questions_per_image)
                   for i in graphs]
        replies = self.generator.complete_many(prompts, ctx.cache)
        candidates: list[dict] = []
        rows_in = 0
        for image_id, reply in zip(graphs, replies):
            value = parse_json_output(reply)
            items = value.get("qa") if isinstance(value, dict) else value
            if not isinstance(items, list) or not items:
                rows_in += 1
                rejects.add("llm_broken_json", f"llm:{image_id}#generation", reply[:2000])
                continue
            for n, item in enumerate(items):
                rows_in += 1
                where = f"llm:{image_id}#qa[{n}]"
                if not (isinstance(item, dict) and all(isinstance(item.get(k), str) and item[k].strip()
                                                       for k in ("question", "answer", "program"))):
                    rejects.add("malformed_candidate", where, item)
                    continue
                question, answer = item["question"].strip(), item["answer"].strip()
                candidates.append({"image_id": image_id, "where": where, "question": question, "answer": answer,
                                   "program": item["program"],
                                   "question_id": question_id(image_id, question, answer, config.llm.model)})
        # the same pair twice from one reply has one id: keep the first
        seen: set[str] = set()
        unique = []
        for c in candidates:
            if c["question_id"] in seen:
                rejects.add("duplicate_pair", c["where"], {k: c[k] for k in ("question", "answer")})
            else:
                seen.add(c["question_id"])
                unique.append(c)
        candidates = unique

        # 2. programs in the sandbox
        graph_json = {i: g.to_json() for i, g in graphs.items()}
        results = self.sandbox.run([Job(c["question_id"], c["program"], c["image_id"]) for c in candidates], graph_json)
        survivors = []
        for c in candidates:
            result = results[c["question_id"]]
            c["result"] = result
            if result["status"] != "ok":
                reason = "program_rejected" if result["status"] == "rejected" else "program_failed"
                rejects.add(reason, c["where"], {"program": c["program"], **result})
            elif not output_text(result["output"]).strip():
                rejects.add("program_no_output", c["where"], {"program": c["program"], **result})
            else:
                c["output_text"] = output_text(result["output"])
                survivors.append(c)

        # 3. semantic match of output and answer
        sims = self.embedder.pair_similarity([c["output_text"] for c in survivors], [c["answer"] for c in survivors])
        kept = []
        for c, sim in zip(survivors, sims):
            c["similarity"] = round(float(sim), 4)
            if sim < fc.similarity_threshold:
                rejects.add("semantic_mismatch", c["where"], {"answer": c["answer"], "output": c["output_text"],
                                                              "similarity": c["similarity"]})
            else:
                kept.append(c)

        # 4. tautology: same output without the queried entity
        if fc.tautology:
            perturbed: dict[str, dict] = {}
            jobs = []
            for c in kept:
                graph = graphs[c["image_id"]]
                named = mentioned_entities(graph, c["question"]) or mentioned_entities(graph, c["program"])
                if not named:
                    c["queried_entity"] = None
                    continue
                key = f"{c['image_id']}|-{named[0]}"
                perturbed.setdefault(key, graph.without(named[0]).to_json())
                jobs.append(Job(c["question_id"], c["program"], key))
                c["queried_entity"] = named[0]
            again = self.sandbox.run(jobs, perturbed)
            kept, previous = [], kept
            for c in previous:
                other = again.get(c["question_id"])
                if c["queried_entity"] is None:
                    rejects.add("ungrounded", c["where"], {"question": c["question"], "program": c["program"]})
                elif other and other["status"] == "ok" and output_text(other["output"]) == c["output_text"]:
                    rejects.add("tautology", c["where"], {"program": c["program"], "entity": c["queried_entity"],
                                                          "output": c["output_text"]})
                else:
                    kept.append(c)

        # 5. taboo words
        previous, kept = kept, []
        for c in previous:
            hits = taboo_hits(f"{c['question']} {c['answer']}", self.taboo)
            if hits:
                rejects.add("taboo_word", c["where"], {"question": c["question"], "answer": c["answer"], "words": hits})
            else:
                kept.append(c)

        # 6-7. LLM judges, one call per image each
        if fc.text_judge:
            kept = self._judge(kept, graphs, ctx, rejects, "judge_text", {})
        if fc.entailment:
            kept = self._judge(kept, graphs, ctx, rejects, "judge_entailment", {"context": fc.entailment_context})

        # 8. near-duplicates per image
        kept.sort(key=lambda c: (c["image_id"], c["question_id"]))
        vectors = self.embedder.encode([f"{c['question']} {c['answer']}" for c in kept])
        final = []
        start = 0
        while start < len(kept):
            end = start
            while end < len(kept) and kept[end]["image_id"] == kept[start]["image_id"]:
                end += 1
            for offset, dup in enumerate(near_duplicates(vectors[start:end], fc.duplicate_threshold)):
                c = kept[start + offset]
                if dup is None:
                    final.append(c)
                else:
                    rejects.add("near_duplicate", c["where"], {"question": c["question"],
                                                               "duplicate_of": kept[start + dup]["question_id"]})
            start = end

        rows = [self._row(c, graphs[c["image_id"]], sources[c["image_id"]]) for c in final]
        rows.sort(key=lambda r: r["question_id"])
        rejected = rejects.reason_counts()
        return StageResult(
            outputs={"questions": schemas.from_rows(rows, schemas.QUESTIONS)}, rejects=rejects, rows_in=rows_in,
            requests=len(prompts) * (1 + fc.text_judge + fc.entailment),
            extra={"prove_breakdown": proves_breakdown(rows_in, dict(rejected)), "prompt_versions": self.versions,
                   "sandbox": self.sandbox.protections(), "generator_model": config.llm.model})

    def _judge(self, kept: list[dict], graphs: dict[str, SceneGraph], ctx: ShardContext, rejects: Rejects,
               prompt: str, options: dict) -> list[dict]:
        by_image: dict[str, list[dict]] = {}
        for c in kept:
            by_image.setdefault(c["image_id"], []).append(c)
        conversations = []
        for image_id, group in by_image.items():
            pairs = "\n".join(f"{n}. Question: {c['question']}\n   Answer: {c['answer']}" for n, c in enumerate(group, 1))
            if prompt == "judge_text":
                conversations.append(render(prompt, pairs=pairs))
            else:
                graph = graphs[image_id]
                description = graph.caption if options["context"] == "caption" and graph.caption else graph.describe()
                conversations.append(render(prompt, pairs=pairs, description=description))
        assert ctx.cache is not None, "a model stage's shards get its call cache"
        replies = self.judge.complete_many(conversations, ctx.cache)
        survivors = []
        for group, reply in zip(by_image.values(), replies):
            verdicts = judge_verdicts(parse_json_output(reply), len(group))
            for n, c in enumerate(group, 1):
                verdict = verdicts.get(n)
                if prompt == "judge_text":
                    reason = text_judge_reason(verdict)
                else:
                    reason = None if verdict is True else ("not_entailed" if verdict is False else "entailment_no_verdict")
                if reason:
                    rejects.add(reason, c["where"], {"question": c["question"], "answer": c["answer"], "judge": reply[:500]})
                else:
                    survivors.append(c)
        return survivors

    def _row(self, c: dict, graph: SceneGraph, source: str) -> dict:
        config: VerifiedQAConfig = self.config  # type: ignore[assignment]
        evidence = sorted({oid for e in mentioned_entities(graph, c["question"], c["answer"], c["program"])
                           for oid in graph.object_ids.get(e, [])})
        return {"question_id": c["question_id"], "image_id": c["image_id"], "image_source": source,
                "object_ids": evidence, "question": c["question"], "answer": c["answer"],
                "answer_category": "free_form", "has_scene_graph": True,
                "template_version": self.versions["generate_qa"], "kind": KIND, "generator_model": config.llm.model,
                "program": c["program"], "program_output": json.dumps(c["result"]["output"], sort_keys=True),
                "similarity": c["similarity"], "evidence_object_ids": evidence, "task_type": "free_form",
                "is_hallucination": False}
