"""The dataset card's knowledge section: the knowledge date, what the release carries of it, how to rebuild."""

from __future__ import annotations

from reasonvqa.schemas import FACTS_TABLE, LINKS_TABLE, QUERIES_TABLE


def knowledge_section(counts: dict[str, int], inputs: dict[str, str]) -> list[str]:
    """Card lines for a release holding the ``knowledge`` tables (knowledge/release_knowledge.py)."""
    date = inputs.get("knowledge_date", "undated")
    return [
        "## Knowledge",
        "",
        f"The questions were generated from Wikidata knowledge as of **{date}** "
        f"(`{inputs.get('knowledge', 'unknown')}`). The release carries it: `{FACTS_TABLE}/` holds the "
        f"{counts.get(FACTS_TABLE, 0)} facts the questions were generated from (subject, property, value with unit, "
        "precision and point in time, rank, labels, hop, and where and when they were fetched), "
        f"`{QUERIES_TABLE}/` the {counts.get(QUERIES_TABLE, 0)} SPARQL answers the linking and fact stages used, "
        f"`{LINKS_TABLE}/` the {counts.get(LINKS_TABLE, 0)} links of the images' objects to Wikidata items.",
        "",
        *_rebuild_lines("resplit_source_pool" in inputs),
        "",
        "A query whose answer the release does not hold (another config asks other questions) fails the build, "
        "naming the query.",
    ]


def _rebuild_lines(resplit: bool) -> list[str]:
    if resplit:  # a re-split's config is its source's plus the re-split: rebuild the source, then re-split it
        return ["This re-split carries its source release's knowledge. Rebuild the source from it, offline (no "
                "SPARQL endpoint, no mirror) and byte for byte, with the source's config, then re-split that "
                "with the filters and seed of `manifest.json` (`config.resplit`):",
                "", "```", "reasonvqa build --knowledge-from <this folder> --config <source config> --out <folder>",
                "reasonvqa resplit <folder>/<name>/<source version> --out <folder> ...", "```"]
    return ["Rebuild this release from that knowledge, offline (no SPARQL endpoint, no mirror) and byte for byte, "
            "with the source datasets' annotation files where its config (`manifest.json`) names them:",
            "", "```", "reasonvqa build --knowledge-from <this folder> --out <folder>", "```"]
