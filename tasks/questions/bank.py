"""The template bank: property templates, domains, unit and predicate renderings, loaded from YAML.

Loading validates everything and raises ``BankError`` naming the file and key of the first
problem, so a template that cannot render never reaches a build. Format: templates/README.md.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from reasonvqa.paths import TEMPLATES_DIR
from reasonvqa.tasks.questions.text import normalize_predicate, normalize_text

CATEGORIES = ("fixed", "date", "number", "literal")
VALUE_KINDS = ("item", "quantity", "time", "string")
ALLOWED_VALUES = {"fixed": ("item", "string"), "date": ("time",), "number": ("quantity",), "literal": ("item", "string")}
# Properties that name an object's class ("this skyscraper"); always fetched, whatever the domains.
NAMING_PROPERTIES = ("P31", "P279")
SUBJECT = "{subject}"
ARTICLE = "{a}"
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
PROPERTY_KEYS = {"label", "category", "value", "domains", "main", "sub", "choices", "number", "date", "time_varying"}
NUMBER_KEYS = {"decimals", "spread", "thousands"}
DATE_KEYS = {"window_years", "max_precision"}


class BankError(ValueError):
    """A template bank file that cannot be used; the message names the file and key."""

    def __init__(self, path: Path, key: str, problem: str):
        super().__init__(f"{path}: {key}: {problem}")
        self.path, self.key, self.problem = path, key, problem


@dataclass(frozen=True)
class Choice:
    """One member of a closed answer set: the label shown and the labels that match it."""

    label: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class NumberFormat:
    decimals: int | None = None  # None = automatic (about 3 significant digits, never more than the value has)
    spread: float = 0.1  # distractor step as a share of the answer, rounded to 1/2/5 x 10^n
    thousands: bool = True  # 1,234,567


@dataclass(frozen=True)
class DateFormat:
    window_years: int = 20  # distractors lie within this many years of the answer
    max_precision: int = 11  # 9 year, 10 month, 11 day: never render finer than this


@dataclass(frozen=True)
class PropertyTemplate:
    """Templates and rendering rules of one Wikidata property."""

    property_id: str
    label: str
    category: str
    value: str
    domains: tuple[str, ...]
    main: str
    sub: str | None
    choices: tuple[Choice, ...] = ()
    number: NumberFormat = field(default_factory=NumberFormat)
    date: DateFormat = field(default_factory=DateFormat)
    # the value changes over time (population, head of government): asked only with its P585
    # point in time ("... as of 2020?"), never as an inner hop
    time_varying: bool = False
    source: str = ""

    @property
    def main_id(self) -> str:
        return f"{self.property_id}:main"

    @property
    def sub_id(self) -> str:
        return f"{self.property_id}:sub"


@dataclass(frozen=True)
class UnitFormat:
    symbol: str
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
            properties[pid] = _parse_property(path, pid, spec, set(domains))
    _check_compositions(prop_dir, properties)
    fixed_files = ("units.yaml", "predicates.yaml", "naming.yaml")
    hashed = [domains_path, *(templates_dir / name for name in fixed_files), *files]
    digest = hashlib.sha256()
    for path in hashed:
        digest.update(path.relative_to(templates_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return TemplateBank(
        version=digest.hexdigest()[:16],
        domains=domains,
        domain_slugs=slugs,
        properties=properties,
        units=units,
        predicates=predicates,
        naming_avoid=naming_avoid,
        root=templates_dir,
    )


def _read_yaml(path: Path):
    if not path.exists():
        raise BankError(path, "<file>", "missing")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
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
        if not isinstance(spec, dict) or not isinstance(spec.get("symbol"), str) or not spec["symbol"].strip():
            raise BankError(path, f"units.{qid}", "needs a non-empty symbol")
        extra = set(spec) - {"symbol", "space"}
        if extra:
            raise BankError(path, f"units.{qid}", f"unknown keys {sorted(extra)}")
        units[str(qid)] = UnitFormat(symbol=spec["symbol"], space=bool(spec.get("space", True)))
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


def _parse_property(path: Path, pid: str, spec, known_domains: set[str]) -> PropertyTemplate:
    if not re.fullmatch(r"P[1-9]\d*", pid):
        raise BankError(path, pid, "key must be a Wikidata property id (P123)")
    if not isinstance(spec, dict):
        raise BankError(path, pid, "expected a mapping")
    unknown = set(spec) - PROPERTY_KEYS
    if unknown:
        raise BankError(path, f"{pid}.{sorted(unknown)[0]}", f"unknown key (allowed: {sorted(PROPERTY_KEYS)})")
    for key in ("label", "category", "value", "domains", "main"):
        if key not in spec:
            raise BankError(path, f"{pid}.{key}", "missing")
    label, category, value = spec["label"], spec["category"], spec["value"]
    if not isinstance(label, str) or not label.strip():
        raise BankError(path, f"{pid}.label", "must be a non-empty string")
    if category not in CATEGORIES:
        raise BankError(path, f"{pid}.category", f"{category!r} is not one of {CATEGORIES}")
    if value not in ALLOWED_VALUES[category]:
        raise BankError(path, f"{pid}.value", f"{value!r} does not fit category {category} (allowed {ALLOWED_VALUES[category]})")
    domains = spec["domains"]
    if not isinstance(domains, list) or not domains:
        raise BankError(path, f"{pid}.domains", "must be a non-empty list")
    for d in domains:
        if d not in known_domains:
            raise BankError(path, f"{pid}.domains", f"unknown domain {d!r} (see domains.yaml)")
    main = _check_template(path, f"{pid}.main", spec["main"], question=True)
    sub = spec.get("sub")
    if sub is not None:
        if value != "item":
            raise BankError(path, f"{pid}.sub", "only item-valued properties can be sub-clauses")
        sub = _check_template(path, f"{pid}.sub", sub, question=False)
    choices: tuple[Choice, ...] = ()
    if category == "fixed":
        choices = _parse_choices(path, pid, spec.get("choices"))
    elif "choices" in spec:
        raise BankError(path, f"{pid}.choices", "only fixed-category properties have a closed choice set")
    number = NumberFormat()
    if "number" in spec:
        if category != "number":
            raise BankError(path, f"{pid}.number", "only number-category properties have number formatting")
        number = _parse_number(path, pid, spec["number"])
    date = DateFormat()
    if "date" in spec:
        if category != "date":
            raise BankError(path, f"{pid}.date", "only date-category properties have date rendering")
        date = _parse_date(path, pid, spec["date"])
    time_varying = spec.get("time_varying", False)
    if not isinstance(time_varying, bool):
        raise BankError(path, f"{pid}.time_varying", "must be true or false")
    return PropertyTemplate(
        property_id=pid,
        time_varying=time_varying,
        label=label,
        category=category,
        value=value,
        domains=tuple(domains),
        main=main,
        sub=sub,
        choices=choices,
        number=number,
        date=date,
        source=path.name,
    )


def _check_template(path: Path, key: str, text, question: bool) -> str:
    if not isinstance(text, str) or not text.strip():
        raise BankError(path, key, "must be a non-empty string")
    text = " ".join(text.split())
    for ph in PLACEHOLDER.findall(text):
        if ph not in (SUBJECT, ARTICLE):
            raise BankError(path, key, f"unknown placeholder {ph} (allowed {SUBJECT}, {ARTICLE})")
    if text.count(SUBJECT) != 1:
        raise BankError(path, key, f"needs exactly one {SUBJECT} placeholder")
    if "{" in PLACEHOLDER.sub("", text) or "}" in PLACEHOLDER.sub("", text):
        raise BankError(path, key, "unbalanced brace")
    if re.search(r"\{a\}(?! [A-Za-z])", text):
        raise BankError(path, key, "{a} must be followed by a word")
    if question:
        if not text.endswith("?") or text.count("?") != 1:
            raise BankError(path, key, "a main template must end with a single question mark")
        if not (text.startswith(SUBJECT) or text[0].isupper()):
            raise BankError(path, key, "a main template starts with a capital letter or {subject}")
    elif "?" in text:
        raise BankError(path, key, "a sub-clause template has no question mark")
    rendered = text.replace(SUBJECT, "this thing").replace(ARTICLE, "a")
    if not re.search(r"[A-Za-z]", rendered.replace("this thing", "")):
        raise BankError(path, key, "renders to no words besides the subject")
    return text


def _parse_choices(path: Path, pid: str, raw) -> tuple[Choice, ...]:
    if not isinstance(raw, list) or len(raw) < 4:
        raise BankError(path, f"{pid}.choices", "a fixed property needs a closed set of at least 4 choices")
    choices, seen = [], {}
    for i, entry in enumerate(raw):
        if isinstance(entry, str):
            label, aliases = entry, []
        elif isinstance(entry, dict) and isinstance(entry.get("label"), str) and set(entry) <= {"label", "aliases"}:
            label, aliases = entry["label"], entry.get("aliases") or []
        else:
            raise BankError(path, f"{pid}.choices[{i}]", "expected a label or {label, aliases}")
        for name in [label, *aliases]:
            norm = normalize_text(str(name))
            if not norm:
                raise BankError(path, f"{pid}.choices[{i}]", "empty label or alias")
            if norm in seen:
                raise BankError(path, f"{pid}.choices[{i}]", f"{name!r} repeats choice {seen[norm]}")
            seen[norm] = i
        choices.append(Choice(label=label, aliases=tuple(str(a) for a in aliases)))
    return tuple(choices)


def _parse_number(path: Path, pid: str, raw) -> NumberFormat:
    if not isinstance(raw, dict) or set(raw) - NUMBER_KEYS:
        raise BankError(path, f"{pid}.number", f"expected a mapping with keys among {sorted(NUMBER_KEYS)}")
    decimals = raw.get("decimals", "auto")
    if decimals == "auto":
        decimals = None
    elif not isinstance(decimals, int) or isinstance(decimals, bool) or not 0 <= decimals <= 6:
        raise BankError(path, f"{pid}.number.decimals", "must be 'auto' or an integer 0..6")
    spread = raw.get("spread", 0.1)
    if not isinstance(spread, (int, float)) or not 0 < spread <= 1:
        raise BankError(path, f"{pid}.number.spread", "must be a number in (0, 1]")
    return NumberFormat(decimals=decimals, spread=float(spread), thousands=bool(raw.get("thousands", True)))


def _parse_date(path: Path, pid: str, raw) -> DateFormat:
    if not isinstance(raw, dict) or set(raw) - DATE_KEYS:
        raise BankError(path, f"{pid}.date", f"expected a mapping with keys among {sorted(DATE_KEYS)}")
    window = raw.get("window_years", 20)
    if not isinstance(window, int) or isinstance(window, bool) or window < 2:
        raise BankError(path, f"{pid}.date.window_years", "must be an integer >= 2")
    precision = raw.get("max_precision", 11)
    if precision not in (9, 10, 11):
        raise BankError(path, f"{pid}.date.max_precision", "must be 9 (year), 10 (month) or 11 (day)")
    return DateFormat(window_years=window, max_precision=precision)
