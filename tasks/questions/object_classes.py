"""Which labels may be the subject of a grounded question: one class per WordNet synset, physical objects only.

A Visual Genome object carries its WordNet 3.0 synset (``tree.n.01``); names of one synset
("tree", "trees"; "color", "colour") are one class, named by the synset's lemma ("tree"), and
counted together. Only synsets of the physical-object lexicographer files (``OBJECT_LEXNAMES``:
artifact, animal, plant, food, person, object, body) become question subjects; a synset of another
file (noun.attribute "color", noun.location "area", noun.act "walk") or an object without a synset
is refused with a reason (``class_verdict``). Labels of sources with their own taxonomy and no synset
(nuScenes categories, detector prompts) are object classes by construction.

The lexicographer file of every WordNet 3.0 noun synset is bundled in
``data/knowledge/wordnet/wn30_noun_lexnames.tsv.gz`` (3.0 offset -> lexname), made by
``python -m reasonvqa.tasks.questions.object_classes /usr/share/wordnet/data.noun`` from WordNet 3.0's
``data.noun`` (Debian ``wordnet-base``; WordNet 3.0 license, data/knowledge/LICENSES/WordNet-3.0.txt); names
come from the bundled ``wn30_nouns.tsv.gz`` (same offsets).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import re
from functools import lru_cache
from pathlib import Path

from reasonvqa.paths import DATA_DIR

WORDNET_DIR = DATA_DIR / "knowledge" / "wordnet"
LEXNAMES_FILE = WORDNET_DIR / "wn30_noun_lexnames.tsv.gz"
NOUNS_FILE = WORDNET_DIR / "wn30_nouns.tsv.gz"
OBJECT_LEXNAMES = frozenset({"noun.artifact", "noun.animal", "noun.plant", "noun.food", "noun.person",
                             "noun.object", "noun.body"})
# WordNet's lexicographer files by number (lexnames(5WN)); data.noun gives the number of each synset.
LEXNAMES = ("adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
            "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling",
            "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object", "noun.person",
            "noun.phenomenon", "noun.plant", "noun.possession", "noun.process", "noun.quantity", "noun.relation",
            "noun.shape", "noun.state", "noun.substance", "noun.time", "verb.body", "verb.change",
            "verb.cognition", "verb.communication", "verb.competition", "verb.consumption", "verb.contact",
            "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession", "verb.social",
            "verb.stative", "verb.weather", "adj.ppl")
_SYNSET = re.compile(r"^(?P<lemma>[^.]+)\.n\.(?P<sense>\d+)$")


def read_data_noun(text: str) -> list[tuple[str, str]]:
    """(8-digit offset, lexname) of every synset line of a WordNet ``data.noun`` (license header lines skipped)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith(" "):
            continue
        offset, lex_filenum = line.split(" ", 2)[:2]
        out.append((offset, LEXNAMES[int(lex_filenum)]))
    return out


def write_table(rows: list[tuple[str, str]], path: Path) -> None:
    """The bundled table: ``wn30_offset<TAB>lexname`` per synset, sorted, gzip without a timestamp (byte-stable)."""
    body = "wn30_offset\tlexname\n" + "".join(f"{o}-n\t{lex}\n" for o, lex in sorted(rows))
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(body.encode())


def _rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return list(csv.DictReader(io.StringIO(f.read()), delimiter="\t"))


@lru_cache(maxsize=1)
def synset_lexnames() -> dict[str, str]:
    """WordNet 3.0 noun synset name (``tree.n.01``) -> its lexicographer file (``noun.plant``); the unique
    beginners of noun.Tops that are physical objects (person.n.01, animal.n.01, artifact.n.01: their hypernyms
    lead to object.n.01) are given as ``noun.object``."""
    lex = {r["wn30_offset"]: r["lexname"] for r in _rows(LEXNAMES_FILE)}
    nouns = _rows(NOUNS_FILE)
    parents = {r["wn30_offset"]: (r["hypernyms_wn30"] or "").replace(",", " ").split() for r in nouns}
    physical = next(r["wn30_offset"] for r in nouns if r["name"] == "object.n.01")

    def is_physical(offset: str, seen: frozenset = frozenset()) -> bool:
        return offset == physical or any(is_physical(h, seen | {offset}) for h in parents.get(offset, ()) if h not in seen)

    out = {}
    for r in nouns:
        name, offset = r["name"], r["wn30_offset"]
        if offset in lex:
            out[name] = "noun.object" if lex[offset] == "noun.Tops" and is_physical(offset) else lex[offset]
    return out


def synset_lemma(synset: str | None) -> str | None:
    """The label of a synset's class: its lemma as words ("teddy_bear.n.01" -> "teddy bear"), None if not a noun synset."""
    match = _SYNSET.match((synset or "").strip().lower())
    return match["lemma"].replace("_", " ") if match else None


def lexname(synset: str | None) -> str | None:
    """The lexicographer file of a WordNet 3.0 noun synset ("tree.n.01" -> "noun.plant"), None if unknown."""
    return synset_lexnames().get((synset or "").strip().lower())


def class_verdict(synset: str | None, has_taxonomy: bool) -> tuple[str | None, str | None]:
    """(class label, refusal reason) of a labeled object: the lemma of a physical-object synset and None, or None
    and ``no_synset`` / ``unknown_synset`` / ``non_object_class`` (its lexname in ``lexname``). ``has_taxonomy``:
    the source names classes of its own (nuScenes), so a label without a synset is a class."""
    if not synset:
        return None, (None if has_taxonomy else "no_synset")
    lex = lexname(synset)
    if lex is None:
        return None, "unknown_synset"
    if lex not in OBJECT_LEXNAMES:
        return None, "non_object_class"
    return synset_lemma(synset), None


def word_class(word: str) -> tuple[str | None, str | None]:
    """(synset, lexname) of a bare label's most frequent noun sense (``<lemma>.n.01``; a plural's singular
    when the label itself is no lemma), (None, None) when WordNet has no such noun."""
    from reasonvqa.tasks.questions.grounded import singular

    table = synset_lexnames()
    for form in (word, singular(word)):
        name = form.strip().lower().replace(" ", "_") + ".n.01"
        if name in table:
            return name, table[name]
    return None, None


def main(argv: list[str] | None = None) -> None:
    """Regenerate the bundled lexname table from a WordNet 3.0 ``data.noun``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_noun", type=Path, help="WordNet 3.0 data.noun (Debian wordnet-base: /usr/share/wordnet/data.noun)")
    parser.add_argument("--out", type=Path, default=LEXNAMES_FILE)
    args = parser.parse_args(argv)
    rows = read_data_noun(args.data_noun.read_text(encoding="latin-1"))
    write_table(rows, args.out)
    print(f"{len(rows)} noun synsets -> {args.out}")


if __name__ == "__main__":
    main()
