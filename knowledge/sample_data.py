"""Assemble the bundled sample knowledge (data/knowledge/entities/) in the Wikidata JSON dump format.

Inputs (provenance in data/knowledge/SOURCES.md):
- real Special:EntityData files (Q45 Portugal, Q513 Mount Everest), copied unchanged;
- the real P8814 statements map (WordNet 3.1 id -> item + English label), turned into
  minimal entities (label + P8814 statements); malformed keys are left out;
- ``data/knowledge/transcribed.yaml``: hand-transcribed statements, turned into entities.

``python -m reasonvqa.knowledge.sample_data [REALDATA_DIR]`` rewrites the entity files; without
REALDATA_DIR only ``transcribed.jsonl`` is regenerated from the YAML.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import uuid
from pathlib import Path


from reasonvqa.yaml_files import load_yaml
from reasonvqa.knowledge.config import KNOWLEDGE_DATA_DIR
from reasonvqa.knowledge.ids import check_pid, check_qid, is_qid, is_wordnet_id

ENTITIES_DIR = KNOWLEDGE_DATA_DIR / "entities"
TRANSCRIBED_YAML = KNOWLEDGE_DATA_DIR / "transcribed.yaml"
STRING_PROPERTIES = {"P373": "string", "P8814": "external-id"}
GREGORIAN = "http://www.wikidata.org/entity/Q1985727"
_NAMESPACE = uuid.UUID("5b1b2f4e-2a43-4d8e-9d38-6f0f3c1a7a10")


def _statement(subject: str, pid: str, value: object) -> dict:
    check_pid(pid)
    if isinstance(value, str) and is_qid(value) and pid not in STRING_PROPERTIES:
        snak = {
            "datavalue": {"value": {"entity-type": "item", "numeric-id": int(value[1:]), "id": value}, "type": "wikibase-entityid"},
            "datatype": "wikibase-item",
        }
    elif isinstance(value, str):
        snak = {"datavalue": {"value": value, "type": "string"}, "datatype": STRING_PROPERTIES.get(pid, "string")}
    elif isinstance(value, dict) and "time" in value:
        snak = {
            "datavalue": {
                "value": {"time": value["time"], "timezone": 0, "before": 0, "after": 0,
                          "precision": int(value["precision"]), "calendarmodel": GREGORIAN},
                "type": "time",
            },
            "datatype": "time",
        }
    elif isinstance(value, dict) and "amount" in value:
        unit = value.get("unit")
        snak = {
            "datavalue": {"value": {"amount": str(value["amount"]),
                                    "unit": f"http://www.wikidata.org/entity/{check_qid(unit)}" if unit else "1"},
                          "type": "quantity"},
            "datatype": "quantity",
        }
    else:
        raise ValueError(f"{subject} {pid}: unsupported value {value!r}")
    content = json.dumps([subject, pid, snak], sort_keys=True)
    return {
        "mainsnak": {"snaktype": "value", "property": pid, **snak},
        "type": "statement",
        "id": f"{subject}${uuid.uuid5(_NAMESPACE, content)}",
        "rank": "normal",
    }


def _entity(qid: str, label: str, claims: dict[str, list], sitelinks: dict[str, str] | None = None) -> dict:
    check_qid(qid)
    return {
        "type": "item",
        "id": qid,
        "labels": {"en": {"language": "en", "value": label}},
        "claims": {pid: [_statement(qid, pid, v) for v in values] for pid, values in claims.items()},
        "sitelinks": {site: {"site": site, "title": title, "badges": []} for site, title in (sitelinks or {}).items()},
    }


def transcribed_entities(path: Path = TRANSCRIBED_YAML) -> list[dict]:
    """The hand-transcribed entities of ``path``, in QID order."""
    spec = load_yaml(Path(path).read_text(encoding="utf-8"))
    entities = []
    for qid in sorted(spec, key=lambda q: int(q[1:])):
        item = spec[qid]
        entities.append(_entity(qid, str(item["label"]), item.get("claims") or {}, item.get("sitelinks")))
    return entities


def p8814_entities(map_path: Path) -> tuple[list[dict], list[str]]:
    """Minimal entities (English label + P8814 statements) from the P8814 map; and the malformed keys left out."""
    mapping = json.loads(Path(map_path).read_text(encoding="utf-8"))
    by_qid: dict[str, dict] = {}
    malformed: list[str] = []
    for wn31, entry in sorted(mapping.items()):
        qid = entry.get("qid") if isinstance(entry, dict) else None
        if not is_wordnet_id(wn31) or not is_qid(qid):
            malformed.append(wn31)
            continue
        item = by_qid.setdefault(qid, {"label": entry.get("label"), "values": []})
        item["values"].append(wn31)
    entities = []
    for qid in sorted(by_qid, key=lambda q: int(q[1:])):
        item = by_qid[qid]
        entity = _entity(qid, item["label"] or qid, {"P8814": sorted(item["values"])})
        if not item["label"]:
            entity["labels"] = {}
        entities.append(entity)
    return entities, malformed


def write_jsonl(entities: list[dict], out: Path) -> None:
    """One entity per line; ``.gz`` with a fixed header so the bytes are reproducible."""
    text = "".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in entities).encode("utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.name.endswith(".gz"):
        with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            gz.write(text)
    else:
        out.write_bytes(text)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    write_jsonl(transcribed_entities(), ENTITIES_DIR / "transcribed.jsonl")
    if args:
        realdata = Path(args[0])
        for name in ("Q45.json", "Q513.json"):
            shutil.copyfile(realdata / "wikidata" / "entities" / name, ENTITIES_DIR / name)
        entities, malformed = p8814_entities(realdata / "wikidata" / "p8814_wordnet31_to_wikidata.json")
        write_jsonl(entities, ENTITIES_DIR / "p8814_items.jsonl.gz")
        print(f"P8814 map: {len(entities)} items, malformed keys left out: {malformed}")
    print(f"wrote entity files under {ENTITIES_DIR}")


if __name__ == "__main__":
    main()
