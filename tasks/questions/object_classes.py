"""Which labels may be the subject of a grounded question: one class per WordNet synset, physical objects only.

A Visual Genome object carries its WordNet 3.0 synset (``tree.n.01``); names of one synset
("tree", "trees"; "color", "colour") are one class, named by the synset's lemma ("tree"), and
counted together. Only synsets of the physical-object lexicographer files (``OBJECT_LEXNAMES``:
artifact, animal, plant, food, person, object, body) become question subjects; a synset of another
file (noun.attribute "color", noun.location "area", noun.act "walk") or an object without a synset
is refused with a reason (``class_verdict``). Labels of sources with their own taxonomy and no synset
(nuScenes categories, detector prompts) are object classes by construction.

The lexicographer file of every WordNet 3.0 noun synset name is bundled in
``data/knowledge/wordnet/wn30_noun_lexnames.tsv.gz``: one row per ``<lemma>.n.<sense>`` (every lemma's
senses, as Visual Genome writes them: ``ground.n.01`` as well as NLTK's canonical ``land.n.04``), the
lexicographer file number and whether the synset is a hyponym of object.n.01. It is made by
``python -m reasonvqa.tasks.questions.object_classes /usr/share/wordnet`` from WordNet 3.0's ``data.noun``
and ``index.noun`` (Debian ``wordnet-base`` 1:3.0-37; WordNet 3.0 license,
data/knowledge/LICENSES/WordNet-3.0.txt).
"""

from __future__ import annotations

import argparse
import gzip
import re
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import polars as pl

from reasonvqa.loaded_once import loaded_once
from reasonvqa.paths import DATA_DIR

WORDNET_DIR = DATA_DIR / "knowledge" / "wordnet"
LEXNAMES_FILE = WORDNET_DIR / "wn30_noun_lexnames.tsv.gz"
PHYSICAL_OBJECT = "00002684"  # object.n.01 in WordNet 3.0
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


class NounEntry(NamedTuple):
    lexname: str
    hypernyms: tuple[str, ...]  # offsets of hypernyms and instance hypernyms


def read_data_noun(text: str) -> dict[str, NounEntry]:
    """8-digit offset -> (lexname, hypernym offsets) of every synset line of a WordNet ``data.noun`` (license
    header lines, which start with a space, skipped)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith(" "):
            continue
        fields = line.split(" ")
        n_words = int(fields[3], 16)
        at = 4 + 2 * n_words
        n_pointers = int(fields[at])
        pointers = [fields[at + 1 + 4 * i: at + 5 + 4 * i] for i in range(n_pointers)]
        out[fields[0]] = NounEntry(LEXNAMES[int(fields[1])], tuple(o for sym, o, pos, _ in pointers if sym in ("@", "@i") and pos == "n"))
    return out


def read_index_noun(text: str) -> list[tuple[str, str]]:
    """(synset name as Visual Genome and NLTK write it, offset): ``<lemma>.n.<NN>`` is the lemma's NN-th sense in
    the order of a WordNet ``index.noun`` line (so ``ground.n.01`` and ``land.n.04`` name one synset)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith(" "):
            continue
        fields = line.split()
        offsets = fields[-int(fields[2]):]
        out += [(f"{fields[0]}.n.{sense:02d}", offset) for sense, offset in enumerate(offsets, 1)]
    return out


def object_offsets(nouns: dict[str, NounEntry]) -> set[str]:
    """Offsets of the synsets whose hypernyms lead to object.n.01 (physical objects)."""
    memo: dict[str, bool] = {PHYSICAL_OBJECT: True}

    def physical(offset: str, path: frozenset = frozenset()) -> bool:
        if offset not in memo:
            memo[offset] = any(physical(h, path | {offset}) for h in nouns[offset].hypernyms if h in nouns and h not in path)
        return memo[offset]

    return {o for o in nouns if physical(o)}


def write_table(names: list[tuple[str, str]], nouns: dict[str, NounEntry], path: Path) -> None:
    """The bundled table: ``name<TAB>lexname number<TAB>object`` (1: a hyponym of object.n.01) per synset name,
    sorted, gzip without a timestamp (byte-stable)."""
    objects = object_offsets(nouns)
    lines = sorted(f"{name}\t{LEXNAMES.index(nouns[o].lexname)}\t{int(o in objects)}\n" for name, o in names)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(("name\tlexname\tobject\n" + "".join(lines)).encode())


@loaded_once(maxsize=1)
def synset_lexnames() -> dict[str, str]:
    """WordNet 3.0 noun synset name (``tree.n.01``; any lemma's sense, ``ground.n.01``) -> its lexicographer file
    (``noun.plant``); the unique beginners of noun.Tops that are physical objects (person.n.01, animal.n.01,
    artifact.n.01: hyponyms of object.n.01) are given as ``noun.object``."""
    table = pl.read_csv(LEXNAMES_FILE, separator="\t", schema_overrides={"name": pl.String, "lexname": pl.Int64,
                                                                        "object": pl.Int64})
    tops = LEXNAMES.index("noun.Tops")
    return {name: "noun.object" if number == tops and physical else LEXNAMES[number]
            for name, number, physical in table.iter_rows()}


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


@lru_cache(maxsize=1 << 16)  # asked for every absent candidate of every image: few distinct labels
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
    """Regenerate the bundled lexname table from WordNet 3.0's ``data.noun`` and ``index.noun``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wordnet_dir", type=Path, help="WordNet 3.0 dict folder (Debian wordnet-base: /usr/share/wordnet)")
    parser.add_argument("--out", type=Path, default=LEXNAMES_FILE)
    args = parser.parse_args(argv)
    nouns = read_data_noun((args.wordnet_dir / "data.noun").read_text(encoding="latin-1"))
    names = read_index_noun((args.wordnet_dir / "index.noun").read_text(encoding="latin-1"))
    write_table(names, nouns, args.out)
    print(f"{len(names)} noun synset names of {len(nouns)} synsets -> {args.out}")


if __name__ == "__main__":
    main()
