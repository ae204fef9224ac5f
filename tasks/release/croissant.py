"""Croissant 1.0 metadata (JSON-LD, mlcommons.org/croissant) of a release, written beside its card.

One FileSet per split and record table (their Parquet files), one RecordSet per FileSet with a
field per column, typed from the Parquet schema. mlcroissant validates it (tests/tasks/release).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

CROISSANT = "croissant.json"
CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}


def _data_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_boolean(arrow_type):
        return "sc:Boolean"
    if pa.types.is_integer(arrow_type):
        return "sc:Integer"
    if pa.types.is_floating(arrow_type):
        return "sc:Float"
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return "sc:ImageObject"
    return "sc:Text"


def _field(record_set: str, file_set: str, column: pa.Field, parent: list[str] | None = None) -> dict:
    path = [*(parent or []), column.name]
    field_id = f"{record_set}/{'/'.join(path)}"
    arrow_type = column.type
    repeated = pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
    if repeated:
        arrow_type = arrow_type.value_type
    field: dict = {"@type": "cr:Field", "@id": field_id, "name": field_id, "description": f"column `{'.'.join(path)}`"}
    if pa.types.is_struct(arrow_type):
        field["subField"] = [_field(record_set, file_set, arrow_type.field(i), path) for i in range(arrow_type.num_fields)]
    else:
        field["dataType"] = _data_type(arrow_type)
    field["source"] = {"fileSet": {"@id": file_set}, "extract": {"column": path[0]}}
    if len(path) > 1:
        field["source"]["transform"] = {"jsonPath": "." + ".".join(path[1:])}
    if repeated:
        field["repeated"] = True
    return field


def croissant_metadata(release: Path, name: str, version: str, parts: list[str], description: str,
                       license_text: str) -> dict:
    """The Croissant JSON-LD of the Parquet folders ``parts`` (splits, pool, record tables) under ``release``."""
    distribution, record_sets = [], []
    for part in parts:
        files = sorted((release / part).glob("*.parquet"))
        if not files:
            continue
        file_set = f"{part}-parquet"
        distribution.append({"@type": "cr:FileSet", "@id": file_set, "name": file_set,
                             "encodingFormat": "application/x-parquet", "includes": f"{part}/*.parquet"})
        schema = pq.read_schema(files[0])
        record_sets.append({"@type": "cr:RecordSet", "@id": part, "name": part,
                            "description": f"rows of `{part}/`",
                            "field": [_field(part, file_set, column) for column in schema]})
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": "http://mlcommons.org/croissant/1.0",
        "name": name,
        "description": description,
        "version": version,
        "license": license_text,
        "url": "https://github.com/reasonvqa/reasonvqa-pipeline",
        "citeAs": "reasonvqa-pipeline release " + f"{name} {version}",
        "distribution": distribution,
        "recordSet": record_sets,
    }


def write_croissant(release: Path, name: str, version: str, parts: list[str]) -> Path:
    """Write ``croissant.json`` into ``release`` (sorted keys, so the same release gives the same bytes)."""
    metadata = croissant_metadata(
        release, name, version, parts,
        description="Knowledge-based, multi-hop visual questions over Wikidata facts linked to image objects "
                    "(reasonvqa-pipeline); see README.md.",
        license_text="https://creativecommons.org/licenses/by/4.0/",
    )
    path = release / CROISSANT
    path.write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
