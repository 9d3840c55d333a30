"""The lesson's two clocks: how long the lesson takes a reader new to it, and how long its homework takes a median
learner, chapter by chapter, each as a range, counted the way guide/instructors/exercises.md states
("How long the lesson and homework take").

    .venv/bin/python scripts/core_clock.py            # print both clocks, and each core cell's run time
    .venv/bin/python scripts/core_clock.py --write    # write them into intro.md, README.md, _toc.yml, the guide
                                                      # and each chapter's first line
    .venv/bin/python scripts/core_clock.py --check    # exit 1 where one of them says otherwise

The lesson is intro.md, chapters 1-6 outside their "Going deeper" sections (a section so headed runs to the
next heading of the same or a higher level), and conclusion.md. For each it counts:

- reading: words of Markdown prose (fenced code, $$ maths, HTML tags and link targets left out) and of the
  text the core code cells print (their stored outputs, split at white space), and the non-blank,
  non-comment lines of the core code cells (the Colab install cell, tagged remove-cell, left out);
- running: the seconds each core code cell took when the notebook was last executed
  (scripts/execute_notebooks.py stores each cell's start and end in the cell's metadata);
- videos: every video segment the core names as "from M:SS to M:SS" (or H:MM:SS), its real length, plus a
  minute to find it;
- readings: a reading whose text is not in the repository (a paper's section, an article), at the minutes
  the chapter states for it, "**Read** (about N minutes)".

The homework is each exercise notebook's core: its text but the practice questions and the closing "Going
deeper" section, read at the same paces, plus the minutes each core question and core explanation state for
the work, "[core, about N minutes]".

Each clock is a range: its upper end reads at 150 words and 5 code lines a minute (a reader new to the
subject), its lower end at 200 words and 6 code lines a minute (one who knows PyTorch); videos, readings, run
time and the stated minutes are the same at both ends. Each row's two ends are rounded up to a whole minute
and each total is the sum of its rows. Chapters, exercises and intro.md change; run this again after any
change to them (the fast tier's tests/book/test_lesson_text.py fails while what it writes is out of date).
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
# (words a minute, code lines a minute): the upper end of each range, a reader new to the subject; the lower end
NEW_READER, PRACTISED_READER = (150, 5), (200, 6)
FIND_VIDEO = 60  # seconds to find a video segment (open the video, seek to its start), on top of its length
SLOW_CELL = 10.0  # seconds: a core cell slower than this is listed as too slow
HEADING = re.compile(r"^(#{1,6})\s+(.*)")
SEGMENT = re.compile(r"\bfrom\s+(\d+(?::\d\d){1,2})\s+to\s+(\d+(?::\d\d){1,2})\b")
READING = re.compile(r"\*\*Read\*\*\s+\(about\s+(\d+)\s+minutes?\)")
TASK = re.compile(r"^##\s.*\[core, about (\d+) minutes?\]", re.M)
PRACTICE = re.compile(r"^##\s.*\[practice\]", re.M)
CHAPTER_LINE = re.compile(r"^\*About \d+(?: to \d+)? minutes for the core\b[^\n]*\*$", re.M)
# intro.md's two lines; the guide's table
BEGIN, END = "<!-- core clock: made by scripts/core_clock.py --write -->", "<!-- /core clock -->"
GUIDE = Path("guide/instructors/exercises.md")
GUIDE_BEGIN, GUIDE_END = "<!-- clock table: made by scripts/core_clock.py --write -->", "<!-- /clock table -->"
# README.md's sentence with the two totals, and _toc.yml's caption of the lesson
RANGE = r"\d+(?: to \d+)?"
README_CLOCK = re.compile(rf"takes about {RANGE} minutes, and its homework \(([^)]*)\) about {RANGE} minutes")
TOC_CLOCK = re.compile(rf'(caption: "Lesson 1: [^"(]*)\(lesson about {RANGE} minutes, homework about {RANGE}\)"')


def words(text: str) -> int:
    """Words of Markdown prose: fenced code, $$ maths, HTML tags and link targets not counted."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return len(re.findall(r"[A-Za-z][A-Za-z'’-]*", text))


def code_lines(source: str) -> int:
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def output_words(cell) -> int:
    """Words a code cell printed when last executed (its stream text, or a result's plain text), split at white
    space: numbers count, as a reader reads them too."""
    n = 0
    for out in cell.get("outputs", []):
        text = out.get("text") or out.get("data", {}).get("text/plain") or ""
        n += len(("".join(text) if isinstance(text, list) else text).split())
    return n


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
    """One row of the clocks: what it counts (words, lines, seconds), each clock's range computed from them."""
    name: str
    prose: int = 0  # words of Markdown prose
    printed: int = 0  # words of the core cells' outputs
    code: int = 0  # lines of core code
    running: float = 0.0  # seconds
    watching: float = 0.0  # seconds of video
    other_reading: float = 0.0  # seconds the chapter states for its readings
    task_words: int = 0  # words of the exercise notebook's core text
    task_minutes: int = 0  # minutes its core questions and explanation state
    core_explanation: bool = False  # whether its exercise notebook's explanation is core
    segments: list = field(default_factory=list)  # (start, end) of each video segment
    cells: list = field(default_factory=list)  # (index, seconds, first line) of each core code cell

    def reading(self, pace) -> float:
        """Seconds to read the prose, the printed outputs and the code at pace (words, lines a minute)."""
        per_word, per_line = pace
        return 60 * ((self.prose + self.printed) / per_word + self.code / per_line)

    def videos(self) -> float:
        return self.watching + FIND_VIDEO * len(self.segments)

    def lesson_seconds(self, pace) -> float:
        return self.reading(pace) + self.running + self.videos() + self.other_reading

    def homework_seconds(self, pace) -> float:
        return 60 * (self.task_words / pace[0] + self.task_minutes)

    @property
    def lesson(self) -> tuple[int, int]:
        """The lesson's minutes for this part: (lower end, upper end), each rounded up."""
        return (math.ceil(self.lesson_seconds(PRACTISED_READER) / 60), math.ceil(self.lesson_seconds(NEW_READER) / 60))

    @property
    def homework(self) -> tuple[int, int]:
        if not self.task_minutes:
            return (0, 0)
        return (math.ceil(self.homework_seconds(PRACTISED_READER) / 60),
                math.ceil(self.homework_seconds(NEW_READER) / 60))


def markdown_part(path: Path, name: str, skip=None) -> Part:
    text = path.read_text(encoding="utf-8")
    if skip:
        text = skip(text)
    return Part(name, prose=words(text))


def chapter_part(path: Path) -> Part:
    nb = nbformat.read(path, as_version=4)
    part = Part(path.stem)
    for index, cell in core_cells(nb.cells):
        if cell.cell_type == "markdown":
            part.prose += words(cell.source)
            for start, end in SEGMENT.findall(cell.source):
                if seconds(end) <= seconds(start):
                    raise ValueError(f"{path.name}: the segment from {start} to {end} ends before it starts")
                part.segments.append((start, end))
                part.watching += seconds(end) - seconds(start)
            part.other_reading += 60 * sum(int(m) for m in READING.findall(cell.source))
        elif cell.cell_type == "code":
            part.code += code_lines(cell.source)
            part.printed += output_words(cell)
            took = run_seconds(cell)
            if took is None:
                raise ValueError(f"{path.name}: core cell {index} holds no run time: execute the notebook with "
                                 "scripts/execute_notebooks.py")
            part.running += took
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            part.cells.append((index, took, first))
    return part


def homework(path: Path) -> tuple[int, int]:
    """An exercise notebook's core: (words of its text but the practice questions' and the "Going deeper"
    sections', the minutes its core questions and explanation state)."""
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
    return n_words, stated


def without_clock(text: str) -> str:
    """intro.md without the block this script writes (it would change its own word count)."""
    if BEGIN in text:
        head, rest = text.split(BEGIN, 1)
        return head + rest.split(END, 1)[1]
    return text


def the_clock(root: Path = ROOT) -> list[Part]:
    parts = [markdown_part(root / "intro.md", "intro.md", skip=without_clock)]
    for path in sorted((root / "chapters").glob("0[1-6]_*.ipynb")):
        part = chapter_part(path)
        exercise = root / "exercises" / f"ch{path.name[:2]}.ipynb"
        part.task_words, part.task_minutes = homework(exercise)
        part.core_explanation = bool(re.search(r"## Explain:[^\n\"]*\[core\b", exercise.read_text(encoding="utf-8")))
        parts.append(part)
    parts.append(markdown_part(root / "conclusion.md", "conclusion.md"))
    return parts


def totals(parts: list[Part]) -> tuple[tuple[int, int], tuple[int, int]]:
    """((lesson low, high), (homework low, high)): each the sum of its rows."""
    return ((sum(p.lesson[0] for p in parts), sum(p.lesson[1] for p in parts)),
            (sum(p.homework[0] for p in parts), sum(p.homework[1] for p in parts)))


# ---------------------------------------------------------------------------------------------------
# what is written: intro.md's two lines, the guide's table, README.md's sentence, _toc.yml's caption, and
# each chapter's first line

def span(pair: tuple[int, int]) -> str:
    """"92 to 110", or "9" where both ends are the same."""
    return f"{pair[0]} to {pair[1]}" if pair[0] != pair[1] else f"{pair[0]}"


def intro_lines(parts: list[Part]) -> str:
    """intro.md's block: the two clocks, a line each."""
    lesson, work = totals(parts)
    explained = [str(int(p.name[:2])) for p in parts if p.core_explanation]
    return (BEGIN + "\n"
            + "**The lesson** (this page, chapters 1-6 but their \"Going deeper\" sections, with their readings and "
              f"videos, and the conclusion) takes about {span(lesson)} minutes.\n\n"
            + f"**The homework** (each chapter's core task{explanations_of(explained)}) "
              f"takes about {span(work)} minutes ([how both are counted](guide/instructors/exercises.md)).\n"
            + END)


def explanations_of(chapters: list[str]) -> str:
    """", and the explanation of chapters 2, 3 and 5" (of chapter 2; none: "")."""
    if not chapters:
        return ""
    if len(chapters) == 1:
        return f", and the explanation of chapter {chapters[0]}"
    return f", and the explanation of chapters {', '.join(chapters[:-1])} and {chapters[-1]}"


TITLES = {"intro.md": "the intro", "conclusion.md": "[the conclusion](../../conclusion.md)"}


def chapter_title(stem: str, root: Path = ROOT) -> str:
    nb = nbformat.read(root / "chapters" / f"{stem}.ipynb", as_version=4)
    first = nb.cells[0].source.splitlines()[0]
    return re.sub(r"^#\s*\d+\.\s*", "", first).strip()


def table(parts: list[Part], root: Path = ROOT) -> str:
    """The guide's block: each part's counts and both clocks."""
    rows = ["| part | words (prose + printed) | code lines | running | videos | readings | lesson | homework |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for part in parts:
        title = TITLES.get(part.name) or (f"[{int(part.name[:2])}. {chapter_title(part.name, root)}]"
                                          f"(../../chapters/{part.name}.ipynb)")
        videos = (f"{part.videos() / 60:.1f} ({len(part.segments)})" if part.segments else "")
        cells = [f"{part.prose} + {part.printed}", str(part.code or ""),
                 f"{part.running:.0f} s" if part.running else "", videos,
                 f"{part.other_reading / 60:.0f}" if part.other_reading else "",
                 f"{span(part.lesson)} min",
                 f"{span(part.homework)} min ({part.task_words} words, {part.task_minutes} stated)"
                 if part.task_minutes else ""]
        rows.append(f"| {title} | " + " | ".join(cells) + " |")
    lesson, work = totals(parts)
    rows.append(f"| **in all** | | | | | | **{span(lesson)} min** | **{span(work)} min** |")
    return GUIDE_BEGIN + "\n" + "\n".join(rows) + "\n" + GUIDE_END


def readme_clock(parts: list[Part], said: str) -> str:
    lesson, work = totals(parts)
    return f"takes about {span(lesson)} minutes, and its homework ({said}) about {span(work)} minutes"


def toc_caption(parts: list[Part]) -> str:
    lesson, work = totals(parts)
    return f"(lesson about {span(lesson)} minutes, homework about {span(work)})\""


def chapter_line(part: Part) -> str:
    return (f"*About {span(part.lesson)} minutes for the core, and {span(part.homework)} for its homework "
            "([the intro](../intro.md)); sections headed \"Going deeper\" are optional.*")


def _replace_block(text: str, begin: str, end: str, block: str, name: str) -> str:
    if begin not in text:
        raise SystemExit(f"{name} has no block {begin} ... {end} to write the clock into")
    head, rest = text.split(begin, 1)
    return head + block + rest.split(end, 1)[1]


def write(parts: list[Part], root: Path = ROOT) -> list[str]:
    """Write the clocks where they are said; returns the files changed."""
    changed = []

    def put(relative, new, old):
        if new != old:
            (root / relative).write_text(new, encoding="utf-8")
            changed.append(str(relative))

    text = (root / "intro.md").read_text(encoding="utf-8")
    put("intro.md", _replace_block(text, BEGIN, END, intro_lines(parts), "intro.md"), text)
    text = (root / GUIDE).read_text(encoding="utf-8")
    put(GUIDE, _replace_block(text, GUIDE_BEGIN, GUIDE_END, table(parts, root), str(GUIDE)), text)
    text = (root / "README.md").read_text(encoding="utf-8")
    put("README.md", README_CLOCK.sub(lambda m: readme_clock(parts, m.group(1)), text), text)
    text = (root / "_toc.yml").read_text(encoding="utf-8")
    put("_toc.yml", TOC_CLOCK.sub(lambda m: m.group(1) + toc_caption(parts), text), text)
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
    """What intro.md, the guide, README.md, _toc.yml or a chapter's first line says that the clocks do not."""
    problems = []
    if intro_lines(parts) not in (root / "intro.md").read_text(encoding="utf-8"):
        problems.append("intro.md: its two lines are not the clocks'")
    if table(parts, root) not in (root / GUIDE).read_text(encoding="utf-8"):
        problems.append(f"{GUIDE}: its table is not the clocks'")
    readme = (root / "README.md").read_text(encoding="utf-8")
    found = list(README_CLOCK.finditer(readme))
    if len(found) != 1 or found[0].group(0) != readme_clock(parts, found[0].group(1)):
        problems.append(f"README.md: its sentence is not '{readme_clock(parts, 'WHAT')}'")
    toc = (root / "_toc.yml").read_text(encoding="utf-8")
    found = list(TOC_CLOCK.finditer(toc))
    if len(found) != 1 or not found[0].group(0).endswith(toc_caption(parts)):
        problems.append(f"_toc.yml: the lesson's caption does not end {toc_caption(parts)}")
    for part in parts[1:-1]:
        source = nbformat.read(root / "chapters" / f"{part.name}.ipynb", as_version=4).cells[0].source
        if chapter_line(part) not in source:
            problems.append(f"chapters/{part.name}.ipynb: its first line is not {chapter_line(part)!r}")
    return problems


def report(parts: list[Part]) -> str:
    lines = [f"{'part':24} {'lesson':>10} {'homework':>10}   reading at 150/5 (200/6), running, videos, readings"]
    for part in parts:
        lines.append(f"{part.name:24} {span(part.lesson):>10} {span(part.homework):>10}   "
                     f"{part.reading(NEW_READER) / 60:5.1f} ({part.reading(PRACTISED_READER) / 60:4.1f}), "
                     f"{part.running / 60:4.1f}, {part.videos() / 60:4.1f}, {part.other_reading / 60:4.1f}"
                     f"   [{part.prose} words, {part.printed} printed, {part.code} code lines"
                     + (f"; tasks {part.task_words} words, {part.task_minutes} min stated]" if part.task_minutes
                        else "]"))
        for start, end in part.segments:
            lines.append(f"    video from {start} to {end}: {(seconds(end) - seconds(start)) / 60:.2f} min, "
                         f"and {FIND_VIDEO / 60:.0f} to find it")
        for index, took, first in part.cells:
            flag = "  <- over 10 s" if took > SLOW_CELL else ""
            lines.append(f"    cell {index:3d} {took:6.1f} s  {first[:60]}{flag}")
    lesson, work = totals(parts)
    lines.append(f"{'in all':24} {span(lesson):>10} {span(work):>10}   minutes")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write the clocks where they are said")
    group.add_argument("--check", action="store_true", help="exit 1 where what is said is out of date")
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
