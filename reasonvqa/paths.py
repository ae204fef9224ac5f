"""Well-known folders of the repository."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "data"
SAMPLE_DIR = DATA_DIR / "sample"
TEMPLATES_DIR = REPO_ROOT / "templates"
