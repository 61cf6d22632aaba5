"""mkdocs hook: the site's home page is the README, read at build time.

docs/index.md was a hand-made copy of the README and drifted from it (a missing cost section,
an old install line). The page now holds one comment, and this hook serves the README in its
place, with its links made relative to docs/ (`docs/client.md` -> `client.md`).
"""
from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent / "README.md"
_DOCS_LINK = re.compile(r'(\]\(|src=")docs/')


def home_page_source(readme: str) -> str:
    """The README as a page inside docs/: its links to docs/X point at X."""
    return _DOCS_LINK.sub(r"\1", readme).replace("](index.md)", "](#the-reference)")


def on_page_read_source(page, config):  # noqa: ANN001 - mkdocs' hook signature
    if page.file.src_uri == "index.md":
        return home_page_source(README.read_text(encoding="utf-8"))
    return None
