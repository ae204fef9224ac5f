"""The dataset card (README.md) of a release, with a YAML header that `datasets` understands."""

from __future__ import annotations

from typing import Sequence

import yaml

from reasonvqa import schemas
from reasonvqa.tasks.release.breakdown import breakdown_section, regions_section
from reasonvqa.tasks.release.card_knowledge import knowledge_section

_COLUMNS = {
    "question_id": "stable hash of image, objects, route and template version",
    "image_id": "`<source>:<native id>`, e.g. `vg:1`, `gldv2:7e4627eb6f721857`",
    "image_source": "source dataset (`vg`, `gldv2`, ...)",
    "object_ids": "objects the question is about",
    "question": "the question text",
    "answer": "the correct answer (never empty)",
    "answer_qid": "Wikidata item of the answer, when it is an item",
    "answer_category": "`fixed`, `date`, `number` or `literal`",
    "choices": "the answer and 3 distractors, shuffled with a seed",
    "n_hop": "number of knowledge hops (1-3)",
    "route": "Wikidata property path from the object to the answer",
    "property_id": "the property asked about (last of the route)",
    "domains": "knowledge domains of the properties on the route (only the selected ones in a domain-restricted build or re-split)",
    "has_scene_graph": "the question names its object through a scene-graph relation",
    "template_ids": "templates used to render the question; for a grounded hallucination question its form "
                    "`hallucination:<form>` (absent_object, wrong_attribute, impossible_relation, vlm_negative); for a real "
                    "identification-by-position question `grounded:identify_position`",
    "template_version": "content hash of the template bank",
    "knowledge_snapshot": "content hash of the knowledge base the facts came from",
    "kind": "`template`, `verified` (PROVE), `grounded` (region rules) or `grounded_vlm` (written by a VLM)",
    "generator_model": "the LLM that wrote a verified question",
    "program": "its verification program (runs on the scene graph)",
    "program_output": "the program's output on the scene graph, as JSON",
    "similarity": "cosine of program output and answer (all-MiniLM-L6-v2)",
    "evidence_object_ids": "objects the question, answer or program name",
    "task_type": "VistaQA task type (identification, attribute, ocr, spatial, counting, comparison); `knowledge` "
                 "for templated, `free_form` for verified questions",
    "evidence_region_ids": "regions (`regions/` table) whose masks or boxes prove the answer, in the order the question names them; empty for hallucination questions",
    "is_hallucination": "the asked object, attribute or relation is absent: the answer states the absence and the evidence is empty",
    "absence_basis": "what backs a hallucination question's absence claim, strongest first: `taxonomy` (the source "
                     "annotates the class exhaustively), `review` (a human confirmed it), `annotated_attribute`, "
                     "`refuting_boxes`, `annotated_relation`, `detector`, `vlm`, `cooccurrence` (improbable for the "
                     "scene by corpus co-occurrence); null on other questions",
    "absence_evidence": "the basis's particulars as JSON: the taxonomy, the estimate and its threshold, the decision id, "
                        "the contrary annotation",
}


def render_card(
    *,
    name: str,
    version: str,
    splits: list[str],
    counts: dict[str, int],
    config_hash: str,
    inputs: dict[str, str],
    stats_files: dict[str, str],
    notes: str = "",
    bias: dict | None = None,
    breakdown: dict | None = None,
    tables: Sequence[str] = (),
    images: dict | None = None,
) -> str:
    """Markdown dataset card; its YAML header lets `datasets.load_dataset` (and the Hub viewer) find the
    splits and each record table (``tables``, e.g. images, regions) as a config of its own. ``images`` is the
    manifest's images summary (``tasks/release/embed.py``: what is embedded, and why the rest is not)."""
    header = {
        "pretty_name": name,
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": s, "path": f"{s}/*.parquet"} for s in splits],
                "default": True,
            },
            *table_configs(tables),
        ],
        "tags": ["visual-question-answering", "knowledge-based-vqa", "multi-hop"],
        **hub_metadata(sum(counts.get(s, 0) for s in splits)),
    }
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=True).strip(),
        "---",
        "",
        f"# {name} {version}",
        "",
        "Knowledge-based, multi-hop visual questions built by "
        "[reasonvqa-pipeline](https://github.com/reasonvqa/reasonvqa-pipeline) "
        "(ReasonVQA-style templates over Wikidata facts linked to image objects).",
        "",
        "## Splits",
        "",
        "| split | questions |",
        "| --- | ---: |",
        *[f"| {s} | {counts.get(s, 0)} |" for s in [*splits, "pool"]],
        "",
        "`pool/` holds the pre-balancing question pool, kept so `reasonvqa resplit` can "
        "re-balance and re-split without a rebuild. Splits are image-disjoint.",
        "",
        "```python",
        "from datasets import load_dataset",
        'ds = load_dataset("parquet", data_dir="<this folder>")',
        "```",
        "",
        "## Columns",
        "",
        "| column | meaning |",
        "| --- | --- |",
        *[f"| `{c}` | {_COLUMNS.get(c, '')} |" for c in schemas.QUESTIONS.names],
        "",
        "## Provenance",
        "",
        f"- schema version: `{schemas.SCHEMA_VERSION}`",
        f"- config hash: `{config_hash}` (the full config is in `manifest.json`)",
        *[f"- input `{k}`: `{v}`" for k, v in sorted(inputs.items())],
        "- `manifest.json` lists the sha256 of every file; `reasonvqa verify <folder>` checks them.",
    ]
    if "knowledge" in tables:
        lines += ["", *knowledge_section(counts, inputs)]
    if "images" in tables:
        lines += ["", *images_section(counts.get("images", 0), images)]
    if bias:
        lines += ["", *bias_section(bias)]
    if breakdown:
        lines += ["", *breakdown_section(breakdown)]
    if "regions" in counts:
        lines += ["", *regions_section()]
    if stats_files:
        lines += ["", "## Statistics", ""]
        lines += [f"- [{label}]({path})" for label, path in sorted(stats_files.items())]
    if notes:
        lines += ["", "## Notes", "", notes.strip()]
    # the build's sources are the ``source:<kind>`` inputs; each declares its license in the registry
    from reasonvqa import sources

    source_rows = []
    for kind in sorted(k.removeprefix("source:") for k in inputs if k.startswith("source:")):
        try:
            source = sources.source_class(kind)
            cells = [(source.description or kind).replace("|", "\\|"), source.license.replace("|", "\\|")]
            source_rows.append(f"| `{kind}` | {cells[0]} | {cells[1]} |")
        except sources.UnknownSourceError:  # e.g. a re-split where a plugin source is not installed
            source_rows.append(f"| `{kind}` | (source not installed here) | see the source dataset |")
    lines += [
        "",
        "## Licenses",
        "",
        "Questions derive from Wikidata (CC0) and the image annotations of their source datasets, "
        "each under its own license. Images are embedded only where their source's license allows it "
        "(see Images); the others are referenced by URL and path.",
    ]
    if source_rows:
        lines += ["", "| source | dataset | license |", "| --- | --- | --- |", *source_rows]
    lines.append("")
    return "\n".join(lines)


def table_configs(tables: Sequence[str]) -> list[dict]:
    """One card config per record table beside the questions: ``load_dataset(folder, "regions")``."""
    return [{"config_name": t, "data_files": [{"split": "train", "path": f"{t}/*.parquet"}]} for t in sorted(tables)]


def hub_metadata(questions: int) -> dict:
    """The Hub's card fields: license, task categories, language and size category."""
    sizes = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]
    size = next((label for bound, label in sizes if questions < bound), "1M<n<10M")
    return {"license": "other", "license_name": "mixed-see-card",
            "task_categories": ["visual-question-answering"], "language": ["en"], "size_categories": [size]}


_WHY_NOT = {
    "disabled": "embedding off (`release.embed_images: never`)",
    "not_embedded": "no bytes were given (a table from a release written before embedding)",
    "missing_file": "no local file (give the source an `image_dir`)",
    "corrupt": "the local file does not decode",
    "wrong_size": "the local file's size differs from the table's",
    "no_source": "its source is not configured where the release was written",
    "unreadable": "the local file could not be read",
    "outside_folder": "its path leaves the source folder",
    "no_file_path": "the source gives no file path",
}


def images_section(images: int, summary: dict | None = None) -> list[str]:
    """The card's images section: what ``images/`` holds, which images are embedded and why the others are not."""
    embedded = (summary or {}).get("embedded", 0)
    lines = ["## Images", "",
             f"`images/` lists the {images} images the questions show: source, size, URL, file path in the source "
             f"dataset and license. {embedded} of them are embedded in its `image` column (the `datasets` Image "
             "layout: `load_dataset(\"<this folder>\", \"images\")` decodes them); its `pixels` column says "
             "`embedded` or why an image is not."]
    rows = []
    for kind, entry in (summary or {}).get("by_source", {}).items():
        why = "; ".join(f"{n} {_why_not(kind, code)}" for code, n in entry["not_embedded"].items()) or "-"
        why = why.replace("|", "\\|")
        rows.append(f"| `{kind}` | {entry['images']} | {entry['embedded']} | {why} |")
    if rows:
        lines += ["", "| source | images | embedded | not embedded, why |", "| --- | ---: | ---: | --- |", *rows]
    return lines + [
        "", "Fetch the images that are not embedded with", "",
        "```",
        "reasonvqa images fetch <this folder> --dest <folder>",
        "```",
        "",
        "which downloads by URL with bounded concurrency, resumes, checks each file's length, that it decodes "
        "and its width and height, records its sha256, and writes `<folder>/images/part-00000.parquet` with "
        "the images embedded in the `datasets` Image layout (join on `image_id`).",
    ]


def _why_not(kind: str, code: str) -> str:
    if code != "license":
        return _WHY_NOT.get(code, code)
    from reasonvqa import sources

    try:
        return f"license: {sources.source_class(kind).redistribution}"
    except sources.UnknownSourceError:
        return "license: the source's license does not allow redistribution"


_BASELINES = {
    "closest_to_mean": "choices only: the choice closest to the mean of the choices (number and date questions)",
    "median": "choices only: the choice closest to the median (number and date questions)",
    "most_frequent_choice": "choices only: the choice seen most often across the release",
    "question_prior": "question only: the most common train answer of the same question text",
}


_STATUS = {"met": "yes", "not_met": "no", "insufficient_n": "not judged (too few questions)"}


def bias_section(bias: dict) -> list[str]:
    """The card's bias report: what a model gets right without the image (stats/bias.json)."""
    baselines, targets = bias.get("baselines", {}), bias.get("targets", {})
    checks, intervals = targets.get("checks", {}), bias.get("intervals", {})
    chance = bias.get("chance")
    lines = [
        "## Bias report",
        "",
        f"Accuracy of baselines that never look at the image (chance: {_pct(chance)}). The choice-only baselines "
        f"need no training data and are scored on all {bias.get('questions', 0)} released multiple-choice questions "
        f"({baselines.get('numeric_questions', 0)} number and date), the question-only prior on the "
        f"{bias.get('test_questions', 0)} test questions. Targets: every choice-only baseline within "
        f"{100 * targets.get('choice_only_margin', 0):.0f} points of chance, the question-only prior at most "
        f"{_pct(targets.get('question_prior_max'))}; a target is judged only on at least {targets.get('min_n', 0)} "
        "questions. Details in `stats/bias.json`.",
        "",
        "| baseline | accuracy | questions | 95% interval | target met |",
        "| --- | ---: | ---: | --- | --- |",
    ]
    for name, text in _BASELINES.items():
        if name in baselines:
            span = intervals.get(name, {})
            low, high = span.get("ci95", (None, None))
            lines.append(f"| {text} | {_pct(baselines[name])} | {span.get('n', 'n/a')} | {_pct(low)} - {_pct(high)} | "
                         f"{_STATUS.get(checks.get(name), 'n/a')} |")
    lines += text_only_section(bias.get("text_only", {}))
    words = bias.get("question_words", {})
    if "mean" in words:
        lines += ["", f"Average question length: {words['mean']} words (ReasonVQA paper: {words['paper_mean']})."]
    return lines


_TEXT_ONLY = {  # bias.json text_only baseline -> (what it does, its value's key, what the target is)
    "hallucination_from_wording": ("hallucination or not, voted by the questions of the same wording (every word "
                                   "outside a closed-class list masked; folds by image)", "accuracy",
                                   "at most chance + 5 points"),
    "answer_first_in_a_or_b": ("\"A or B\" questions answered by their first option", "share_first", "35% - 65%"),
    "masked_question_prior": ("the most common answer of the same masked question in the other folds (folds by "
                              "image)", "accuracy", "-"),
}


def text_only_section(text_only: dict) -> list[str]:
    """The text-only baselines per question kind (bias.json ``text_only``), each with its n and chance."""
    rows = []
    for kind, entry in sorted(text_only.get("kinds", {}).items()):
        for name, (what, key, target) in _TEXT_ONLY.items():
            if name in entry:
                b = entry[name]
                rows.append(f"| {kind} | {what} | {_pct(b.get(key))} | {b['n']} | {_pct(b.get('chance'))} | {target} | "
                            f"{_STATUS.get(b.get('check'), 'n/a')} |")
    if not rows:
        return []
    return ["", "Text-only baselines per kind (\"all\": every released question together): what the question's wording "
            "alone tells (chance: the majority class, "
            "0.5 for the first option, the kind's most common answer of the other folds for the prior).", "",
            "| kind | baseline | accuracy or share | questions | chance | target | target met |",
            "| --- | --- | ---: | ---: | ---: | --- | --- |", *rows]


def _pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"
