"""Check that the Markdown links of the README and docs/ resolve inside the repository.

``python scripts/check_links.py README.md docs`` (``make docs`` runs it) reads
every Markdown file named or found under a named folder and checks each link
``[text](target)``:

- a relative path must name a file or folder that exists and lies inside the
  repository (a clone must explain itself: no ``../shared/...``);
- a ``#anchor`` (alone, or after a ``.md`` path) must be a heading of that
  file, spelt as the hosting site and MyST (``myst_heading_anchors``) spell
  it: lower case, punctuation dropped, spaces to hyphens;
- a path written as code that climbs out (``../shared/DESIGN.md``) counts
  as a link out of the repository;
- a URL (``https://...``) is never fetched (CI has no internet); the README
  may hold none at all, since everything it points to must ship with it.

Links inside code spans and fenced blocks are not links. Exits 1 listing
every broken link, 0 when there are none.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
OUTSIDE_PATH = re.compile(r"`((?:\.\./)+[^`\s]*)`")
URL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def prose_lines(text: str, keep_code: bool = False) -> list[tuple[int, str]]:
    """(line number, line) outside fenced blocks, inline code spans blanked unless kept."""
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = re.match(r"^\s*(```+|~~~+)", line)
        if opening:
            marker = opening.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is None:
            lines.append((number, line if keep_code else re.sub(r"`+[^`]*`+", "``", line)))
    return lines


def slug(heading: str) -> str:
    """The anchor of a heading: GitHub's rule, which MyST's heading anchors follow."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def heading_anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (repeats get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    fence: str | None = None
    for line in path.read_text().splitlines():
        opening = re.match(r"^\s*(```+|~~~+)", line)
        if opening:
            marker = opening.group(1)
            fence = marker if fence is None else (None if marker.startswith(fence) else fence)
            continue
        heading = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading is None:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def check_file(path: Path) -> list[str]:
    """The broken links of one Markdown file, each as ``file:line: target: why``."""
    problems: list[str] = []
    where = path.relative_to(ROOT)
    is_readme = path == ROOT / "README.md"
    for number, line in prose_lines(path.read_text()):
        for match in [*LINK.finditer(line), *IMAGE.finditer(line)]:
            target = match.group(1)
            why = check_target(path, target, is_readme)
            if why:
                problems.append(f"{where}:{number}: {target}: {why}")
    # A path written as code is still a pointer: ``../shared/DESIGN.md`` sends
    # a reader out of the clone as surely as a link does.
    for number, line in prose_lines(path.read_text(), keep_code=True):
        for match in OUTSIDE_PATH.finditer(line):
            if not (path.parent / match.group(1)).resolve().is_relative_to(ROOT):
                problems.append(
                    f"{where}:{number}: {match.group(1)}: names a path outside the repository"
                )
    return problems


def check_target(source: Path, target: str, is_readme: bool) -> str | None:
    """Why ``target`` (linked from ``source``) is broken, or None when it resolves."""
    if URL.match(target):
        if is_readme:
            return "the README links only to files of the repository (move the text into docs/)"
        return None  # docs/ may cite the web; CI never fetches it
    relative, _, anchor = target.partition("#")
    resolved = (source.parent / relative).resolve() if relative else source
    if not resolved.is_relative_to(ROOT):
        return "leaves the repository; a clone must hold what it links to"
    if not resolved.exists():
        return f"no such file or folder ({resolved.relative_to(ROOT)})"
    if anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved):
        return f"no heading with anchor #{anchor} in {resolved.relative_to(ROOT)}"
    return None


def markdown_files(arguments: list[str]) -> list[Path]:
    """The Markdown files named, and those under the folders named."""
    files: list[Path] = []
    for argument in arguments:
        path = (ROOT / argument).resolve()
        files += sorted(path.rglob("*.md")) if path.is_dir() else [path]
    return files


def main(arguments: list[str]) -> int:
    """Check the files; print the broken links; 1 if there are any."""
    files = markdown_files(arguments or ["README.md", "docs"])
    problems = [problem for path in files for problem in check_file(path)]
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"links: {len(files)} Markdown files, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
