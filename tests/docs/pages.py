"""The code blocks of the README and of every page under docs/, with what each one's
marker says, and how to run one as a reader would.

The convention (docs/contributing.md says it to writers):

- A ```` ```python ```` block is a whole program: the tests write it to a file in a fresh
  folder and run it there with a new interpreter, with none of the suite's SAVEGAME_
  variables, and it must exit 0. ```` ```python title="agent.py" ```` names the file (the
  tutorial's files); the title is shown above the block on the site.
- An HTML comment on the line before the fence, ``<!-- test: WORDS -->``, invisible on
  the site and on GitHub, says otherwise:

  ``fragment``
      a piece of a program, shown for its shape; not run. The tests count and list
      them (tests/docs/test_blocks.py pins the number), so they stay few.
  ``continues``
      runs after the page's previous python block, as one file (that block runs alone
      too): a page that builds a program in steps.
  ``by tests/PATH.py``
      a test of its own runs it (a scripted model server, a SIGKILL, assertions on what
      it prints); the harness checks that the file exists and reads this page.
  ``store=postgres`` / ``store=redis``
      runs with ``SAVEGAME_STORE`` naming a fresh, empty store of that backend, from
      tests/services.py (skipped without the server, failed in CI).

- A ```` ```bash ````/```` ```console ```` block's ``savegame ...`` lines (``$ `` prompts
  and ``# comments`` taken off) must parse with the CLI's own parser: the command, its
  subcommand and every option exist (tests/docs/test_commands.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import savegame

ROOT = Path(__file__).resolve().parents[2]
SRC = str(Path(savegame.__file__).resolve().parents[1])

MARKER = re.compile(r"^\s*<!--\s*test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)(?P<rest>.*)$")
TITLE = re.compile(r'title="([^"]+)"')
HEADING = re.compile(r"^(#{1,6}) (.*)$")
KINDS = {"fragment", "continues", "by", "store"}


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str
    """Its file, relative to the repository (``docs/guides/effects.md``)."""
    line: int
    """The line of its opening fence, from 1."""
    lang: str
    title: str | None
    marker: tuple[str, ...]
    """The words of its ``<!-- test: ... -->`` comment, if any."""
    code: str
    section: str
    """The nearest heading above it."""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def kind(self) -> str:
        """``run`` (the default), or the marker's first word (``store=...``: ``store``)."""
        return self.marker[0].split("=")[0] if self.marker else "run"

    def option(self, name: str) -> str | None:
        for word in self.marker:
            key, _, value = word.partition("=")
            if key == name:
                return value
        return None


def pages() -> list[Path]:
    """The README and every markdown page of the site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text().split("\n")
    section, marker, n = "", (), 0
    while n < len(lines):
        line = lines[n]
        if (heading := HEADING.match(line)) is not None:
            section = heading[2]
        if (found := MARKER.match(line)) is not None:
            marker = tuple(found[1].split())
            n += 1
            continue
        opening = FENCE.match(line)
        if opening is None:
            if line.strip():
                marker = ()
            n += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        start = n + 1
        n += 1
        while n < len(lines) and not lines[n].strip().startswith(fence):
            text = lines[n]
            body.append(text[indent:] if text[:indent].strip() == "" else text.lstrip())
            n += 1
        title = TITLE.search(opening["rest"])
        yield Block(
            page=str(page.relative_to(ROOT)),
            line=start,
            lang=opening["lang"],
            title=title[1] if title else None,
            marker=marker,
            code="\n".join(body) + "\n",
            section=section,
        )
        marker = ()
        n += 1


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def program(block: Block) -> str:
    """What runs for ``block``: its code, after the page's previous python block when it
    ``continues`` one (and that one's own predecessors)."""
    if block.kind() != "continues":
        return block.code
    before = [b for b in blocks(ROOT / block.page) if b.lang == "python" and b.line < block.line]
    assert before, f"{block.where}: marked 'continues', but no python block comes before it"
    return program(before[-1]) + "\n" + block.code


def doc_example(page: str, containing: str | None = None) -> str:
    """The first python block of ``page`` (the first holding ``containing``)."""
    found = [
        b.code
        for b in blocks(ROOT / page)
        if b.lang == "python" and (containing is None or containing in b.code)
    ]
    assert found, f"no python block in {page}" + (f" holding {containing!r}" if containing else "")
    return found[0]


def run_example(
    folder: Path,
    code: str,
    *,
    env: Mapping[str, str] | None = None,
    drop: tuple[str, ...] = (),
    name: str = "example.py",
    args: tuple[str, ...] = (),
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Write ``code`` to ``folder/name`` (once) and run it there; ``env`` added to the
    environment, variables starting with one of ``drop`` (and SAVEGAME_) removed."""
    script = folder / name
    if not script.exists():
        script.write_text(code)
    return subprocess.run(
        [sys.executable, name, *args],
        cwd=folder,
        env=reader_env(env, drop),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def reader_env(env: Mapping[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """A reader's environment: none of the suite's SAVEGAME_ variables (nor ``drop``'s),
    this savegame on the path, ``env`` on top."""
    given = {k: v for k, v in os.environ.items() if not k.startswith(("SAVEGAME_", *drop))}
    given["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, given.get("PYTHONPATH")) if p)
    given.update(env or {})
    return given
