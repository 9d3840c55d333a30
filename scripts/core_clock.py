"""The lesson's clock: how long its core path takes, chapter by chapter, counted the way intro.md says.

    .venv/bin/python scripts/core_clock.py            # print the clock, and each core cell's run time
    .venv/bin/python scripts/core_clock.py --write    # write it into intro.md, README.md, each chapter
    .venv/bin/python scripts/core_clock.py --check    # exit 1 where one of them says otherwise

The core path is the intro, chapters 1-6 outside their "Going deeper" sections (a section so headed runs
to the next heading of the same or a higher level), each exercise notebook's core questions and
explanation, and the conclusion. For each chapter it counts:

- reading: words of Markdown prose at 200 a minute (fenced code, $$ maths, HTML tags and link targets left
  out) and non-blank, non-comment code lines at 6 a minute (the Colab install cell, tagged remove-cell,
  left out);
- running: the seconds each core code cell took when the notebook was last executed
  (scripts/execute_notebooks.py stores each cell's start and end in the cell's metadata), so the numbers
  are those of the machine that executed it;
- watching: every video segment the core names as "from M:SS to M:SS" (or H:MM:SS), its real length;
- other readings: a reading whose text is not in the repository (a paper's section, an article), at the
  minutes the chapter states for it, "**Read** (about N minutes)";
- its tasks: the exercise notebook's core text (all of it but the practice questions and the closing
  "Going deeper: what you built") at 200 words a minute, plus the minutes each core question and the
  explanation state for the work, "[core, about N minutes]".

Each row is rounded up to a whole minute and the total is the sum of the rows. Chapters, exercises and
intro.md change; run this again after any change to them (the fast tier's tests/book/test_lesson_text.py
fails while intro.md or a chapter's first line is out of date).
"""

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE = 200, 6
SLOW_CELL = 10.0  # seconds: a core cell slower than this is listed as too slow
HEADING = re.compile(r"^(#{1,6})\s+(.*)")
SEGMENT = re.compile(r"\bfrom\s+(\d+(?::\d\d){1,2})\s+to\s+(\d+(?::\d\d){1,2})\b")
READING = re.compile(r"\*\*Read\*\*\s+\(about\s+(\d+)\s+minutes?\)")
TASK = re.compile(r"^##\s.*\[core, about (\d+) minutes?\]", re.M)
PRACTICE = re.compile(r"^##\s.*\[practice\]", re.M)
CHAPTER_LINE = re.compile(r"^\*About \d+ minutes for the core\b[^\n]*\*$", re.M)
BEGIN, END = "<!-- core clock: made by scripts/core_clock.py --write -->", "<!-- /core clock -->"
# README.md's one sentence with the total (written too, where README.md has it)
README_TOTAL = re.compile(r"about \d+ hours?(?: \d+ minutes)? \(\d+ minutes by the method the intro states\)")


def words(text: str) -> int:
    """Words of Markdown prose: fenced code, $$ maths, HTML tags and link targets not counted."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return len(re.findall(r"[A-Za-z][A-Za-z'’-]*", text))


def code_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def split_core(cells):
    """(cell, in_going_deeper) for every cell: a Markdown heading that begins "Going deeper" opens such a
    section, which runs to the next heading of the same or a higher level (a cell's first heading decides)."""
    deeper = None
    for cell in cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                m = HEADING.match(line)
                if m:
                    level = len(m.group(1))
                    if re.match(r"(?i)going deeper", m.group(2).strip()):
                        deeper = level
                    elif deeper is not None and level <= deeper:
                        deeper = None
                    break
        yield cell, deeper is not None


def core_cells(cells):
    """(index, cell) of the cells outside "Going deeper" sections, but those tagged remove-cell."""
    for index, (cell, deeper) in enumerate(split_core(cells)):
        if not deeper and "remove-cell" not in cell.metadata.get("tags", []):
            yield index, cell


def seconds(timestamp: str) -> int:
    """"1:14:14" or "28:51" in seconds."""
    total = 0
    for part in timestamp.split(":"):
        total = 60 * total + int(part)
    return total


def run_seconds(cell) -> float | None:
    """How long a code cell took when its notebook was last executed (None if it was never executed)."""
    timing = cell.metadata.get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return None
    return (datetime.fromisoformat(end.replace("Z", "+00:00"))
            - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


@dataclass
class Part:
    """One row of the clock, its parts in seconds."""
    name: str
    reading: float = 0.0
    running: float = 0.0
    watching: float = 0.0
    other_reading: float = 0.0
    tasks: float = 0.0
    segments: list = field(default_factory=list)  # (start, end) of each video segment
    cells: list = field(default_factory=list)  # (index, seconds, first line) of each core code cell

    @property
    def minutes(self) -> int:
        return math.ceil((self.reading + self.running + self.watching + self.other_reading + self.tasks) / 60)

    @property
    def chapter_minutes(self) -> int:
        """The chapter itself, its tasks left out: what its first line states."""
        return math.ceil((self.reading + self.running + self.watching + self.other_reading) / 60)


def reading_seconds(n_words: int, n_lines: int = 0) -> float:
    return 60 * (n_words / WORDS_PER_MINUTE + n_lines / CODE_LINES_PER_MINUTE)


def markdown_part(path: Path, name: str, skip=None) -> Part:
    text = path.read_text(encoding="utf-8")
    if skip:
        text = skip(text)
    return Part(name, reading=reading_seconds(words(text)))


def chapter_part(path: Path) -> Part:
    nb = nbformat.read(path, as_version=4)
    part = Part(path.stem)
    n_words = n_lines = 0
    for index, cell in core_cells(nb.cells):
        if cell.cell_type == "markdown":
            n_words += words(cell.source)
            for start, end in SEGMENT.findall(cell.source):
                if seconds(end) <= seconds(start):
                    raise ValueError(f"{path.name}: the segment from {start} to {end} ends before it starts")
                part.segments.append((start, end))
                part.watching += seconds(end) - seconds(start)
            part.other_reading += 60 * sum(int(m) for m in READING.findall(cell.source))
        elif cell.cell_type == "code":
            n_lines += code_lines(cell.source)
            took = run_seconds(cell)
            if took is None:
                raise ValueError(f"{path.name}: core cell {index} holds no run time: execute the notebook with "
                                 "scripts/execute_notebooks.py")
            part.running += took
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            part.cells.append((index, took, first))
    part.reading = reading_seconds(n_words, n_lines)
    return part


def tasks_seconds(path: Path) -> float:
    """An exercise notebook's core: its text but the practice questions' and the "Going deeper" sections', at
    the reading rate, plus the minutes its core questions and explanation state."""
    nb = nbformat.read(path, as_version=4)
    n_words, stated, optional = 0, 0, False
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if cell.source.startswith("## "):
            optional = bool(PRACTICE.search(cell.source)) or cell.source.startswith("## Going deeper")
        if optional:
            continue
        n_words += words(cell.source)
        stated += sum(int(m) for m in TASK.findall(cell.source))
    if not stated:
        raise ValueError(f"{path.name} marks no question '[core, about N minutes]'")
    return reading_seconds(n_words) + 60 * stated


def without_clock(text: str) -> str:
    """intro.md without the block this script writes (the table is read like the rest of the page, but the
    block would change its own word count)."""
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        return head + rest.split(END, 1)[1]
    return text


def the_clock(root: Path = ROOT) -> list[Part]:
    parts = [markdown_part(root / "intro.md", "intro.md", skip=without_clock)]
    for path in sorted((root / "chapters").glob("0[1-6]_*.ipynb")):
        part = chapter_part(path)
        part.tasks = tasks_seconds(root / "exercises" / f"ch{path.name[:2]}.ipynb")
        parts.append(part)
    parts.append(markdown_part(root / "conclusion.md", "conclusion.md"))
    return parts


# ---------------------------------------------------------------------------------------------------
# what is written: the intro's table and each chapter's first line

TITLES = {"intro.md": "this page", "conclusion.md": "[the conclusion](conclusion.md)"}


def minutes_text(value: float) -> str:
    return f"{value / 60:.1f}" if value else ""


def table(parts: list[Part]) -> str:
    """intro.md's block: the table of the clock and the sentence with its total."""
    rows = ["| part | reading | running | videos | readings | its core tasks | in all |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for part in parts:
        title = TITLES.get(part.name) or (f"[{int(part.name[:2])}. {chapter_title(part.name)}]"
                                          f"(chapters/{part.name}.ipynb)")
        cells = [minutes_text(v) for v in (part.reading, part.running, part.watching, part.other_reading, part.tasks)]
        rows.append(f"| {title} | " + " | ".join(cells) + f" | {part.minutes} min |")
    total = sum(p.minutes for p in parts)
    rows.append(f"| **the core path** | | | | | | **{total} min** |")
    hours, minutes = divmod(total, 60)
    return (BEGIN + "\n" + "\n".join(rows) + "\n\n"
            + f"In all, {total} minutes ({hours} h {minutes:02d}); each part's minutes are given to a tenth, each "
              "row rounded up to a whole minute.\n" + END)


def chapter_title(stem: str) -> str:
    nb = nbformat.read(ROOT / "chapters" / f"{stem}.ipynb", as_version=4)
    first = nb.cells[0].source.splitlines()[0]
    return re.sub(r"^#\s*\d+\.\s*", "", first).strip()


def readme_total(parts: list[Part]) -> str:
    total = sum(p.minutes for p in parts)
    hours, minutes = divmod(total, 60)
    return (f"about {hours} hour{'s' if hours != 1 else ''}{f' {minutes} minutes' if minutes else ''} "
            f"({total} minutes by the method the intro states)")


def chapter_line(part: Part) -> str:
    task_minutes = math.ceil(part.tasks / 60)
    return (f"*About {part.chapter_minutes} minutes for the core, and {task_minutes} for its core exercises "
            "([the intro's clock](../intro.md)); sections headed \"Going deeper\" are optional.*")


def write(parts: list[Part], root: Path = ROOT) -> list[str]:
    """Write the block into intro.md and each chapter's first line; returns the files changed."""
    changed = []
    intro = root / "intro.md"
    text = intro.read_text(encoding="utf-8")
    if BEGIN not in text:
        raise SystemExit(f"intro.md has no block {BEGIN} ... {END} to write the clock into")
    head, rest = text.split(BEGIN, 1)
    new = head + table(parts) + rest.split(END, 1)[1]
    if new != text:
        intro.write_text(new, encoding="utf-8")
        changed.append("intro.md")
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    new = README_TOTAL.sub(readme_total(parts), text)
    if new != text:
        readme.write_text(new, encoding="utf-8")
        changed.append("README.md")
    for part in parts[1:-1]:
        path = root / "chapters" / f"{part.name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        source = nb.cells[0].source
        if not CHAPTER_LINE.search(source):
            raise SystemExit(f"{path.name}: its first cell has no line '*About N minutes for the core...*'")
        updated = CHAPTER_LINE.sub(chapter_line(part).replace("\\", "\\\\"), source, count=1)
        if updated != source:
            nb.cells[0].source = updated
            nbformat.write(nb, path)
            changed.append(path.relative_to(root).as_posix())
    return changed


def stale(parts: list[Part], root: Path = ROOT) -> list[str]:
    """What intro.md or a chapter's first line says that the clock does not."""
    problems = []
    text = (root / "intro.md").read_text(encoding="utf-8")
    if table(parts) not in text:
        problems.append("intro.md: its clock block is not the clock's")
    readme = (root / "README.md").read_text(encoding="utf-8")
    if any(m.group(0) != readme_total(parts) for m in README_TOTAL.finditer(readme)):
        problems.append(f"README.md: its total is not {readme_total(parts)!r}")
    for part in parts[1:-1]:
        source = nbformat.read(root / "chapters" / f"{part.name}.ipynb", as_version=4).cells[0].source
        if chapter_line(part) not in source:
            problems.append(f"chapters/{part.name}.ipynb: its first line is not {chapter_line(part)!r}")
    return problems


def report(parts: list[Part]) -> str:
    lines = []
    for part in parts:
        lines.append(f"{part.name:34} {part.minutes:4d} min  (reading {part.reading / 60:5.1f}, running "
                     f"{part.running / 60:4.1f}, videos {part.watching / 60:4.1f}, readings "
                     f"{part.other_reading / 60:4.1f}, tasks {part.tasks / 60:5.1f})")
        for start, end in part.segments:
            lines.append(f"    video from {start} to {end}: {(seconds(end) - seconds(start)) / 60:.2f} min")
        for index, took, first in part.cells:
            flag = "  <- over 10 s" if took > SLOW_CELL else ""
            lines.append(f"    cell {index:3d} {took:6.1f} s  {first[:60]}{flag}")
    total = sum(p.minutes for p in parts)
    lines.append(f"{'the core path':34} {total:4d} min ({total // 60} h {total % 60:02d})")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write the clock into intro.md and the chapters")
    group.add_argument("--check", action="store_true", help="exit 1 if intro.md or a chapter is out of date")
    args = parser.parse_args()
    parts = the_clock()
    print(report(parts))
    if args.write:
        changed = set()
        for _ in range(3):  # a chapter's first line is read too: write until the clock reads what it wrote
            written = write(parts)
            if not written:
                break
            changed.update(written)
            parts = the_clock()
        print("written:", ", ".join(sorted(changed)) if changed else "nothing changed")
    elif args.check:
        problems = stale(parts)
        for problem in problems:
            print(problem, file=sys.stderr)
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
