"""WordNet 3.0 -> 3.1: the bundled table, and NLTK's readers over Debian's WordNet 3.0 and npm's 3.1 data."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from reasonvqa.knowledge.config import KnowledgeConfig
from reasonvqa.knowledge.wordnet import (NltkWordNet, TableWordNet, canonical_name, load_wordnet, nltk_available,
                                         nltk_corpora_may_exist, parse_name)
from tests.knowledge import wordnet_data

# (name, WordNet 3.0 offset, WordNet 3.1 offset), as NLTK's WordNet 3.0 and the 3.1 database give them
KNOWN = [
    ("dog.n.01", "02084071-n", "02086723-n"),
    ("traffic_light.n.01", "06874185-n", "06887235-n"),
    ("car.n.01", "02958343-n", "02961779-n"),
]


@pytest.fixture(scope="module")
def table() -> TableWordNet:
    return TableWordNet(KnowledgeConfig().wordnet_table)


@pytest.mark.parametrize("name,wn30,wn31", KNOWN)
def test_table_maps_30_to_31(table, name, wn30, wn31):
    info = table.lookup(name)
    assert (info.wn30_offset, info.wn31_offset) == (wn30, wn31)


def test_table_covers_every_wordnet30_noun(table):
    assert len(table) == 82115
    assert table.lookup("entity.n.01").hypernyms == ()  # the root


def test_names_are_normalised():
    assert parse_name("traffic_light.n.01") == ("traffic_light", "n", 1)
    assert canonical_name("Dog.n.1") == "dog.n.01"
    assert parse_name("dog") is None and parse_name("dog.x.01") is None


def test_hypernyms_are_wordnet30_offsets(table):
    dog = table.lookup("dog.n.01")
    assert {table.by_offset(h).name for h in dog.hypernyms} == {"canine.n.02", "domestic_animal.n.01"}


def test_instance_hypernyms_are_included(table):
    paris = table.lookup("paris.n.01")
    assert "national_capital.n.01" in {table.by_offset(h).name for h in paris.hypernyms}


def test_synsets_dropped_in_31_have_no_counterpart(table):
    with gzip.open(KnowledgeConfig().wordnet_table, "rt") as handle:
        next(handle)
        dropped = [line.split("\t")[0] for line in handle if line.split("\t")[3] == ""]
    assert len(dropped) == 41
    assert table.lookup(dropped[0]).wn31_offset is None


def test_unknown_names(table):
    assert table.lookup("no_such_thing.n.01") is None
    assert table.lookup("run.v.01") is None  # the table holds nouns only


def test_auto_falls_back_to_the_table_without_corpora(monkeypatch, tmp_path):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    from nltk.corpus import wordnet, wordnet31

    if wordnet.__class__.__name__ != "LazyCorpusLoader" or wordnet31.__class__.__name__ != "LazyCorpusLoader":
        pytest.skip("NLTK corpora already loaded in this process")
    assert load_wordnet(KnowledgeConfig(wordnet_source="auto")).source == "table"
    assert load_wordnet(KnowledgeConfig(wordnet_source="table")).source == "table"


def test_without_nltk_imported_the_search_path_is_the_one_nltk_makes(tmp_path):
    """A fresh interpreter: the path computed before NLTK is imported equals ``nltk.data.path`` after, and an
    empty data folder gives the table without importing NLTK."""
    script = ("import json, sys\n"
              "from reasonvqa.knowledge.config import KnowledgeConfig\n"
              "from reasonvqa.knowledge.wordnet import load_wordnet, nltk_search_path\n"
              "ours = nltk_search_path()\n"
              "source = load_wordnet(KnowledgeConfig(wordnet_source='auto')).source\n"
              "imported = 'nltk' in sys.modules\n"
              "import nltk.data\n"
              "print(json.dumps([ours, nltk.data.path, source, imported]))\n")
    env = {**os.environ, "NLTK_DATA": os.pathsep.join([str(tmp_path / "a"), "~/b"])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    ours, nltks, source, imported = json.loads(done.stdout)
    assert ours == nltks
    assert ours[:2] == [str(tmp_path / "a"), os.path.expanduser("~/b")]
    assert (source, imported) == ("table", False)


@pytest.mark.parametrize("files,expected", [
    ([], False),
    (["corpora/wordnet/"], False),  # 3.1 missing
    (["corpora/wordnet/", "corpora/wordnet31/"], True),
    (["corpora/wordnet.zip", "corpora/wordnet31.zip"], True),
    (["wordnet/", "wordnet31/"], False),  # not under corpora/
])
def test_the_corpora_are_looked_for_as_nltk_finds_them(tmp_path, monkeypatch, files, expected):
    for name in files:
        target = tmp_path / "data" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.mkdir() if name.endswith("/") else target.write_bytes(b"")
    monkeypatch.delitem(sys.modules, "nltk.data", raising=False)  # as before NLTK is imported
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    assert nltk_corpora_may_exist() is (expected or any(
        os.path.isdir(f"{folder}/corpora/wordnet") for folder in ("/usr/share/nltk_data", "/usr/local/share/nltk_data",
                                                                   "/usr/lib/nltk_data", "/usr/local/lib/nltk_data")))


@pytest.fixture
def nltk_corpora(monkeypatch):
    """NLTK reading the WordNet 3.0 (Debian) and 3.1 (npm) corpora of the test cache (tests/knowledge/wordnet_data.py),
    through fresh corpus loaders: the suite's own ``nltk.corpus.wordnet`` stays unloaded, so builds with
    ``wordnet_source: auto`` elsewhere in this process keep reading the bundled table."""
    import nltk
    import nltk.corpus
    from nltk.corpus.reader import CorpusReader, WordNetCorpusReader
    from nltk.corpus.util import LazyCorpusLoader

    try:
        folder = wordnet_data.prepare()
    except wordnet_data.Unavailable as why:
        pytest.skip(f"SKIPPED LOUDLY: {why}")
    monkeypatch.setattr(nltk.data, "path", [str(folder)])
    for name in ("wordnet", "wordnet31"):
        omw = LazyCorpusLoader("omw-2.0", CorpusReader, r".*/wn-data-.*\.tab", encoding="utf8")
        monkeypatch.setattr(nltk.corpus, name, LazyCorpusLoader(name, WordNetCorpusReader, omw))
    assert nltk_available()


def test_nltk_sense_keys_agree_with_the_interlingual_index(table, nltk_corpora):
    nltk_wordnet = NltkWordNet()
    assert load_wordnet(KnowledgeConfig(wordnet_source="auto")).source == "nltk"
    for name, wn30, wn31 in KNOWN:
        info = nltk_wordnet.lookup(name)
        assert (info.wn30_offset, info.wn31_offset) == (wn30, wn31)
    sample = [table.by_offset(o) for o in sorted(table._by_offset)[::500]]
    for expected in sample:
        got = nltk_wordnet.lookup(expected.name)
        assert (got.wn31_offset, got.hypernyms) == (expected.wn31_offset, expected.hypernyms), expected.name
