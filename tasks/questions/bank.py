"""The template bank: property templates, domains, unit and predicate renderings, loaded from YAML.

Loading validates everything (pydantic models, unknown keys refused) and raises ``BankError``
naming the file and key of the first problem, so a template that cannot render never reaches a
build. Format: templates/README.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import AfterValidator, StrictBool, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from reasonvqa.yaml_files import load_yaml
from reasonvqa.paths import TEMPLATES_DIR
from reasonvqa.snapshot import files_digest
from reasonvqa.tasks.questions.text import normalize_predicate, normalize_text

CATEGORIES = ("fixed", "date", "number", "literal")
VALUE_KINDS = ("item", "quantity", "time", "string")
ALLOWED_VALUES = {"fixed": ("item", "string"), "date": ("time",), "number": ("quantity",), "literal": ("item", "string")}
# Properties that name an object's class ("this skyscraper"); always fetched, whatever the domains.
NAMING_PROPERTIES = ("P31", "P279")
SUBJECT = "{subject}"
ANY_TYPE = "any"  # subject_types of a property that fits every subject
ARTICLE = "{a}"
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
# keys a bank file may not set: the loader fills them from the file
LOADER_KEYS = ("property_id", "source")


class BankError(ValueError):
    """A template bank file that cannot be used; the message names the file and key."""

    def __init__(self, path: Path, key: str, problem: str):
        super().__init__(f"{path}: {key}: {problem}")
        self.path, self.key, self.problem = path, key, problem


def _has_text(text: str) -> str:
    if not text.strip():
        raise ValueError("must be a non-empty string")
    return text


Text = Annotated[str, AfterValidator(_has_text)]


class _BankModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Choice(_BankModel):
    """One member of a closed answer set: the label shown and the labels that match it."""

    label: str
    aliases: tuple[str, ...] = ()


class NumberFormat(_BankModel):
    decimals: int | None = None  # None = automatic (about 3 significant digits, never more than the value has)
    spread: float = Field(default=0.1, gt=0, le=1)  # distractor step as a share of the answer, rounded to 1/2/5 x 10^n
    thousands: bool = True  # 1,234,567

    @field_validator("decimals", mode="before")
    @classmethod
    def _auto_or_small_int(cls, value):
        if value == "auto" or value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 6:
            raise ValueError("must be 'auto' or an integer 0..6")
        return value


class DateFormat(_BankModel):
    window_years: int = Field(default=20, ge=2, strict=True)  # distractors lie within this many years of the answer
    max_precision: int = 11  # 9 year, 10 month, 11 day: never render finer than this

    @field_validator("max_precision", mode="before")
    @classmethod
    def _known_precision(cls, value):
        if value not in (9, 10, 11) or isinstance(value, bool):
            raise ValueError("must be 9 (year), 10 (month) or 11 (day)")
        return value


class PropertyTemplate(_BankModel):
    """Templates and rendering rules of one Wikidata property (validated in field order; the
    ``domains`` check needs the bank's domain names as validation context)."""

    property_id: str = Field(pattern=r"^P[1-9]\d*$")
    label: Text
    category: str
    value: str
    domains: tuple[str, ...] = Field(min_length=1)
    main: str
    sub: str | None = None
    choices: tuple[Choice, ...] = Field(default=(), validate_default=True)
    number: NumberFormat = NumberFormat()
    date: DateFormat = DateFormat()
    # the value changes over time (population, head of government): asked only with its P585
    # point in time ("... as of 2020?"), never as an inner hop
    time_varying: StrictBool = False
    # Wikidata classes the subject must belong to (P31/P279, subject_types.py), or ["any"]
    subject_types: tuple[str, ...] = Field(min_length=1)
    source: str = ""

    @property
    def main_id(self) -> str:
        return f"{self.property_id}:main"

    @property
    def sub_id(self) -> str:
        return f"{self.property_id}:sub"

    @field_validator("category")
    @classmethod
    def _known_category(cls, category: str) -> str:
        if category not in CATEGORIES:
            raise ValueError(f"{category!r} is not one of {CATEGORIES}")
        return category

    @field_validator("value")
    @classmethod
    def _value_fits_category(cls, value: str, info: ValidationInfo) -> str:
        category = info.data.get("category")
        if category in ALLOWED_VALUES and value not in ALLOWED_VALUES[category]:
            raise ValueError(f"{value!r} does not fit category {category} (allowed {ALLOWED_VALUES[category]})")
        return value

    @field_validator("domains")
    @classmethod
    def _known_domains(cls, domains: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        known = (info.context or {}).get("domains")
        for domain in domains:
            if known is not None and domain not in known:
                raise ValueError(f"unknown domain {domain!r} (see domains.yaml)")
        return domains

    @field_validator("subject_types")
    @classmethod
    def _known_classes(cls, types: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        known = (info.context or {}).get("classes")
        if ANY_TYPE in types and len(types) > 1:
            raise ValueError(f"{ANY_TYPE!r} stands alone")
        for qid in types:
            if qid == ANY_TYPE:
                continue
            if not re.fullmatch(r"Q[1-9]\d*", qid):
                raise ValueError(f"{qid!r} is not a Wikidata class id (Q123) or {ANY_TYPE!r}")
            if known is not None and qid not in known:
                raise ValueError(f"class {qid} is not in classes.yaml")
        return types

    @field_validator("main", mode="before")
    @classmethod
    def _main_template(cls, text) -> str:
        return _check_template(text, question=True)

    @field_validator("sub", mode="before")
    @classmethod
    def _sub_template(cls, text, info: ValidationInfo):
        if text is None:
            return None
        if info.data.get("value") != "item":
            raise ValueError("only item-valued properties can be sub-clauses")
        return _check_template(text, question=False)

    @field_validator("choices", mode="before")
    @classmethod
    def _closed_set(cls, raw, info: ValidationInfo):
        if info.data.get("category") != "fixed":
            if raw:
                raise ValueError("only fixed-category properties have a closed choice set")
            return ()
        return _parse_choices(raw)

    @field_validator("number", "date")
    @classmethod
    def _format_fits_category(cls, rendering, info: ValidationInfo):
        """``number:`` only on number-category properties, ``date:`` only on date-category ones."""
        if info.data.get("category") != info.field_name:
            what = "number formatting" if info.field_name == "number" else "date rendering"
            raise ValueError(f"only {info.field_name}-category properties have {what}")
        return rendering


class UnitFormat(_BankModel):
    symbol: Text
    space: bool = True


@dataclass
class TemplateBank:
    """All templates of a bank folder, validated; ``version`` is a content hash of its files."""

    version: str
    domains: list[str]
    properties: dict[str, PropertyTemplate]
    units: dict[str, UnitFormat]
    predicates: dict[str, str]
    naming_avoid: list[str]  # normalized labels of classes too vague to name an object
    root: Path
    classes: dict[str, str] = field(default_factory=dict)  # class QID -> English label (classes.yaml)

    domain_slugs: dict[str, str] = field(default_factory=dict)  # slug -> domain name

    def resolve_domains(self, names: list[str]) -> list[str]:
        """Canonical domain names of ``names`` (names or slugs, any case); ValueError listing the
        valid ones on an empty or unknown name."""
        return match_domains(names, self.domains, self.domain_slugs)

    def select(self, domains: list[str] | None = None) -> dict[str, PropertyTemplate]:
        """The property templates tagged with any of ``domains`` (names or slugs; all when None)."""
        if domains is None:
            return dict(self.properties)
        wanted = set(self.resolve_domains(domains))
        return {pid: t for pid, t in self.properties.items() if wanted.intersection(t.domains)}

    def question_property_ids(self, domains: list[str] | None = None) -> list[str]:
        """Properties that questions may ask or pass through, restricted to ``domains``."""
        return sorted(self.select(domains), key=property_number)

    def property_ids(self, domains: list[str] | None = None) -> list[str]:
        """What the knowledge stage must fetch: the domains' properties plus the naming ones (P31, P279)."""
        return sorted(set(self.question_property_ids(domains)) | set(NAMING_PROPERTIES), key=property_number)


def match_domains(names: list[str], domains: list[str], slugs: dict[str, str]) -> list[str]:
    """``names`` (domain names or slugs, case-insensitive) as canonical domain names, in the given order."""
    by_key = {d.casefold(): d for d in domains} | {s.casefold(): d for s, d in slugs.items()}
    valid = "; ".join(f"{d} ({s})" for s, d in slugs.items()) if slugs else "; ".join(domains)
    if not names:
        raise ValueError(f"no domain given; valid domains: {valid}")
    out: list[str] = []
    for name in names:
        key = " ".join(str(name).split()).casefold()
        if not key:
            raise ValueError(f"empty domain name; valid domains: {valid}")
        if key not in by_key:
            raise ValueError(f"unknown domain {name!r}; valid domains: {valid}")
        if by_key[key] not in out:
            out.append(by_key[key])
    return out


def resolve_domain_names(names: list[str], templates_dir: Path = TEMPLATES_DIR) -> list[str]:
    """``match_domains`` against the bank's domains.yaml only (no property files read)."""
    domains, slugs = _load_domains(Path(templates_dir) / "domains.yaml")
    return match_domains(names, domains, slugs)


def property_number(pid: str) -> int:
    return int(pid[1:])


def load_bank(templates_dir: Path = TEMPLATES_DIR) -> TemplateBank:
    """Load and validate the bank under ``templates_dir`` (domains.yaml, units.yaml,
    predicates.yaml, properties/*.yaml); raise ``BankError`` naming file and key on any problem."""
    templates_dir = Path(templates_dir)
    domains_path = templates_dir / "domains.yaml"
    domains, slugs = _load_domains(domains_path)
    units = _load_units(templates_dir / "units.yaml")
    predicates = _load_predicates(templates_dir / "predicates.yaml")
    naming_avoid = _load_naming(templates_dir / "naming.yaml")
    classes = _load_classes(templates_dir / "classes.yaml")
    prop_dir = templates_dir / "properties"
    files = sorted(prop_dir.glob("*.yaml"))
    if not files:
        raise BankError(prop_dir, "properties", "no property files (*.yaml)")
    properties: dict[str, PropertyTemplate] = {}
    for path in files:
        raw = _read_yaml(path)
        if not isinstance(raw, dict):
            raise BankError(path, "<root>", "expected a mapping of property ids to templates")
        for pid, spec in raw.items():
            pid = str(pid)
            if pid in properties:
                raise BankError(path, pid, f"defined twice (also in {properties[pid].source})")
            properties[pid] = _parse_property(path, pid, spec, set(domains), classes)
    _check_compositions(prop_dir, properties)
    fixed_files = ("units.yaml", "predicates.yaml", "naming.yaml", "classes.yaml")
    hashed = [domains_path, *(templates_dir / name for name in fixed_files), *files]
    return TemplateBank(
        version=files_digest(templates_dir, hashed)[:16],
        domains=domains,
        domain_slugs=slugs,
        properties=properties,
        units=units,
        predicates=predicates,
        naming_avoid=naming_avoid,
        root=templates_dir,
        classes=classes,
    )


def _read_yaml(path: Path):
    if not path.exists():
        raise BankError(path, "<file>", "missing")
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise BankError(path, "<file>", f"invalid YAML: {exc}") from exc


def _section(path: Path, key: str, kind: type, problem: str):
    """The non-empty top-level ``key`` of a YAML file, of type ``kind``."""
    raw = _read_yaml(path)
    entries = raw.get(key) if isinstance(raw, dict) else None
    if not isinstance(entries, kind) or not entries:
        raise BankError(path, key, problem)
    return entries


def _load_domains(path: Path) -> tuple[list[str], dict[str, str]]:
    """Domain names in file order and {slug: name}; names and slugs are unique case-insensitively."""
    entries = _section(path, "domains", list, "expected a non-empty list")
    names: list[str] = []
    slugs: dict[str, str] = {}
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else entry
        slug = entry.get("slug") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.strip():
            raise BankError(path, f"domains[{i}]", "needs a non-empty name")
        if slug is not None and not (isinstance(slug, str) and re.fullmatch(r"[a-z][a-z0-9-]*", slug)):
            raise BankError(path, f"domains[{i}].slug", "must be lowercase letters, digits and dashes")
        for key in filter(None, (name, slug)):
            if key.casefold() in seen:
                raise BankError(path, f"domains[{i}]", f"duplicate domain name or slug {key!r}")
            seen.add(key.casefold())
        names.append(name)
        if slug:
            slugs[slug] = name
    return names, slugs


def _load_units(path: Path) -> dict[str, UnitFormat]:
    entries = _section(path, "units", dict, "expected a mapping of unit item ids to {symbol, space}")
    units = {}
    for qid, spec in entries.items():
        if not re.fullmatch(r"Q\d+", str(qid)):
            raise BankError(path, f"units.{qid}", "key must be a Wikidata item id (Q123)")
        try:
            units[str(qid)] = UnitFormat.model_validate(spec)
        except ValidationError as exc:
            raise _bank_error(path, f"units.{qid}", exc) from None
    return units


def _load_predicates(path: Path) -> dict[str, str]:
    entries = _section(path, "predicates", dict, "expected a mapping of predicate to phrase")
    out = {}
    for key, phrase in entries.items():
        key = str(key)
        if key != normalize_predicate(key):
            raise BankError(path, f"predicates.{key}", f"key must be normalized ({normalize_predicate(key)!r})")
        if not isinstance(phrase, str) or not re.fullmatch(r"[a-z]+( [a-z]+)*", phrase):
            raise BankError(path, f"predicates.{key}", "phrase must be lowercase words")
        out[key] = phrase
    return out


def _load_naming(path: Path) -> list[str]:
    avoid = _section(path, "avoid", list, "expected a list of class labels")
    if not all(isinstance(a, str) and a.strip() for a in avoid):
        raise BankError(path, "avoid", "expected a list of class labels")
    return sorted({normalize_text(a) for a in avoid})


def _load_classes(path: Path) -> dict[str, str]:
    """{class QID: label}: the classes subject_types may name, each with its English label."""
    entries = _section(path, "classes", dict, "expected a mapping of class item ids to labels")
    out = {}
    for qid, spec in entries.items():
        label = spec.get("label") if isinstance(spec, dict) else None
        if not re.fullmatch(r"Q[1-9]\d*", str(qid)):
            raise BankError(path, f"classes.{qid}", "key must be a Wikidata item id (Q123)")
        if not isinstance(label, str) or not label.strip():
            raise BankError(path, f"classes.{qid}", "needs a non-empty label")
        out[str(qid)] = label
    return out


def _check_compositions(prop_dir: Path, properties: dict[str, PropertyTemplate]) -> None:
    """Every sub-clause inside every main template must read without a doubled word
    ("... where X is located located?")."""
    for outer in properties.values():
        for inner in properties.values():
            if inner.sub is None or inner.property_id == outer.property_id:
                continue
            text = outer.main.replace(SUBJECT, inner.sub).replace(SUBJECT, "this thing")
            words = re.findall(r"[a-z]+", text.lower())
            doubled = [a for a, b in zip(words, words[1:]) if a == b]
            if doubled:
                raise BankError(
                    prop_dir / inner.source,
                    f"{inner.property_id}.sub",
                    f"doubles the word {doubled[0]!r} inside {outer.property_id}.main ({outer.source}): {text!r}",
                )


def _parse_property(path: Path, pid: str, spec, known_domains: set[str], classes: dict[str, str]) -> PropertyTemplate:
    if not re.fullmatch(r"P[1-9]\d*", pid):
        raise BankError(path, pid, "key must be a Wikidata property id (P123)")
    if not isinstance(spec, dict):
        raise BankError(path, pid, "expected a mapping")
    for key in LOADER_KEYS:
        if key in spec:
            raise BankError(path, f"{pid}.{key}", "unknown key (set by the loader)")
    try:
        return PropertyTemplate.model_validate(
            {**spec, "property_id": pid, "source": path.name}, context={"domains": known_domains, "classes": classes}
        )
    except ValidationError as exc:
        raise _bank_error(path, pid, exc) from None


def _bank_error(path: Path, prefix: str, exc: ValidationError) -> BankError:
    """The first problem pydantic found, as a BankError whose key is ``prefix.field[index]...``."""
    error = exc.errors(include_url=False)[0]
    key = prefix
    for part in error["loc"]:
        key += f"[{part}]" if isinstance(part, int) else f".{part}"
    ctx = error.get("ctx") or {}
    key += ctx.get("at", "")
    if error["type"] == "missing":
        problem = "missing"
    elif error["type"] == "extra_forbidden":
        problem = "unknown key"
    elif error["type"] in ("model_type", "dict_type"):
        problem = "expected a mapping"
    elif error["type"] == "value_error":
        problem = str(ctx["error"])
    else:
        problem = error["msg"]
    return BankError(path, key, problem)


def _check_template(text, question: bool) -> str:
    """The template with single spaces; ValueError naming the first problem."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("must be a non-empty string")
    text = " ".join(text.split())
    for ph in PLACEHOLDER.findall(text):
        if ph not in (SUBJECT, ARTICLE):
            raise ValueError(f"unknown placeholder {ph} (allowed {SUBJECT}, {ARTICLE})")
    if text.count(SUBJECT) != 1:
        raise ValueError(f"needs exactly one {SUBJECT} placeholder")
    if "{" in PLACEHOLDER.sub("", text) or "}" in PLACEHOLDER.sub("", text):
        raise ValueError("unbalanced brace")
    if re.search(r"\{a\}(?! [A-Za-z])", text):
        raise ValueError("{a} must be followed by a word")
    if question:
        if not text.endswith("?") or text.count("?") != 1:
            raise ValueError("a main template must end with a single question mark")
        if not (text.startswith(SUBJECT) or text[0].isupper()):
            raise ValueError("a main template starts with a capital letter or {subject}")
    elif "?" in text:
        raise ValueError("a sub-clause template has no question mark")
    rendered = text.replace(SUBJECT, "this thing").replace(ARTICLE, "a")
    if not re.search(r"[A-Za-z]", rendered.replace("this thing", "")):
        raise ValueError("renders to no words besides the subject")
    return text


def _parse_choices(raw) -> tuple[Choice, ...]:
    """A closed set of at least 4 labels (or {label, aliases}) no two of which normalize alike."""
    if not isinstance(raw, (list, tuple)) or len(raw) < 4:
        raise ValueError("a fixed property needs a closed set of at least 4 choices")
    choices: list[Choice] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(raw):
        try:
            choice = Choice(label=entry) if isinstance(entry, str) else Choice.model_validate(entry)
        except ValidationError:
            raise PydanticCustomError("bank", "{problem}", {"at": f"[{i}]", "problem": "expected a label or {label, aliases}"})
        for name in [choice.label, *choice.aliases]:
            norm = normalize_text(name)
            if not norm:
                raise PydanticCustomError("bank", "{problem}", {"at": f"[{i}]", "problem": "empty label or alias"})
            if norm in seen:
                raise PydanticCustomError("bank", "{problem}", {"at": f"[{i}]", "problem": f"{name!r} repeats choice {seen[norm]}"})
            seen[norm] = i
        choices.append(choice)
    return tuple(choices)
