"""Serve Mermaid from the site itself, pinned, instead of the CDN Material would load it from.

A reader's browser then fetches nothing from a third party, and the site renders its
diagrams offline (the browser check runs without the internet). The script comes from the
npm registry once, into .cache/docs/, with npm's own integrity check.
"""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

#: The major version Material for MkDocs 9 loads (its bundle asks for mermaid@11).
VERSION = "11.17.2"
SITE_PATH = "assets/javascripts/mermaid.min.js"
MEMBER = "package/dist/mermaid.min.js"


def _script(root: Path) -> Path:
    """The pinned mermaid.min.js, fetched with ``npm pack`` the first time."""
    folder = root / ".cache" / "docs" / f"mermaid-{VERSION}"
    script = folder / "mermaid.min.js"
    if script.exists():
        return script
    folder.mkdir(parents=True, exist_ok=True)
    try:
        packed = subprocess.run(
            ["npm", "pack", f"mermaid@{VERSION}", "--pack-destination", str(folder), "--silent"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as failure:
        raise PluginError(f"cannot fetch mermaid@{VERSION} with npm pack: {failure}") from failure
    archive = folder / packed.splitlines()[-1]
    with tarfile.open(archive) as tar:
        member = tar.extractfile(MEMBER)
        if member is None:
            raise PluginError(f"{archive} has no {MEMBER}")
        script.write_bytes(member.read())
    archive.unlink()
    return script


def on_post_page(output: str, page: Any, config: Any) -> str:
    """Load the script on the pages that draw diagrams, before Material looks for
    ``mermaid`` (it renders them once the document has loaded)."""
    if 'class="mermaid"' not in output:
        return output
    up = "../" * page.url.count("/")
    return output.replace("</body>", f'<script src="{up}{SITE_PATH}"></script>\n</body>', 1)


def on_files(files: Files, config: Any) -> Files:
    """Add the pinned script to the site."""
    root = Path(config["config_file_path"]).parent
    files.append(File.generated(config, SITE_PATH, abs_src_path=str(_script(root))))
    return files
