"""One grounded-questions shard: a source shard's regions -> rule questions + hallucination questions
(absent objects, wrong attributes, impossible relations).

Outputs ``questions`` (QUESTIONS, kind ``grounded``) and ``regions`` (every region of the shard's
images, the release's pixel evidence). ``rows_in`` counts candidate questions and the labeled regions
refused as question subjects (object_classes.py: no object synset; one reject each, reason
``no_synset`` / ``unknown_synset`` / ``non_object_class`` with the lexname); ``rows_out`` the questions kept
(regions are a by-product, not records of this stage's accounting).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reasonvqa import sources
from reasonvqa.gc_pause import gc_paused
from reasonvqa.stage import Rejects, StageResult, part_name
from reasonvqa.tasks.questions.grounded import (STAGE, add_rejects, form_weights, image_candidates, mark_duplicates,
                                                references, reject_table, to_rows)
from reasonvqa.tasks.questions.grounded_config import GroundedConfig
from reasonvqa.tasks.questions.absence import absent_labels
from reasonvqa.tasks.questions.coco_taxonomy import image_taxonomies
from reasonvqa.tasks.questions.detector_negatives import negatives_part, read_negatives, with_detector_negatives
from reasonvqa.tasks.questions.hallucination import check_absent, hallucination_candidates, position_options, position_slots
from reasonvqa.tasks.questions.position_draw import draw_positions
from reasonvqa.tasks.questions.hallucination_attribute import attribute_candidates
from reasonvqa.tasks.questions.hallucination_relation import predicate_index, relation_candidates
from reasonvqa.tasks.questions.object_classes import lexname
from reasonvqa.tasks.questions.position_identification import position_identifications
from reasonvqa.tasks.questions.regions import classify_regions, regions_by_image, shard_regions, unlabeled_images
from reasonvqa.tasks.questions.relation_questions import relation_questions
from reasonvqa.work_files import present


def generate_grounded(images: pa.Table, objects: pa.Table | None, attributes: pa.Table | None,
                      regions: pa.Table, corpus: pa.Table, config: GroundedConfig, shard: int,
                      source_file: str = "regions", *, relations: pa.Table | None = None,
                      corpus_relations: pa.Table | None = None, taxonomies: dict[str, list[str]] | None = None,
                      coco: pa.Table | None = None, negatives: pa.Table | None = None) -> StageResult:
    """Grounded questions of one shard whose every region is in ``regions`` (see ``shard_regions``).

    ``corpus`` holds (image_id, label) of every image of the build, for absent-object candidates;
    ``relations`` the shard's annotated relations and ``corpus_relations`` the build's predicate
    counts (hallucination_relation.corpus_relation_counts), for impossible-relation candidates;
    ``taxonomies`` the labels each source kind annotates exhaustively (absence.corpus_taxonomies); ``coco`` the
    COCO categories of the VG images that are COCO images (coco_taxonomy.py), a taxonomy of their own;
    ``negatives`` the proposals stage's detector negatives (detector_negatives.py).
    The cyclic GC is paused meanwhile (reasonvqa/gc_pause.py): the candidates are many small objects without
    cycles, and the collector re-scanning them all took about a fifth of the stage's time.
    """
    with gc_paused():
        return _generate(images, objects, attributes, regions, corpus, config, shard, source_file, relations,
                         corpus_relations, taxonomies, coco, negatives)


def _generate(images: pa.Table, objects: pa.Table | None, attributes: pa.Table | None, regions: pa.Table,
              corpus: pa.Table, config: GroundedConfig, shard: int, source_file: str, relations: pa.Table | None,
              corpus_relations: pa.Table | None, taxonomies: dict[str, list[str]] | None, coco: pa.Table | None,
              negatives: pa.Table | None) -> StageResult:
    rejects = Rejects(STAGE, shard)
    image_rows = {r["image_id"]: r for r in images.select(["image_id", "source", "width", "height"]).to_pylist()}
    by_image = regions_by_image(regions)
    own_kinds = {kind for kind in {row["source"] for row in image_rows.values()} if _names_own_classes(kind)}
    own = frozenset(i for i, row in image_rows.items() if row["source"] in own_kinds)
    refused = classify_regions(by_image, objects, own)
    rejects.add_table(reject_table([reason for _, reason in refused], [f"{source_file}#{r.image_id}" for r, _ in refused],
                                   [{"region_id": r.region_id, "label": r.label, "synset": r.synset,
                                     "lexname": lexname(r.synset)} for r, _ in refused]))
    relations_of: dict[str, list[dict]] = {}
    if relations is not None and relations.num_rows:
        for r in relations.select(["image_id", "subject_id", "object_id", "predicate", "subject_label",
                                   "object_label"]).to_pylist():
            relations_of.setdefault(r["image_id"], []).append(r)
    candidates = []
    for image_id in sorted(image_rows):
        image_regions = by_image.get(image_id, [])
        refs = references(image_regions)
        candidates += image_candidates(image_regions, image_rows[image_id], config)
        candidates += relation_questions(image_regions, refs, relations_of.get(image_id, []), image_rows[image_id], config)
        candidates += position_identifications(image_regions, refs, image_rows[image_id], config)
    mark_duplicates(candidates)

    unlabeled = unlabeled_images(regions)
    eligible = sorted(i for i in image_rows if i not in unlabeled)
    own = image_taxonomies(coco, objects)
    absent = absent_labels(corpus, eligible, config.hallucination_candidates_per_image, taxonomies or {},
                           config.absence_probability, config.absence_min_label_images, image_taxonomies=own)
    absent = with_detector_negatives(absent, negatives, {i for i in eligible if i not in own and
                                                         image_rows[i]["source"] not in (taxonomies or {})})
    labels: dict[str, set[str]] = {}
    mine = corpus.filter(pc.is_in(corpus["image_id"], pa.array(eligible, pa.string())))  # not the whole build's, per shard
    for image_id, label in zip(mine["image_id"].to_pylist(), mine["label"].to_pylist()):
        labels.setdefault(image_id, set()).add(label)
    shard_labels = {r.label for image_id in eligible for r in by_image.get(image_id, []) if r.label}
    index = predicate_index(corpus_relations, shard_labels)
    halluc = []
    weights = form_weights(candidates)
    checks = {i: check_absent(by_image.get(i, []), labels.get(i, set()), absent.get(i, [])) for i in eligible}
    # the identification form's absent objects, drawn over the shard so that they name different classes
    drawn = draw_positions({i: position_options(checks[i]) for i in eligible},
                           {i: len(position_slots(weights.get(i), config)) for i in eligible})
    for image_id in eligible:
        image_regions = by_image.get(image_id, [])
        refs = references(image_regions)
        halluc += hallucination_candidates(image_id, image_regions, labels.get(image_id, set()), absent.get(image_id, []),
                                           config, weights.get(image_id), checks[image_id], drawn[image_id])
        halluc += attribute_candidates(image_id, image_regions, refs, config, weights.get(image_id))
        halluc += relation_candidates(image_id, image_regions, refs, relations_of.get(image_id, []), index,
                                      image_rows[image_id], config, weights.get(image_id))
    candidates += halluc
    mark_duplicates(candidates)

    objects_of = {}
    if objects is not None and objects.num_rows:
        for oid in objects["object_id"].to_pylist():
            image_id, _, native = oid.rpartition("/o")
            objects_of[f"{image_id}/g{native}"] = oid
    questions = to_rows(candidates, {i: r["source"] for i, r in image_rows.items()}, objects_of)
    add_rejects(rejects, candidates, source_file)
    return StageResult(outputs={"questions": questions, "regions": regions}, rejects=rejects,
                       rows_in=len(candidates) + len(refused),
                       rows_out=questions.num_rows,
                       extra={"hallucination": sum(c.reason is None for c in halluc)})


def grounded_for_shard(images: pa.Table, objects: pa.Table, attributes: pa.Table, relations: pa.Table,
                       source_regions: pa.Table, proposals_file: Path | None, corpus_path: Path,
                       corpus_relations_path: Path, config: GroundedConfig, shard: int, source_file: str,
                       taxonomies: dict[str, list[str]] | None = None, coco_path: Path | None = None) -> StageResult:
    """Read the shard's proposal regions (if the proposals stage wrote any) and the COCO categories of its images
    (when a VG config names COCO instances files), and generate."""
    proposals = pq.read_table(proposals_file) if proposals_file is not None and present(proposals_file) else None
    regions = shard_regions(objects, attributes, source_regions, proposals)
    return generate_grounded(images, objects, attributes, regions, pq.read_table(corpus_path), config, shard, source_file,
                             relations=relations, corpus_relations=pq.read_table(corpus_relations_path), taxonomies=taxonomies,
                             coco=_coco_of(coco_path, images), negatives=read_negatives(negatives_part(proposals_file)))


def _coco_of(path: Path | None, images: pa.Table) -> pa.Table | None:
    """The rows of the build's COCO category table (coco_instances.COCO_TAXONOMY) for the shard's images."""
    if path is None:
        return None
    return pq.read_table(path, filters=[("image_id", "in", images["image_id"].to_pylist())]) if images.num_rows else None


def proposals_part(proposals_dir: Path | None, shard: int) -> Path | None:
    """The proposals stage's regions file of build shard ``shard`` (may not exist)."""
    return None if proposals_dir is None else Path(proposals_dir) / "regions" / f"{part_name(shard)}.parquet"


def _names_own_classes(kind: str | None) -> bool:
    """Whether a source kind labels its objects with categories of its own (nuScenes), not WordNet synsets."""
    if not kind:
        return False
    try:
        return sources.source_class(kind).exhaustive_taxonomy
    except sources.UnknownSourceError:
        return False
