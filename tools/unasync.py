"""Generate the sync driver (and sync tests) from their asyncio source.

``src/tenure/aio`` is the only authored driver; ``src/tenure/sync`` is made from it line by
line with the substitution table below (in the style of httpcore's ``scripts/unasync.py``),
and likewise ``tests/_async`` -> ``tests/_sync``. Every substitution keeps the line count, so
a line of a generated file has the number of its source line. Line 1 of every source file is
a comment; the generated file's line 1 says which file to edit instead.

    python tools/unasync.py           # regenerate
    python tools/unasync.py --check   # exit 1 if a generated file is stale or missing, a
                                      # stray file sits in a generated folder, or a rule
                                      # matched nothing (CI runs this)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FOLDERS = [
    (ROOT / "src/tenure/aio", ROOT / "src/tenure/sync"),
    (ROOT / "tests/_async", ROOT / "tests/_sync"),
]

RULES: list[tuple[str, str]] = [
    # asyncio syntax
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"__anext__", "__next__"),
    # names: AsyncLock -> Lock, async_sleep -> sleep, aclose -> close
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"\basync_(\w+)", r"\1"),
    (r"\baclose\b", "close"),
    # a plain def that returns the runner's awaitable (so the owner is fixed at the call)
    (r"\bAwaitable\[(.*?)\]", r"\1"),
    # a decorator's wrapper: a coroutine function returning R becomes a function returning R
    (r"\bCoroutine\[Any, Any, (\w+)\]", r"\1"),
    # modules
    (r"\btenure\.aio\b", "tenure.sync"),
]

HEADER = "# GENERATED from {source} by tools/unasync.py: edit that file, not this one.\n"


def convert(lines: list[str], used: set[int]) -> list[str]:
    out = []
    for line in lines:
        for index, (pattern, replacement) in enumerate(RULES):
            new = re.sub(pattern, replacement, line)
            if new != line:
                used.add(index)
                line = new
        out.append(line)
    return out


def generate(used: set[int]) -> tuple[dict[Path, str], list[str]]:
    """Every generated file's content by path, and the problems found in the sources."""
    files: dict[Path, str] = {}
    problems: list[str] = []
    for source_dir, target_dir in FOLDERS:
        if not source_dir.is_dir():
            continue
        for source in sorted(source_dir.rglob("*.py")):
            relative = source.relative_to(ROOT)
            lines = source.read_text("utf-8").splitlines(keepends=True)
            if not lines or not lines[0].startswith("#"):
                problems.append(f"{relative}: line 1 must be a comment (the generated header)")
                continue
            body = convert(lines[1:], used)
            target = target_dir / source.relative_to(source_dir)
            files[target] = HEADER.format(source=relative.as_posix()) + "".join(body)
    return files, problems


def main(argv: list[str]) -> int:
    check = "--check" in argv
    used: set[int] = set()
    files, problems = generate(used)
    for index, (pattern, _) in enumerate(RULES):
        if index not in used:
            problems.append(f"rule {pattern!r} matched nothing: remove it from tools/unasync.py")
    stale = []
    for target, content in files.items():
        current = target.read_text("utf-8") if target.exists() else None
        if current != content:
            stale.append(target)
            if not check:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content, "utf-8")
    for source_dir, target_dir in FOLDERS:
        if source_dir.is_dir() and target_dir.is_dir():
            for extra in sorted(target_dir.rglob("*.py")):
                # a target whose source exists but was refused (see problems) is kept
                source = source_dir / extra.relative_to(target_dir)
                if extra not in files and not source.exists():
                    if check:
                        problems.append(f"{extra.relative_to(ROOT)} has no source in {source_dir}")
                    else:
                        extra.unlink()
    if check:
        problems += [f"{t.relative_to(ROOT)} is stale: run python tools/unasync.py" for t in stale]
    for problem in problems:
        print(problem, file=sys.stderr)
    if not check:
        print(f"unasync: {len(stale)} of {len(files)} generated files written")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
