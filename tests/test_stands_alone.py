"""The repository stands alone: its code and docs cite no document a reader cannot open.

Facts taken from notes kept outside the repository are written here in the project's own
words; a citation of such a note (by its file name) is a dead end for every user.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The notes that live outside the repository, by the names code and docs used to cite them.
OUTSIDE = ("storm-semantics", "spark-io-notes", "kafka-notes", "STYLE.md", "shared/")
SCANNED = ("src", "tests", "bench", "examples", "scripts")
SUFFIXES = {".py", ".md", ".cfg", ".toml", ".sh", ".js", ".html", ".css", ".txt"}


def _files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "setup.cfg", ROOT / "pyproject.toml"]
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            parts = path.relative_to(ROOT).parts
            if (
                path.suffix in SUFFIXES
                and path.is_file()
                and path != Path(__file__).resolve()
                and not any(p.endswith(".egg-info") or p == "__pycache__" for p in parts)
            ):
                found.append(path)
    return found


def test_nothing_cites_a_document_outside_the_repository() -> None:
    pattern = re.compile("|".join(re.escape(name) for name in OUTSIDE))
    cited = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _files()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert cited == []


def test_the_scan_reads_the_sources_and_the_readme() -> None:
    scanned = {path.relative_to(ROOT).as_posix() for path in _files()}
    assert {"README.md", "src/engine/_columnar/xor.py", "src/acker_kernel/_batch.py"} <= scanned
