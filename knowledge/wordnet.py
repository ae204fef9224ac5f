"""WordNet 3.0 synset names (Visual Genome) -> WordNet 3.1 offsets (Wikidata P8814), with hypernyms.

Two interchangeable sources:
- ``NltkWordNet``: NLTK's readers over installed corpora (``wordnet`` = 3.0 and
  ``wordnet31``); 3.0 -> 3.1 goes through sense keys, which both versions share;
- ``TableWordNet``: the bundled table ``data/knowledge/wordnet/wn30_nouns.tsv.gz``
  (every WordNet 3.0 noun: name, 3.0 offset, ILI id, 3.1 offset through the
  Collaborative Interlingual Index, 3.0 hypernym offsets), for machines without corpora.

``load_wordnet(config)`` picks one (``wordnet_source``: auto / nltk / table).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.loaded_once import loaded_once

_NAME = re.compile(r"(?P<lemma>.+)\.(?P<pos>[nvasr])\.(?P<sense>\d+)")


@dataclass(frozen=True)
class SynsetInfo:
    name: str
    wn30_offset: str  # "02084071-n"
    wn31_offset: str | None  # "02086723-n"; None when 3.1 dropped the synset
    hypernyms: tuple[str, ...]  # WordNet 3.0 offsets of hypernyms and instance hypernyms


class WordNetMap(Protocol):
    source: str

    def lookup(self, name: str) -> SynsetInfo | None:
        """The synset called ``name`` in WordNet 3.0 (e.g. ``dog.n.01``), or None."""

    def by_offset(self, wn30_offset: str) -> SynsetInfo | None:
        """The WordNet 3.0 synset at ``wn30_offset`` (``02084071-n``), or None."""


def parse_name(name: str) -> tuple[str, str, int] | None:
    """``dog.n.01`` -> (``dog``, ``n``, 1); None when not a synset name."""
    match = _NAME.fullmatch(name.strip()) if isinstance(name, str) else None
    if not match:
        return None
    return match["lemma"], match["pos"], int(match["sense"])


def canonical_name(name: str) -> str | None:
    """Lower-case name with a two-digit sense number (``Dog.n.1`` -> ``dog.n.01``)."""
    parts = parse_name(name)
    if parts is None:
        return None
    lemma, pos, sense = parts
    return f"{lemma.lower()}.{pos}.{sense:02d}"


class TableWordNet:
    """WordNet 3.0 nouns from the bundled table (no corpora needed)."""

    source = "table"

    def __init__(self, path: Path) -> None:
        if not Path(path).exists():
            raise FileNotFoundError(f"bundled WordNet table not found: {path}")
        self.path = Path(path)
        self._by_name: dict[str, SynsetInfo] = {}
        self._by_offset: dict[str, SynsetInfo] = {}
        with gzip.open(self.path, "rt", encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle, delimiter="\t")
            for row in reader:
                info = SynsetInfo(
                    name=row["name"],
                    wn30_offset=row["wn30_offset"],
                    wn31_offset=row["wn31_offset"] or None,
                    hypernyms=tuple(h for h in row["hypernyms_wn30"].split(",") if h),
                )
                self._by_name[info.name] = info
                self._by_offset[info.wn30_offset] = info

    def lookup(self, name: str) -> SynsetInfo | None:
        key = canonical_name(name)
        return self._by_name.get(key) if key else None

    def by_offset(self, wn30_offset: str) -> SynsetInfo | None:
        return self._by_offset.get(wn30_offset)

    def __len__(self) -> int:
        return len(self._by_name)


class NltkWordNet:
    """WordNet 3.0 and 3.1 through NLTK's readers; 3.0 -> 3.1 by shared sense keys."""

    source = "nltk"

    def __init__(self) -> None:
        from nltk.corpus import wordnet, wordnet31

        wordnet.ensure_loaded()
        wordnet31.ensure_loaded()
        if wordnet.get_version() != "3.0" or wordnet31.get_version() != "3.1":
            raise LookupError(
                f"NLTK corpora are WordNet {wordnet.get_version()} / {wordnet31.get_version()}, expected 3.0 / 3.1"
            )
        self._wn30 = wordnet
        self._wn31 = wordnet31

    def lookup(self, name: str) -> SynsetInfo | None:
        key = canonical_name(name)
        if key is None:
            return None
        try:
            synset = self._wn30.synset(key)
        except Exception:  # nltk raises WordNetError / ValueError for unknown names
            return None
        return self._info(synset)

    def by_offset(self, wn30_offset: str) -> SynsetInfo | None:
        try:
            synset = self._wn30.synset_from_pos_and_offset(wn30_offset[-1], int(wn30_offset[:8]))
        except Exception:
            return None
        return self._info(synset)

    def _info(self, synset) -> SynsetInfo:
        pos = "a" if synset.pos() == "s" else synset.pos()
        votes: Counter[str] = Counter()
        for lemma in synset.lemmas():
            try:
                target = self._wn31.lemma_from_key(lemma.key()).synset()
            except Exception:
                continue
            votes[f"{target.offset():08d}-{pos}"] += 1
        wn31 = min(votes, key=lambda o: (-votes[o], o)) if votes else None
        hypernyms = sorted({f"{h.offset():08d}-{pos}" for h in synset.hypernyms() + synset.instance_hypernyms()})
        return SynsetInfo(synset.name(), f"{synset.offset():08d}-{pos}", wn31, tuple(hypernyms))


@loaded_once(maxsize=4)
def _table(path: str) -> TableWordNet:
    return TableWordNet(Path(path))


def nltk_available() -> bool:
    """True when NLTK finds both the WordNet 3.0 and 3.1 corpora."""
    try:
        NltkWordNet()
    except (LookupError, OSError, ImportError):
        return False
    return True


def nltk_search_path() -> list[str] | None:
    """The folders NLTK looks for data in: ``nltk.data.path`` once NLTK is imported, else the list NLTK makes at
    import on Linux and macOS ($NLTK_DATA's entries, then its default folders), without importing NLTK (2 CPU s);
    None where NLTK's defaults are not mirrored here (Windows)."""
    loaded = sys.modules.get("nltk.data")
    if loaded is not None:
        return list(loaded.path)
    if sys.platform.startswith(("win", "cygwin")):
        return None
    folders = [os.path.expanduser(entry) for entry in os.environ.get("NLTK_DATA", "").split(os.pathsep) if entry]
    if "APPENGINE_RUNTIME" not in os.environ and os.path.expanduser("~/") != "~/":
        folders.append(os.path.expanduser("~/nltk_data"))
    return folders + [os.path.join(sys.prefix, "nltk_data"), os.path.join(sys.prefix, "share", "nltk_data"),
                      os.path.join(sys.prefix, "lib", "nltk_data"), "/usr/share/nltk_data",
                      "/usr/local/share/nltk_data", "/usr/lib/nltk_data", "/usr/local/lib/nltk_data"]


def nltk_corpora_may_exist() -> bool:
    """Whether some NLTK data folder may hold both ``corpora/wordnet`` and ``corpora/wordnet31`` (folders or
    zips); False means ``NltkWordNet()`` would raise LookupError, known without importing NLTK."""
    folders = nltk_search_path()
    if folders is None:
        return True

    def found(name: str) -> bool:
        return any(os.path.exists(os.path.join(folder, "corpora", name + suffix))
                   for folder in folders for suffix in ("", ".zip"))

    return found("wordnet") and found("wordnet31")


def load_wordnet(config: KnowledgeConfig) -> WordNetMap:
    """The WordNet source the config asks for (auto: NLTK corpora if installed, else the bundled table)."""
    if config.wordnet_source == "nltk":
        return NltkWordNet()
    if config.wordnet_source == "auto" and nltk_corpora_may_exist():
        try:
            return NltkWordNet()
        except (LookupError, OSError, ImportError):
            pass
    return _table(str(config.wordnet_table))


def write_table(rows: list[SynsetInfo], ili: dict[str, str], out: Path) -> None:
    """Write the bundled table (sorted by 3.0 offset, deterministic gzip header)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter="\t", lineterminator="\n")
    writer.writerow(["name", "wn30_offset", "ili", "wn31_offset", "hypernyms_wn30"])
    for info in sorted(rows, key=lambda r: r.wn30_offset):
        writer.writerow([info.name, info.wn30_offset, ili.get(info.wn30_offset, ""), info.wn31_offset or "", ",".join(info.hypernyms)])
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        gz.write(buffer.getvalue().encode("utf-8"))


def hypernyms_from_data_noun(data_noun: Path) -> dict[str, tuple[str, ...]]:
    """Hypernym (``@``) and instance hypernym (``@i``) pointers of every noun in a WordNet 3.0 ``data.noun``."""
    result: dict[str, tuple[str, ...]] = {}
    with open(data_noun, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("  "):  # license header
                continue
            fields = line.split(" | ")[0].split()
            offset, word_count = fields[0], int(fields[3], 16)
            cursor = 4 + 2 * word_count
            pointer_count = int(fields[cursor])
            cursor += 1
            hypernyms = []
            for _ in range(pointer_count):
                symbol, target, pos = fields[cursor], fields[cursor + 1], fields[cursor + 2]
                cursor += 4
                if symbol in ("@", "@i") and pos == "n":
                    hypernyms.append(f"{target}-n")
            result[f"{offset}-n"] = tuple(sorted(set(hypernyms)))
    return result


def main() -> None:
    """Rebuild the bundled table: ``python -m reasonvqa.knowledge.wordnet WN30_NAMES_TSV DATA_NOUN OUT``.

    ``WN30_NAMES_TSV`` is shared/realdata/wordnet/wn30_to_wn31_nouns.tsv (names, 3.0 offset,
    ILI, 3.1 offset); ``DATA_NOUN`` is WordNet 3.0's data.noun (Debian ``wordnet-base``).
    """
    import sys

    names_tsv, data_noun, out = (Path(a) for a in sys.argv[1:4])
    hypernyms = hypernyms_from_data_noun(data_noun)
    rows, ili = [], {}
    with open(names_tsv, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            offset = row["offset_wn30"]
            if offset not in hypernyms:
                raise SystemExit(f"{names_tsv}: {row['synset_name_nltk_wn30']} {offset} is not in {data_noun}")
            ili[offset] = row["ili"]
            rows.append(SynsetInfo(row["synset_name_nltk_wn30"], offset, row["offset_wn31"] or None, hypernyms[offset]))
    write_table(rows, ili, out)
    print(f"wrote {len(rows)} nouns to {out}")


if __name__ == "__main__":
    main()
