"""Publish the repository files the docs pages show (the benchmark charts) inside the site.

The pages link them by their place in the repository (``../bench/results/goals.png``), so
the same Markdown reads right on a code host; the site serves a copy under ``repository/``
and the links are pointed there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

#: Folders of the repository whose files the site serves, relative to the repository root.
PUBLISHED = ("bench/results",)
SITE_FOLDER = "repository"

_LINK = re.compile(r"\]\((?:\.\./)+(" + "|".join(re.escape(p) for p in PUBLISHED) + r")/")


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).parent


def on_files(files: Files, config: Any) -> Files:
    """Add each published file as a file of the site."""
    root = _root(config)
    for folder in PUBLISHED:
        for path in sorted((root / folder).glob("*.png")):
            uri = f"{SITE_FOLDER}/{folder}/{path.name}"
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Point a page's links to published repository files at their copy in the site."""
    depth = page.file.src_uri.count("/")
    prefix = "../" * depth + SITE_FOLDER
    return _LINK.sub(lambda m: f"]({prefix}/{m.group(1)}/", markdown)
