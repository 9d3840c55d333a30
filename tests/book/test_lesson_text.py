"""Static checks of the lesson's text: figures have alt text, chapter mentions are links, every chapter
points to its sources, and every notebook's Markdown is plain Markdown that the website, JupyterLab and
Colab all render (no MyST roles or directives, which Colab and a plain JupyterLab show raw)."""

import math
import re
from pathlib import Path

import nbformat
import pytest
from helpers import LINK, NOTEBOOKS, load_script, without_code

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
MENTION = re.compile(r"\b[Cc]hapter [1-7]\b")
# Markdown links, code and maths
SKIP = re.compile(r"(\[[^\]]*\]\([^)]*\)|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$)")


def markdown_lines(text: str):
    """Lines of prose: not in code blocks, not directive options, not headings."""
    block = None
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("```"):
            block = (("directive" if s.startswith("```{") else "code") if block is None
                     else (None if s == "```" else block))
            continue
        if block != "code" and not s.startswith(("#", ":")):
            yield line


def unlinked_mentions(path: Path, text: str, own: int | None) -> list[str]:
    found = []
    for line in markdown_lines(text):
        prose = "".join(SKIP.split(line)[::2])
        found += [f"{path.name}: {m.group(0)!r} in {line.strip()[:80]!r}" for m in MENTION.finditer(prose)
                  if int(m.group(0)[-1]) != own]
    return found


def test_there_are_seven_chapters():
    assert len(CHAPTERS) == 7


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_figures_have_alt_text(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt) > 40, f"{path.name} cell {i}: a figure without alt text (metadata mystnb.image.alt)"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_mentions_are_links_and_sources_are_named(path):
    nb = nbformat.read(path, as_version=4)
    own = int(path.name[:2])
    problems = [m for c in nb.cells if c.cell_type == "markdown" for m in unlinked_mentions(path, c.source, own)]
    assert not problems, problems
    assert nb.cells[-1].source.startswith("## Going deeper: further reading")
    assert "[references](../references.md)" in nb.cells[-1].source


def test_intro_and_conclusion_link_their_chapter_mentions():
    for name in ("intro.md", "conclusion.md"):
        assert not unlinked_mentions(ROOT / name, (ROOT / name).read_text(), None)


def test_code_fits_the_page():
    """At 1280 px the site shows about 80 characters of code: almost every line fits, none is far over."""
    lines = [line for path in CHAPTERS for c in nbformat.read(path, as_version=4).cells
             if c.cell_type == "code" and not c.source.startswith("# On Colab, install")
             for line in c.source.split("\n")]
    long = [line for line in lines if len(line) > 80]
    assert len(long) <= 0.03 * len(lines), f"{len(long)} of {len(lines)} code lines are over 80 characters"
    assert max(map(len, lines)) <= 120, max(lines, key=len)


# ---------------------------------------------------------------------------------------------------
# One source for the website, JupyterLab and Colab: plain Markdown (CommonMark, tables, $maths$, HTML)

SITE_ONLY = "site-only"  # a Markdown cell with this tag may use MyST: it is meant for the website alone
MYST = {
    "a role, {name}`...`": re.compile(r"(?<![\\\w])\{[A-Za-z][\w:+-]*\}`"),
    "a directive fence, ```{name}": re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*\{", re.M),
    "a colon fence, :::": re.compile(r"^[ \t]*:{3,}", re.M),
    "a directive option line, :name:": re.compile(r"^:[A-Za-z][\w-]*:( |$)", re.M),
    "a target, (label)=": re.compile(r"^\([\w.:-]+\)=[ \t]*$", re.M),
    "a block break, +++": re.compile(r"^\+\+\+", re.M),
    "a substitution, {{ name }}": re.compile(r"\{\{[^}]*\}\}"),
}



def myst_syntax(text: str) -> list[str]:
    """What Colab (plain Markdown) would show raw: MyST roles, directives, colon fences, targets."""
    prose = without_code(text)
    return [f"{kind}: {m.group(0)!r}" for kind, pattern in MYST.items() for m in pattern.finditer(prose)]


def markdown_cells(path: Path):
    nb = nbformat.read(path, as_version=4)
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]


def test_the_myst_detector_finds_what_colab_shows_raw():
    """Each kind of MyST markup is caught; plain Markdown, code and maths are not."""
    samples = ["see {doc}`chapter 2 <02_causal_mask>`", "{ref}`sec`",
               "```{admonition} Answer\n:class: dropdown\nx\n```", "~~~{note}\nx\n~~~", ":::{tip}\nx\n:::",
               "(my-label)=\n# Title", "+++", "{{ version }}"]
    for sample in samples:
        assert myst_syntax(sample), sample
    plain = ("[chapter 2](02_causal_mask.ipynb) and $\\frac{a}{b} + \\text{x}_{1}$\n\n```python\n{'a': 1}\n```\n\n"
             "`{doc}` in inline code\n\n<details>\n<summary>Answer</summary>\n\nIt is $e^{-m}$.\n\n</details>")
    assert myst_syntax(plain) == []


def test_every_notebook_is_checked():
    names = {p.relative_to(ROOT).as_posix() for p in NOTEBOOKS}
    assert len([n for n in names if n.startswith("chapters/")]) == 7
    assert len([n for n in names if n.startswith("exercises/")]) == 7
    assert len([n for n in names if n.startswith("solutions/")]) == 7
    assert {"appendix/cpu_weight_layout.ipynb", "model_card.ipynb", "model_card_smollm2.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_markdown_renders_everywhere(path):
    """No MyST-only markup outside cells tagged site-only; links and images point at files that exist."""
    problems = []
    for i, cell in markdown_cells(path):
        if SITE_ONLY in cell.metadata.get("tags", []):
            continue
        problems += [f"cell {i}: {p}" for p in myst_syntax(cell.source)]
        for m in LINK.finditer(without_code(cell.source)):
            image, text, target = m.group(1), m.group(2), m.group(3)
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            file = (path.parent / target.split("#")[0]).resolve()
            if not file.is_file():
                problems.append(f"cell {i}: {target} ({text[:30]!r}) is not a file of the repository")
            elif not image and file.suffix not in (".ipynb", ".md"):
                problems.append(f"cell {i}: {target} links to a {file.suffix} file, not a page")
            if image and len(text) < 40:
                problems.append(f"cell {i}: image {target} without alt text that describes it")
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_answers_are_folded_details(path):
    """"Going deeper: check your understanding" has three answers, each folded in <details> with a <summary>, and blank
    lines around its text so that Markdown and maths inside render (an HTML block ends at a blank line)."""
    cell = next(c for _, c in markdown_cells(path) if "## Going deeper: check your understanding" in c.source)
    section = cell.source.split("## Going deeper: check your understanding", 1)[1].split("\n## ", 1)[0]
    opened = re.findall(r"^<details>\n<summary>Answer</summary>\n\n", section, re.M)
    closed = re.findall(r"\n\n</details>$", section, re.M)
    assert len(opened) == len(closed) == 3 == section.count("<details>") == section.count("</details>"), section


# ---------------------------------------------------------------------------------------------------
# The clocks: what intro.md, README.md, _toc.yml, the instructors' guide and each chapter's first line say is
# what scripts/core_clock.py computes


def core_clock():
    return load_script("scripts/core_clock.py")


def test_the_intro_and_each_chapter_give_the_clocks_minutes():
    clock = core_clock()
    problems = clock.stale(clock.the_clock())
    assert not problems, ("\n".join(problems) + "\nA chapter or an exercise notebook changed: run "
                          ".venv/bin/python scripts/core_clock.py --write")


def test_the_lesson_fits_in_90_minutes_and_its_homework_in_60():
    """The course's targets for lesson 1, by the clock's own count (upper ends: a reader new to it)."""
    clock = core_clock()
    (_, lesson), (_, homework) = clock.totals(clock.the_clock())
    assert lesson <= 90, f"the lesson takes up to {lesson} minutes: at most 90"
    assert homework <= 60, f"the homework takes up to {homework} minutes: at most 60"


def _notebook(cells, path):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nbformat.write(nb, path)
    return path


def _timed(source, seconds=2.5, outputs=()):
    return nbformat.v4.new_code_cell(source, outputs=list(outputs), metadata={"execution": {
        "iopub.execute_input": "2026-01-01T10:00:00.000Z",
        "shell.execute_reply": f"2026-01-01T10:00:{seconds:06.3f}Z"}})


def test_the_clock_counts_the_core_its_outputs_segments_and_run_time(tmp_path):
    """Going deeper sections (to the next heading of their level) count nothing; a segment written over a
    line break counts, with a minute to find it; printed outputs count as words; a cell's run time is read
    from its execution metadata; the range reads at 150 words and 5 lines a minute (upper end) and at 200
    and 6 (lower end)."""
    clock = core_clock()
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    printed = nbformat.v4.new_output("stream", name="stdout", text="loss 2.5 nats\n")
    result = nbformat.v4.new_output("execute_result", data={"text/plain": "tensor([1, 2])"}, execution_count=1)
    path = _notebook([
        md("# 9. A chapter\n\n*About 1 minutes for the core*\n\n**Read** (about 4 minutes) a paper."),
        code("import sys", metadata={"tags": ["remove-cell"]}),
        _timed("x = 1\n# a comment\n\ny = 2", outputs=[printed, result]),
        md("## Watch\n\nHis video from 28:51 to\n31:23, and from 1:14:14 to 1:15:39."),
        md("## Going deeper: more\n\nfrom 0:00 to 59:00, " + "word " * 400),
        _timed("z = 3\n" * 50, seconds=40, outputs=[printed]),
        md("### a subsection, still deeper"),
        md("## Summary\n\nfrom 1:00 to 1:30"),
    ], tmp_path / "09_chapter.ipynb")
    part = clock.chapter_part(path)
    assert part.segments == [("28:51", "31:23"), ("1:14:14", "1:15:39"), ("1:00", "1:30")]
    assert part.watching == 152 + 85 + 30 and part.videos() == 152 + 85 + 30 + 3 * 60
    assert part.other_reading == 4 * 60
    assert part.running == 2.5
    # the core's words: "A chapter About minutes for the core Read about minutes a paper" (12), "Watch His
    # video from to and from to" (8), "Summary from to" (3); printed: "loss 2.5 nats" and "tensor([1, 2])" (5);
    # its code: the 2 lines of the timed cell
    assert (part.prose, part.printed, part.code) == (23, 5, 2)
    rest = 2.5 + 152 + 85 + 30 + 3 * 60 + 4 * 60
    assert part.lesson_seconds((150, 5)) == pytest.approx(60 * (28 / 150 + 2 / 5) + rest)
    low, high = 60 * (28 / 200 + 2 / 6) + rest, 60 * (28 / 150 + 2 / 5) + rest
    assert part.lesson == (math.ceil(low / 60), math.ceil(high / 60))
    backwards = _notebook([md("# 9. A\n\nfrom 2:00 to 1:00")], tmp_path / "09_backwards.ipynb")
    with pytest.raises(ValueError, match="ends before it starts"):
        clock.chapter_part(backwards)
    never_run = _notebook([md("# 9. A"), code("x = 1")], tmp_path / "09_never_run.ipynb")
    with pytest.raises(ValueError, match="core cell 1 holds no run time"):
        clock.chapter_part(never_run)


def test_the_homework_counts_an_exercise_notebooks_core_text_and_stated_minutes(tmp_path):
    clock = core_clock()
    md = nbformat.v4.new_markdown_cell
    path = _notebook([
        md("# Exercises " + "word " * 98),
        md("## Question 1: one [core, about 4 minutes]\n\n" + "word " * 94),
        md("## Question 2: two [practice]\n\n" + "word " * 1000),
        md("still practice " * 100),
        md("## Explain: why [core, about 3 minutes]"),
        md("## Going deeper: what you built\n\n" + "word " * 1000),
    ], tmp_path / "ch09.ipynb")
    # "Exercises" and 98 words, "Question one core about minutes" and 94, "Explain why core about minutes"
    assert clock.homework(path) == (99 + 99 + 5, 4 + 3)
    part = clock.Part("09_chapter", task_words=203, task_minutes=7)
    assert part.homework == (math.ceil(203 / 200 + 7), math.ceil(203 / 150 + 7)) == (9, 9)
    no_core = _notebook([md("## Question 1 [practice]")], tmp_path / "ch08.ipynb")
    with pytest.raises(ValueError, match="core, about N minutes"):
        clock.homework(no_core)


def test_the_clock_writes_what_it_checks(tmp_path):
    """--write puts both clocks in each place; --check (stale) then finds nothing, and finds a figure changed by
    hand in any of them."""
    clock = core_clock()
    md = nbformat.v4.new_markdown_cell
    (tmp_path / "chapters").mkdir()
    (tmp_path / "exercises").mkdir()
    (tmp_path / "guide" / "instructors").mkdir(parents=True)
    (tmp_path / "intro.md").write_text(f"# Intro\n\n{clock.BEGIN}\n{clock.END}\n" + "word " * 300)
    (tmp_path / "conclusion.md").write_text("# End\n\n" + "word " * 100)
    (tmp_path / clock.GUIDE).write_text(f"# Guide\n\n{clock.GUIDE_BEGIN}\n{clock.GUIDE_END}\n")
    (tmp_path / "README.md").write_text("The lesson (all of it) takes about 1 to 2 minutes, and its homework "
                                        "(one task) about 3 minutes, by the method the guide states.\n")
    (tmp_path / "_toc.yml").write_text('  - caption: "Lesson 1: a lesson (lesson about 1 minutes, homework about 2)"\n')
    _notebook([md("# 1. A chapter\n\n*About 1 minutes for the core*\n\n" + "word " * 400), _timed("x = 1\n" * 30)],
              tmp_path / "chapters" / "01_chapter.ipynb")
    _notebook([md("# Exercises\n\n## Question 1: one [core, about 5 minutes]\n\n" + "word " * 300)],
              tmp_path / "exercises" / "ch01.ipynb")
    parts = clock.the_clock(tmp_path)
    assert clock.stale(parts, tmp_path)  # nothing written yet
    for _ in range(3):
        if not clock.write(parts, tmp_path):
            break
        parts = clock.the_clock(tmp_path)
    assert clock.stale(parts, tmp_path) == []
    (lesson_low, lesson_high), (work_low, work_high) = clock.totals(parts)
    assert lesson_low < lesson_high and work_low <= work_high
    intro = (tmp_path / "intro.md").read_text()
    assert f"takes about {lesson_low} to {lesson_high} minutes" in intro
    readme = (tmp_path / "README.md").read_text()
    assert f"takes about {lesson_low} to {lesson_high} minutes, and its homework (one task) about" in readme
    for name in ("intro.md", "README.md", "_toc.yml", str(clock.GUIDE)):
        file = tmp_path / name
        text = file.read_text()
        file.write_text(text.replace(f"{lesson_low} to {lesson_high}", f"{lesson_low} to {lesson_high + 1}"))
        assert clock.stale(parts, tmp_path), name
        file.write_text(text)
    assert clock.stale(parts, tmp_path) == []
