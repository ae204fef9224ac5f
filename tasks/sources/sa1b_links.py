"""The SA-1B links file: the ``file_name<TAB>cdn_link`` list users download the tar shards with."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

HEADER = ("file_name", "cdn_link")
TAR_NAME = re.compile(r"sa_\d{6}\.tar")


class LinksFileError(ValueError):
    """A links file line that is not ``sa_NNNNNN.tar<TAB>https://...``; the message names file and line."""


def read_links(path: Path) -> dict[str, str]:
    """Tar name -> download link, in file order. Raises LinksFileError naming the first bad line."""
    links: dict[str, str] = {}
    with open(path, encoding="utf-8", newline="") as handle:
        for line_no, line in enumerate(handle, start=1):
            fields = line.rstrip("\r\n").split("\t")
            where = f"{path.name}:{line_no}"
            if line_no == 1:
                if tuple(f.strip().lower() for f in fields) != HEADER:
                    raise LinksFileError(f"{where}: header must be 'file_name<TAB>cdn_link', got {line.strip()!r}")
                continue
            if fields == [""]:
                continue  # blank line (e.g. at the end)
            if len(fields) != 2:
                raise LinksFileError(f"{where}: expected 2 tab-separated fields, got {len(fields)}")
            name, link = fields[0].strip(), fields[1].strip()
            if not TAR_NAME.fullmatch(name):
                raise LinksFileError(f"{where}: file name {name!r} is not sa_NNNNNN.tar")
            parts = urlsplit(link)
            if parts.scheme != "https" or not parts.netloc:
                raise LinksFileError(f"{where}: link for {name} is not an https URL")
            if name in links:
                raise LinksFileError(f"{where}: {name} is listed twice")
            links[name] = link
    return links
