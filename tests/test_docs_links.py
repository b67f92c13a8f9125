"""Every relative link of README.md and docs/*.md, and every ``docs/<file>.md#<anchor>`` named
in the code, points at a file that exists and, with an anchor, at a heading of that file.

Anchors are GitHub's: the heading's text in lower case, every character that is not a
letter, digit, space, hyphen or underscore dropped, spaces turned into hyphens; a repeated
heading gets ``-1``, ``-2`` ... Headings inside code fences do not count.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_REF = re.compile(r"\b(docs/[\w.-]+\.md)#([\w-]+)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text (inline code marks dropped, as GitHub shows them)."""
    text = heading.replace("`", "").strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every anchor the headings of a Markdown text define (outside code fences)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """The relative links of one Markdown file whose target file or anchor does not exist."""
    text = path.read_text(encoding="utf-8")
    bad = []
    for link in MD_LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", link):  # http:, https:, mailto: ...
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            bad.append(f"{link} (no file {target})")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text("utf-8")):
            bad.append(f"{link} (no heading with anchor #{anchor} in {target or path.name})")
    return bad


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_slug_matches_githubs_rule():
    assert slug("Torch threads (issue 14)") == "torch-threads-issue-14"
    assert slug("Curriculum (issue 15): a long delay") == "curriculum-issue-15-a-long-delay"
    assert slug("Dale init at 80/20 (issue 12)") == "dale-init-at-8020-issue-12"
    assert slug("`snrl train` and `--set`") == "snrl-train-and---set"
    assert anchors("# A\n## A\n```\n# B\n```\n") == {"a", "a-1"}


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path):
    (tmp_path / "b.md").write_text("# Speed (issue 11)\n", encoding="utf-8")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md#speed-issue-11) [gone](c.md) [moved](b.md#layers) [web](https://x.org/#y)\n"
        "```\n[in a fence](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "c.md (no file c.md)",
        "b.md#layers (no heading with anchor #layers in b.md)",
    ]


def test_every_doc_link_resolves():
    bad = {str(p.relative_to(ROOT)): broken_links(p) for p in doc_files()}
    assert not {k: v for k, v in bad.items() if v}


def test_every_anchor_named_in_the_code_exists():
    bad = []
    for folder in ("snrl", "benchmarks", "tests", "examples"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in {".py", ".toml", ".c"} or not path.is_file():
                continue
            for doc, anchor in CODE_REF.findall(path.read_text(encoding="utf-8")):
                target = ROOT / doc
                if not target.exists() or anchor not in anchors(target.read_text("utf-8")):
                    bad.append(f"{path.relative_to(ROOT)}: {doc}#{anchor}")
    assert not bad
