"""The README and docs/: short enough to be a door, and every link and file path in them points at something."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "decisions").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_PATH = re.compile(r"`((?:edgevoice|tests|scripts|packaging|models|docs)/[^`\s]*)`")


def _targets(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_at_most_200_lines() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_the_docs_exist() -> None:
    names = {p.name for p in PAGES}
    for name in ("live-loop.md", "knowledge.md", "service.md", "models.md", "measuring.md", "faults.md"):
        assert name in names
    decisions = ROOT / "docs" / "decisions"
    days = sorted(p.stem for p in decisions.glob("????-??-??.md"))
    assert days, "the decisions log has a file a day under docs/decisions/"
    index = (decisions / "README.md").read_text()
    assert [day for day in days if f"({day}.md)" not in index] == []  # each day listed in the index


def test_every_relative_link_resolves() -> None:
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in PAGES
        for target in _targets(page)
        if not (page.parent / target.split("#")[0]).exists()
    ]
    assert broken == []


def _exists(span: str) -> bool:
    """A path in the checkout, and for ``tests/x.py::name`` a test function of that name in it."""
    path, _, test = span.partition("::")
    if not (ROOT / path).exists():
        return False
    return not test or re.search(rf"^def {re.escape(test)}\(", (ROOT / path).read_text(), re.M) is not None


def test_every_file_path_named_in_code_spans_exists() -> None:
    broken = [
        f"{page.relative_to(ROOT)}: {span}"
        for page in PAGES
        for span in CODE_PATH.findall(page.read_text())
        if not _exists(span)
    ]
    assert broken == []
