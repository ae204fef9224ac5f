"""Install the repository's root folders under the one ``reasonvqa`` namespace.

``tasks/`` installs as ``reasonvqa.tasks``, ``data/`` as ``reasonvqa.data`` and so on, so nothing
generic lands at the top of site-packages. Sub-packages are discovered, so a new stage folder
needs no edit here. Everything else about the project is in pyproject.toml.
"""

from setuptools import find_packages, setup

ROOT_FOLDERS = ("flows", "tasks", "knowledge", "templates", "annotation_exports", "data")
RESOURCE_PATTERNS = ["**/*.yaml", "**/*.yml", "**/*.md", "**/*.txt", "**/*.json", "**/*.xml"]

package_dir = {"reasonvqa": "reasonvqa", **{f"reasonvqa.{folder}": folder for folder in ROOT_FOLDERS}}
packages = ["reasonvqa"]
for folder in ROOT_FOLDERS:
    packages.append(f"reasonvqa.{folder}")
    packages += [f"reasonvqa.{folder}.{sub}" for sub in find_packages(where=folder)]

setup(
    package_dir=package_dir,
    packages=packages,
    package_data={
        "reasonvqa.templates": RESOURCE_PATTERNS,
        # the bundled sample and knowledge: every file (csv, json, gz, licenses)
        "reasonvqa.data": ["**/*"],
    },
)
