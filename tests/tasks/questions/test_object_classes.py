"""Object classes from WordNet synsets: lemma labels, physical-object lexicographer files, the bundled table."""

import gzip
from pathlib import Path

import pytest

from reasonvqa.tasks.questions.object_classes import (LEXNAMES_FILE, class_verdict, lexname, read_data_noun, read_index_noun,
                                                      synset_lemma, word_class, write_table)

# real lines of WordNet 3.0 (Debian wordnet-base), the data lines cut after their hypernym pointer, and a header line
DATA_NOUN = """  1 This software and database is being provided to you, the LICENSEE, by
00001930 03 n 01 physical_entity 0 001 @ 00001740 n 0000
00002684 03 n 02 object 0 physical_object 0 001 @ 00001930 n 0000
00004475 03 n 02 organism 0 being 0 001 @ 00002684 n 0000
00015388 03 n 06 animal 0 animate_being 0 beast 0 brute 0 creature 0 fauna 0 001 @ 00004475 n 0000
04956594 07 n 03 color 0 colour 0 coloring 0 001 @ 04916342 n 0000
"""
INDEX_NOUN = """  1 This software and database is being provided to you, the LICENSEE, by
colour n 8 6 @ ~ %m = + ; 8 0 14984973 07968354 05844663 05193338 04988478 04956594 04677952 04674968  
"""


def test_data_noun_lines_give_the_lexicographer_file_and_hypernyms():
    nouns = read_data_noun(DATA_NOUN)
    assert nouns["00015388"] == ("noun.Tops", ("00004475",)) and nouns["04956594"] == ("noun.attribute", ("04916342",))


def test_index_noun_names_every_sense_of_every_lemma():
    names = dict(read_index_noun(INDEX_NOUN))
    assert names["colour.n.01"] == "14984973" and names["colour.n.06"] == "04956594" and len(names) == 8


def test_the_table_is_written_byte_stable_with_the_physical_flag(tmp_path):
    nouns = read_data_noun(DATA_NOUN)
    names = [("animal.n.01", "00015388"), ("color.n.01", "04956594")]
    write_table(names, nouns, tmp_path / "a.gz")
    write_table(names, nouns, tmp_path / "b.gz")
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "b.gz").read_bytes()
    assert gzip.decompress((tmp_path / "a.gz").read_bytes()).decode().splitlines() == [
        "name\tlexname\tobject", "animal.n.01\t3\t1", "color.n.01\t7\t0"]


@pytest.mark.skipif(not Path("/usr/share/wordnet/index.noun").is_file(), reason="Debian wordnet-base is not installed")
def test_the_bundled_table_is_what_the_generator_makes_from_wordnet(tmp_path):
    folder = Path("/usr/share/wordnet")
    write_table(read_index_noun((folder / "index.noun").read_text(encoding="latin-1")),
                read_data_noun((folder / "data.noun").read_text(encoding="latin-1")), tmp_path / "t.gz")
    assert gzip.decompress((tmp_path / "t.gz").read_bytes()) == gzip.decompress(LEXNAMES_FILE.read_bytes())


def test_only_physical_object_synsets_are_classes():
    assert class_verdict("tree.n.01", has_taxonomy=False) == ("tree", None)
    assert class_verdict("ground.n.01", has_taxonomy=False) == ("ground", None)  # any lemma's sense (NLTK: land.n.04)
    assert class_verdict("teddy_bear.n.01", has_taxonomy=False) == ("teddy bear", None)
    assert class_verdict("person.n.01", has_taxonomy=False) == ("person", None)  # a physical noun.Tops beginner
    assert class_verdict("color.n.01", has_taxonomy=False) == (None, "non_object_class")  # noun.attribute
    assert class_verdict("area.n.01", has_taxonomy=False) == (None, "non_object_class")  # noun.location
    assert class_verdict("walk.n.01", has_taxonomy=False) == (None, "non_object_class")  # noun.act
    assert class_verdict("no_such_thing.n.07", has_taxonomy=False) == (None, "unknown_synset")
    assert class_verdict(None, has_taxonomy=False) == (None, "no_synset")
    assert class_verdict(None, has_taxonomy=True) == (None, None)  # nuScenes' own categories are classes
    assert lexname("chin.n.01") == "noun.body" and lexname("sky.n.01") == "noun.object"


def test_bare_labels_take_their_most_frequent_sense():
    assert word_class("trees") == ("tree.n.01", "noun.plant")
    assert word_class("colour") == ("colour.n.01", "noun.substance")  # its first sense: a dye, no object either
    assert word_class("fire hydrant") == ("fire_hydrant.n.01", "noun.artifact")
    assert word_class("traffic light") == ("traffic_light.n.01", "noun.communication")  # WordNet 3.0: a visual signal
    assert word_class("pluged") == (None, None)
    assert synset_lemma("Street_Light.n.01") == "street light" and synset_lemma("run.v.01") is None
