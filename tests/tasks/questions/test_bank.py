"""The template bank as shipped, and the load-time errors of broken banks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reasonvqa.paths import TEMPLATES_DIR
from reasonvqa.tasks.questions.bank import BankError, load_bank

# The properties the bundled sample knowledge was built around (data/knowledge/SOURCES.md).
SAMPLE_KNOWLEDGE_PROPERTIES = (
    "P17 P131 P30 P36 P37 P38 P84 P2048 P2049 P2043 P2044 P571 P1082 P2046 P6 P35 P47 P421 P149 P186 P127 P138 "
    "P361 P1435 P4552 P610 P706 P2660 P88 P1619 P122 P463 P85 P25 P22 P26 P19 P20 P569 P570 P27 P106 P50 P170 "
    "P279 P31 P527 P366 P176 P495 P61 P575 P171 P141 P2067 P462 P641 P136"
).split()
PAPER_PROPERTIES = ["P84", "P50", "P17", "P2048", "P2049", "P37", "P38", "P36", "P25", "P19"]


def test_shipped_bank_covers_the_paper_and_the_shared_list(bank):
    # the paper's bank size (ReasonVQA 3.2): at least 182 main templates and 100 sub-clauses
    assert len(bank.properties) >= 182
    assert sum(t.sub is not None for t in bank.properties.values()) >= 100
    assert len(bank.domains) == 20
    assert bank.domains[0] == "Places & Locations" and "Food & Nutrition" in bank.domains
    for pid in PAPER_PROPERTIES:
        assert pid in bank.properties
    assert set(SAMPLE_KNOWLEDGE_PROPERTIES) <= set(bank.properties)
    assert {t.category for t in bank.properties.values()} == {"fixed", "date", "number", "literal"}
    assert bank.properties["P84"].main == "Who designed {subject}?"
    assert bank.properties["P84"].sub == "the architect of {subject}"
    assert [c.label for c in bank.properties["P30"].choices][:2] == ["Africa", "Antarctica"]
    assert bank.properties["P2048"].category == "number"
    assert bank.properties["P569"].category == "date"
    assert bank.units["Q11573"].symbol == "m"
    assert bank.predicates["has"] == "with"
    assert "tourist attraction" in bank.naming_avoid


PAPER_DOMAINS = [  # ReasonVQA supplementary 2.2, in its order
    "Places & Locations", "Person & Institutions", "Temporal Concepts", "Characteristics & Properties",
    "Language & Cultural", "History & Events", "Physical Geography", "Politics & Ideologies", "Economics & Labor",
    "Nature & Human Interaction", "Technology & Innovation", "Science & Quantitative Analysis", "Health & Medicine",
    "Education & Knowledge Systems", "Art & Creative Expressions", "Philosophy & Spiritual Beliefs",
    "Media & Communication Systems", "Environment & Sustainability", "Law & Justice Systems", "Food & Nutrition",
]


def test_domains_are_exactly_the_papers_twenty(bank):
    assert bank.domains == PAPER_DOMAINS
    assert len(bank.domain_slugs) == 20 and set(bank.domain_slugs.values()) == set(PAPER_DOMAINS)


def test_domain_names_resolve_case_insensitively_and_by_slug(bank):
    assert bank.resolve_domains(["places & locations", "FOOD", " Law  &  Justice Systems "]) == [
        "Places & Locations", "Food & Nutrition", "Law & Justice Systems"]
    assert bank.resolve_domains(["food", "Food & Nutrition"]) == ["Food & Nutrition"]
    for bad, message in (([], "no domain given"), ([""], "empty domain name"), (["Sports"], "unknown domain 'Sports'")):
        with pytest.raises(ValueError, match=message) as info:
            bank.resolve_domains(bad)
        assert "Places & Locations (places)" in str(info.value) and "Food & Nutrition (food)" in str(info.value)


@pytest.mark.parametrize("domain", PAPER_DOMAINS)
def test_each_domain_filters_to_its_properties(bank, domain):
    from reasonvqa.tasks.questions.config import QuestionConfig

    slug = {v: k for k, v in bank.domain_slugs.items()}[domain]
    assert QuestionConfig(domains=[slug.upper()]).domains == [domain]
    selected = bank.select([domain.lower()])
    assert selected and all(domain in t.domains for t in selected.values())
    assert set(selected) == {pid for pid, t in bank.properties.items() if domain in t.domains}


def test_every_domain_has_properties_and_every_property_known_domains(bank):
    used = {d for t in bank.properties.values() for d in t.domains}
    assert used == set(bank.domains)


def test_property_ids_follow_the_domain_filter(bank):
    food = bank.property_ids(["Food & Nutrition"])
    assert "P31" in food and "P279" in food  # naming properties are always fetched
    assert "P2012" in food and "P17" not in food
    tagged = {pid for pid, t in bank.properties.items() if "Food & Nutrition" in t.domains}
    assert set(bank.question_property_ids(["Food & Nutrition"])) == tagged
    assert set(food) == tagged | {"P31", "P279"}
    assert set(bank.property_ids(None)) >= set(bank.properties)
    with pytest.raises(ValueError, match="Cooking"):
        bank.property_ids(["Cooking"])


def test_version_is_a_content_hash(bank, tmp_path):
    copy = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    assert load_bank(copy).version == bank.version
    path = copy / "properties" / "places.yaml"
    path.write_text(path.read_text().replace("What is the capital of {subject}?", "Which city is the capital of {subject}?"))
    assert load_bank(copy).version != bank.version


def _bank_with(tmp_path: Path, name: str, text: str) -> Path:
    copy = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (copy / "properties" / name).write_text(text)
    return copy


GOOD = """P9999:
  label: test
  category: literal
  value: item
  domains: [Places & Locations]
  subject_types: [Q6256]
  main: What is the test of {subject}?
  sub: the test of {subject}
"""


def test_every_property_names_subject_types_from_the_class_list(bank):
    for pid, t in bank.properties.items():
        assert t.subject_types, pid
        assert t.subject_types == ("any",) or set(t.subject_types) <= set(bank.classes), pid
    assert bank.classes["Q6256"] == "country"
    assert bank.properties["P2175"].subject_types == ("Q12140",)  # medical condition treated: medications only
    assert "Q41176" not in bank.properties["P2175"].subject_types
    assert bank.properties["P31"].subject_types == ("any",)


@pytest.mark.parametrize(
    "text, key, problem",
    [
        (GOOD.replace("What is the test of {subject}?", "What is the test?"), "P9999.main", "exactly one {subject}"),
        (GOOD.replace("{subject}?", "{object}?"), "P9999.main", "unknown placeholder {object}"),
        (GOOD.replace("of {subject}?", "of {subject}"), "P9999.main", "question mark"),
        (GOOD.replace("What is the test", "what is the test"), "P9999.main", "capital letter"),
        (GOOD.replace("P9999:", "X12:"), "X12", "property id"),
        (GOOD.replace("[Places & Locations]", "[Cooking]"), "P9999.domains", "unknown domain 'Cooking'"),
        (GOOD.replace("value: item", "value: quantity"), "P9999.value", "does not fit category literal"),
        (GOOD.replace("category: literal", "category: fixed"), "P9999.choices", "at least 4"),
        (GOOD.replace("  label: test\n", ""), "P9999.label", "missing"),
        (GOOD + "  colour: red\n", "P9999.colour", "unknown key"),
        (GOOD.replace("sub: the test of {subject}", "sub: the test of {subject}?"), "P9999.sub", "no question mark"),
        (GOOD.replace("P9999:", "P36:"), "P36", "defined twice"),
        (GOOD.replace("sub: the test of {subject}", "sub: the place where {subject} was born"), "P9999.sub", "doubles the word 'born' inside P19.main"),
        (GOOD.replace("What is the test", "What is {a} {subject}").replace(" of {subject}?", "?"), "P9999.main", "{a} must be followed by a word"),
        (GOOD.replace("literal\n  value: item", "number\n  value: quantity").replace("  sub: the test of {subject}\n", "")
         + "  number: {decimals: 2, colour: red}\n", "P9999.number.colour", "unknown key"),
        (GOOD + "  date: {window_years: 5}\n", "P9999.date", "only date-category properties"),
        ("P9999: [not, a, mapping]\n", "P9999", "expected a mapping"),
        ("P9999:\n  label: [unclosed\n", "<file>", "invalid YAML"),
    ],
)
def test_broken_templates_fail_at_load_naming_file_and_key(tmp_path, text, key, problem):
    root = _bank_with(tmp_path, "zz_test.yaml", text)
    with pytest.raises(BankError) as err:
        load_bank(root)
    message = str(err.value)
    assert err.value.key == key, message
    assert problem in message
    expected_file = "places.yaml" if key == "P36" else "zz_test.yaml"
    assert expected_file in message


def test_missing_bank_file_is_named(tmp_path):
    copy = tmp_path / "templates"
    shutil.copytree(TEMPLATES_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (copy / "units.yaml").unlink()
    with pytest.raises(BankError, match=r"units\.yaml: <file>: missing"):
        load_bank(copy)


def test_closed_sets_must_not_repeat_a_label(tmp_path):
    text = GOOD.replace("category: literal", "category: fixed").replace(
        "  sub: the test of {subject}\n", "  choices: [red, blue, green, {label: Red, aliases: [crimson]}]\n"
    )
    with pytest.raises(BankError, match=r"P9999.choices\[3\].*repeats choice 0"):
        load_bank(_bank_with(tmp_path, "zz_test.yaml", text))
