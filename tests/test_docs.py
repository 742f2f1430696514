"""Every ```python block of README.md and docs/ runs, as pasted, against a real embedded server.

The docs' server URL ``redis://127.0.0.1:6379/0`` is replaced by the test server's. A block that
cannot run here says so on the line before it: ``<!-- docs-test: skip (reason) -->``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tenure.testing import EmbeddedServer

ROOT = Path(__file__).parent.parent
DOCS_URL = "redis://127.0.0.1:6379/0"
FENCE = re.compile(r"^```python\s*$")
SKIP = re.compile(r"^<!-- docs-test: skip \((?P<reason>[^)]+)\) -->$")


@dataclass
class Block:
    path: Path
    line: int
    code: str
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        if FENCE.match(lines[index]):
            start = index + 1
            end = start
            while not lines[end].startswith("```"):
                end += 1
            previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
            marker = SKIP.match(previous.strip())
            found.append(
                Block(path, start, "\n".join(lines[start:end]) + "\n",
                      marker["reason"] if marker else None)
            )
            index = end
        index += 1
    return found


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [block for page in PAGES for block in blocks(page)]


def test_the_docs_have_code_blocks() -> None:
    assert len(BLOCKS) >= 15
    assert any(b.path.name == "README.md" for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_code_block_runs(block: Block, tenure_server: EmbeddedServer) -> None:
    if block.skip is not None:
        pytest.skip(block.skip)
    code = block.code.replace(DOCS_URL, tenure_server.url)
    exec(compile(code, block.id, "exec"), {"__name__": "__docs__"})


def test_a_python_block_left_unmarked_would_run() -> None:
    """The skip marker must sit right before its block, or the block runs."""
    page = ROOT / "docs" / "testing.md"
    skipped = [b for b in blocks(page) if b.skip]
    assert skipped
    assert all("--8<--" in b.code or "fakeredis" in b.code for b in skipped)
