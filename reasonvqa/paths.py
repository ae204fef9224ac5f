"""Well-known folders of the installed package (bundled data and the template bank).

The repository's root folders install as ``reasonvqa.data`` and ``reasonvqa.templates``
(see setup.py); their location comes from ``importlib.resources``, so an editable checkout
and a wheel install find the same files.
"""

from importlib.resources import files
from pathlib import Path

PACKAGE_DIR = Path(str(files("reasonvqa")))
DATA_DIR = Path(str(files("reasonvqa.data")))
SAMPLE_DIR = DATA_DIR / "sample"
TEMPLATES_DIR = Path(str(files("reasonvqa.templates")))

# Folders whose absolute location differs between installs; configs name them relatively.
RESOURCE_ROOTS = {"data": DATA_DIR, "templates": TEMPLATES_DIR}
