"""The class report: one HTML page next to --out (grades.csv: grades-report.html) for the instructor, written
after each batch and merge, titled by the assignment. It says what to reteach: across the assignment, the
mistakes of the learners who attempted a task and did not pass it (by the name the feedback gives them),
core tasks first, then by how many learners made each; what was not attempted, apart; each task's pass rate
among those who attempted it; a histogram of the learners' points (what the grade counts); with a roster,
one learner a student (the file that counted), the students who handed in nothing and the files placed on no
one; notebooks of the same bytes and explanations answered in the same words; and the explanations' answers
to mark (with a link to the explanations CSV). It works offline: no script, no font, no request; its plots
are inline SVG drawn here. Everything a submission wrote (file names, answers) is escaped (``html.escape``)
after ``text.clean``, and the page is written as the CSVs are (``outputs.write_atomically``)."""

import html
import statistics
import urllib.parse
from collections import Counter
from pathlib import Path

from ..exercises import chapter
from .rows import Row, about_notebook
from .text import clean

RETEACH = 10  # mistakes named under "what to reteach"
MAX_NAME = 200  # characters of a mistake's name, cut at a word
UNNAMED = {"error": "it raised an exception",
           "missing": "the function is missing", "not_implemented": "still raises NotImplementedError",
           "timeout": "it ran past the time limit", "crashed": "the process running it stopped"}
SYNTAX = "a syntax error in the notebook kept the function from being defined"


def report_path(out: Path) -> Path:
    """Where the class report goes: next to --out (grades.csv: grades-report.html)."""
    return out.with_name(f"{out.stem}-report.html")


def known_mistakes(task_name: str) -> list[str]:
    """The messages of a task's known mistakes ("ch05.q1"), the words its feedback names them with; none
    for a task this build does not know."""
    chapter_name, _, name = task_name.partition(".")
    try:
        return [clean(known.message) for known in getattr(chapter(chapter_name), name).known]
    except (AttributeError, ImportError, KeyError, ValueError):
        return []


def is_core(task_name: str) -> bool:
    """Whether a task ("ch05.q1") is one of its chapter's core tasks (False for one this build does not know)."""
    chapter_name, _, name = task_name.partition(".")
    try:
        return name in chapter(chapter_name).CORE
    except (ImportError, ValueError):
        return False


def shortened(text: str, most: int = MAX_NAME) -> str:
    """``text`` in at most ``most`` characters, cut at a word, never in one, with "..." where it was cut."""
    if len(text) <= most:
        return text
    cut = text[:most - 3].rsplit(" ", 1)[0].rstrip(" ,;:")
    return f"{cut}..."


def attempted(row: Row) -> bool:
    """Whether the learner wrote something for the task: not a stub still raising NotImplementedError, nor a
    function that is simply not there (one a syntax error kept from being defined was attempted)."""
    return row["status"] not in ("not_implemented", "missing") or "SyntaxError" in str(row["reason"])


def mistake_of(row: Row, named: list[str]) -> str:
    """A row that did not pass, by its mistake as its feedback names it: the known mistake its reason opens
    with, else the reason's first line where that is the check's verdict on a wrong output (a rule of the
    task's, such as "the output has the wrong shape", or a diagnosis), else the error the learner's function
    raised, else what its status says."""
    reason = str(row["reason"])
    for message in named:
        if reason.startswith(message):
            return message
    if reason.startswith("all ") and "held-out" in reason:
        return "passed its visible tests, not the held-out ones"
    if "SyntaxError" in reason and row["status"] in ("missing", "error"):
        return SYNTAX
    first = reason.split("\n")[0].split(" | ")[0].strip()  # a reason read back from a CSV is on one line
    if first and (row["status"] == "failed" or (row["status"] == "error" and " raised " not in first)):
        return shortened(first)
    if row["status"] == "error" and " raised " in first:  # the error itself, without the call's arguments
        return shortened("raised " + first.split(" raised ", 1)[1])
    return UNNAMED.get(row["status"], row["status"])


def task_table(rows: list[Row]) -> dict[str, dict]:
    """Each task, core tasks first: how many learners it was graded for, how many attempted it and how many
    passed, and the mistakes of those who attempted it, by count."""
    table: dict[str, dict] = {}
    for r in sorted((r for r in rows if not about_notebook(r)), key=lambda r: (not is_core(r["task"]), r["task"])):
        entry = table.setdefault(r["task"], {"graded": 0, "attempted": 0, "passed": 0, "mistakes": Counter(),
                                             "named": known_mistakes(r["task"]), "core": is_core(r["task"])})
        entry["graded"] += 1
        if r["status"] == "passed":
            entry["passed"] += 1
        if attempted(r):
            entry["attempted"] += 1
            if r["status"] != "passed":
                entry["mistakes"][mistake_of(r, entry["named"])] += 1
    return table


def totals(rows: list[Row]) -> dict[str, int]:
    """Each submission's points."""
    found: dict[str, int] = {}
    for r in rows:
        found[r["submission"]] = found.get(r["submission"], 0) + int(r["points"])
    return found


def histogram(points: list[int], most: int) -> list[tuple[str, int]]:
    """(label, submissions) for the points 0 to ``most``: one bar a point up to 10 points, else 10 bars."""
    width = max(1, -(-(most + 1) // 10))
    bars = []
    for low in range(0, max(most, max(points, default=0)) + 1, width):
        high = low + width - 1
        label = str(low) if width == 1 else f"{low}-{high}"
        bars.append((label, sum(low <= p <= high for p in points)))
    return bars


def points_summary(rows: list[Row], most: int) -> str:
    """One line: the submissions' points, their mean and median, and the histogram's counts."""
    points = list(totals(rows).values())
    if not points:
        return "points: no submission"
    bars = ", ".join(f"{label}: {n}" for label, n in histogram(points, most) if n)
    return (f"points (of {most}): mean {statistics.mean(points):.1f}, median {statistics.median(points):g}; "
            f"submissions by points {bars}")


def svg_histogram(bars: list[tuple[str, int]]) -> str:
    """The histogram as an inline SVG: a bar per label, its count above it."""
    tallest, step, height = max((n for _, n in bars), default=0) or 1, 48, 160
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{step * len(bars) + 20}" '
             f'height="{height + 40}" aria-labelledby="histogram-title"><title id="histogram-title">submissions '
             f'by points</title>']
    for i, (label, n) in enumerate(bars):
        h, x = round(n / tallest * height), 10 + i * step
        parts.append(f'<rect class="bar" x="{x + 4}" y="{height - h + 15}" width="{step - 8}" height="{h}"/>'
                     f'<text x="{x + step / 2}" y="{height - h + 11}" text-anchor="middle">{n}</text>'
                     f'<text x="{x + step / 2}" y="{height + 32}" text-anchor="middle">{html.escape(label)}</text>')
    return "".join(parts) + "</svg>"


def svg_rate(passed: int, graded: int) -> str:
    """A pass rate as an inline SVG bar."""
    width = round(200 * passed / graded) if graded else 0
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="200" height="14" role="img" aria-label="'
            f'{passed} of {graded} passed"><rect width="200" height="14" class="track"/>'
            f'<rect width="{width}" height="14" class="bar"/></svg>')


def rate(entry: dict) -> float:
    return entry["passed"] / entry["graded"] if entry["graded"] else 0.0


def kind(entry: dict) -> str:
    return "core" if entry["core"] else "practice"


def reteach_section(table: dict[str, dict], learners: str) -> list[str]:
    """The mistakes to reteach, across the assignment: those of learners who attempted a task and did not
    pass it, core tasks first, then by how many learners made them."""
    found = sorted(((not entry["core"], -n, task, name) for task, entry in table.items()
                    for name, n in entry["mistakes"].items()))
    items = [f'<li><span class="count">{-minus} of {table[task]["attempted"]}</span> {learners} who attempted '
             f'<a href="#task-{html.escape(task)}">{html.escape(task)}</a> ({kind(table[task])}): '
             f"{html.escape(name)}</li>" for _, minus, task, name in found[:RETEACH]]
    return ["<h2>What to reteach</h2>",
            f"<p>The mistakes of {learners} who attempted a task and did not pass it, core tasks first, then by how "
            f"many {learners} made each (a task left unwritten is under <a href=\"#not-attempted\">Not "
            "attempted</a>, not here).</p>",
            f'<ol id="reteach">{"".join(items)}</ol>' if items else
            f"<p>No {learners[:-1]} who attempted a task got it wrong.</p>"]


def tasks_section(table: dict[str, dict]) -> list[str]:
    """Each task, core first: its pass rate among those who attempted it, and their mistakes by count."""
    out = ["<h2>Tasks</h2>", '<table id="tasks"><tr><th>task</th><th></th><th>passed, of those who attempted it'
           "</th><th></th><th>not attempted</th><th>mistakes, by count</th></tr>"]
    for task, entry in table.items():
        mistakes = "".join(f'<li><span class="count">{n}</span> {html.escape(name)}</li>'
                           for name, n in entry["mistakes"].most_common())
        share = f" ({entry['passed'] / entry['attempted']:.0%})" if entry["attempted"] else ""
        out.append(f'<tr id="task-{html.escape(task)}"><td>{html.escape(task)}</td><td>{kind(entry)}</td>'
                   f'<td class="rate">{entry["passed"]} of {entry["attempted"]}{share}</td>'
                   f'<td>{svg_rate(entry["passed"], entry["attempted"])}</td>'
                   f'<td>{entry["graded"] - entry["attempted"]}</td><td><ul>{mistakes}</ul></td></tr>')
    return out + ["</table>"]


def not_attempted_section(table: dict[str, dict], learners: str) -> list[str]:
    """How many learners left each task unwritten (its stub still raising NotImplementedError, or no
    function), core first: a different matter from a wrong answer."""
    items = "".join(f"<li>{html.escape(task)} ({kind(entry)}): {entry['graded'] - entry['attempted']} of "
                    f"{entry['graded']}</li>" for task, entry in table.items() if entry["graded"] > entry["attempted"])
    return ['<h2 id="not-attempted">Not attempted</h2>',
            f"<ul>{items}</ul>" if items else f"<p>Every {learners[:-1]} attempted every task.</p>"]


def identical_section(explained: list[dict]) -> list[str]:
    """Submissions of the same bytes, and explanations answered in the same words (spaces and case aside):
    for the instructor to look at, nothing more (a copy graded once gets its own rows all the same)."""
    def groups(key) -> list[list[str]]:
        found: dict[str, list[str]] = {}
        for e in explained:
            value = key(e)
            if value:
                found.setdefault(value, []).append(e["submission"])
        return [names for names in found.values() if len(names) > 1]

    def listed(found: list[list[str]]) -> str:
        return "".join("<li>" + ", ".join(html.escape(clean(n)) for n in names) + "</li>" for names in found)

    same_bytes = groups(lambda e: e.get("notebook_sha256", ""))
    same_words = groups(lambda e: " ".join(e["answer"].split()).casefold()
                        if e["status"] in ("answered", "cut") and len(e["answer"].split()) >= 5 else "")
    out = ['<h2 id="identical">Identical submissions</h2>']
    out.append(f'<p>Notebooks of the same bytes:</p><ul id="same-bytes">{listed(same_bytes)}</ul>' if same_bytes
               else "<p>No two notebooks are of the same bytes.</p>")
    out.append(f'<p>Explanations answered in the same words:</p><ul id="same-answers">{listed(same_words)}</ul>'
               if same_words else "<p>No two explanations are answered in the same words.</p>")
    return out


def roster_section(counted: dict) -> list[str]:
    """With a roster: the students who handed in nothing, the files placed on no student, and the files of a
    student that did not count (another of theirs did)."""
    parts = [("missing", "Students who handed in nothing"), ("unplaced", "Files placed on no student (see the "
             "problems CSV)"), ("superseded", "Files that did not count (another file of the same student did)")]
    out = ["<h2>The roster</h2>"]
    for key, heading in parts:
        names = counted.get(key, [])
        items = "".join(f"<li>{html.escape(clean(n))}</li>" for n in names)
        out.append(f'<p>{heading}: {len(names)}</p>' + (f'<ul id="{key}">{items}</ul>' if names else ""))
    return out


def not_graded_section(rows: list[Row]) -> list[str]:
    """The submissions not graded task by task (unreadable, another chapter's, no chapter), by status."""
    counts = Counter(r["status"] for r in rows if about_notebook(r))
    if not counts:
        return []
    items = "".join(f"<li>{html.escape(status)}: {n}</li>" for status, n in counts.most_common())
    return ["<h2>Not graded task by task</h2>", f"<p>These submissions got one row for the whole notebook "
            f"(its reason is in the grades CSV):</p><ul>{items}</ul>"]


def answers_section(explained: list[dict], answers_file: Path) -> list[str]:
    """The explanations' answers to mark: a link to the explanations CSV, and each answer, escaped."""
    link = f'<a id="answers-csv" href="{html.escape(urllib.parse.quote(answers_file.name))}">' \
           f"{html.escape(answers_file.name)}</a>"
    counts = Counter(e["status"] for e in explained)
    said = ", ".join(f"{status}: {n}" for status, n in counts.most_common()) or "none"
    out = ["<h2>Explanations to mark</h2>",
           f"<p>Each chapter's explanation question is marked by you, in {link} (its <code>points</code> column; "
           f"no total here counts it). Answers by status: {html.escape(said)}.</p>",
           '<details><summary>The answers</summary><table id="answers"><tr><th>submission</th><th>chapter</th>'
           "<th>status</th><th>answer</th></tr>"]
    for e in explained:
        out.append("<tr>" + "".join(f"<td>{html.escape(clean(e[k]))}</td>" for k in
                                    ("submission", "chapter", "status", "answer")) + "</tr>")
    return out + ["</table></details>"]


STYLE = ("body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em;color:#111}"
         "table{border-collapse:collapse}td,th{border-bottom:1px solid #ccc;padding:.3em .6em;text-align:left;"
         "vertical-align:top}ul{margin:0;padding-left:1.2em}.count{font-weight:bold}.bar{fill:#2a6fb0}"
         ".track{fill:#e4e4e4}svg text{font-size:12px;fill:#111}")


def page(title: str, rows: list[Row], most: int, explained: list[dict], answers_file: Path,
         counts: str = "", roster: dict | None = None) -> str:
    """The report's HTML. ``rows``: one learner's rows per learner (with a roster, each student's counted
    file), ``counts``: what the grade counts, ``roster``: the roster's missing, unplaced and superseded."""
    table, points = task_table(rows), list(totals(rows).values())
    learners = "students" if roster is not None else "submissions"
    who = f"{len(points)} {learners} graded" + (
        f", {len(roster['missing'])} with nothing handed in" if roster is not None else "")
    body = [f"<h1>Class report: {html.escape(clean(title))}</h1>",
            f"<p>{html.escape(who)}. {html.escape(counts[:1].upper() + counts[1:])}{'.' if counts else ''} "
            f"{html.escape(points_summary(rows, most))}.</p>",
            *reteach_section(table, learners), "<h2>Points</h2>", svg_histogram(histogram(points, most)),
            *tasks_section(table), *not_attempted_section(table, learners), *not_graded_section(rows),
            *(roster_section(roster) if roster is not None else []), *identical_section(explained),
            *answers_section(explained, answers_file)]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Class report: '
            f"{html.escape(clean(title))}</title><meta name=\"viewport\" content=\"width=device-width, "
            f"initial-scale=1\"><style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
