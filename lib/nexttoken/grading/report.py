"""The class report: one HTML page next to --out (grades.csv: grades-report.html) for the instructor, written
after each batch and merge: each task's pass rate and the class's mistakes by the name the feedback gives
them, the tasks most failed, a histogram of the submissions' points, and the explanations' answers to mark
(with a link to the explanations CSV). It works offline: no script, no font, no request; its plots are
inline SVG drawn here. Everything a submission wrote (file names, answers) is escaped (``html.escape``)
after ``rows.clean``, and the page is written as the CSVs are (``outputs.write_atomically``)."""

import html
import statistics
import urllib.parse
from collections import Counter
from pathlib import Path

from ..exercises import chapter
from .rows import Row, about_notebook, clean

MOST_FAILED = 5  # tasks named under "most failed"
MAX_NAME = 200  # characters of a mistake's name
UNNAMED = {"error": "it raised an exception",
           "missing": "the function is missing", "not_implemented": "still raises NotImplementedError",
           "timeout": "it ran past the time limit", "crashed": "the process running it stopped"}


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


def mistake_of(row: Row, named: list[str]) -> str:
    """A row that did not pass, by its mistake as its feedback names it: the known mistake its reason opens
    with, else the reason's first line where that is the check's verdict on a wrong output (a rule of the
    task's, such as "the output has the wrong shape", or a diagnosis), else what its status says."""
    reason = str(row["reason"])
    for message in named:
        if reason.startswith(message):
            return message
    if reason.startswith("all ") and "held-out" in reason:
        return "passed its visible tests, not the held-out ones"
    first = reason.split("\n")[0].split(" | ")[0].strip()  # a reason read back from a CSV is on one line
    if first and (row["status"] == "failed" or (row["status"] == "error" and " raised " not in first)):
        return first[:MAX_NAME]
    return UNNAMED.get(row["status"], row["status"])


def task_table(rows: list[Row]) -> dict[str, dict]:
    """Each task: how many submissions it was graded for, how many passed, and the mistakes by count."""
    table: dict[str, dict] = {}
    for r in rows:
        if about_notebook(r):
            continue
        entry = table.setdefault(r["task"], {"graded": 0, "passed": 0, "mistakes": Counter(),
                                             "named": known_mistakes(r["task"])})
        entry["graded"] += 1
        if r["status"] == "passed":
            entry["passed"] += 1
        else:
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


def tasks_section(table: dict[str, dict]) -> list[str]:
    """Each task's pass rate and its mistakes by count, most frequent first."""
    out = ["<h2>Tasks</h2>", '<table id="tasks"><tr><th>task</th><th>passed</th><th></th>'
           "<th>mistakes, by count</th></tr>"]
    for task, entry in table.items():
        mistakes = "".join(f'<li><span class="count">{n}</span> {html.escape(name)}</li>'
                           for name, n in entry["mistakes"].most_common())
        out.append(f'<tr id="task-{html.escape(task)}"><td>{html.escape(task)}</td><td class="rate">'
                   f'{entry["passed"]} of {entry["graded"]} ({rate(entry):.0%})</td>'
                   f'<td>{svg_rate(entry["passed"], entry["graded"])}</td><td><ul>{mistakes}</ul></td></tr>')
    return out + ["</table>"]


def most_failed_section(table: dict[str, dict]) -> list[str]:
    """The tasks the fewest submissions passed, each with its most frequent mistake."""
    failed = sorted((t for t in table if table[t]["passed"] < table[t]["graded"]), key=lambda t: (rate(table[t]), t))
    items = []
    for task in failed[:MOST_FAILED]:
        entry = table[task]
        top, n = entry["mistakes"].most_common(1)[0]
        items.append(f'<li><a href="#task-{html.escape(task)}">{html.escape(task)}</a>: '
                     f'{entry["graded"] - entry["passed"]} of {entry["graded"]} did not pass; most often '
                     f'({n}): {html.escape(top)}</li>')
    return ["<h2>Tasks most failed</h2>", f'<ol id="most-failed">{"".join(items)}</ol>' if items
            else "<p>Every task was passed by every submission graded for it.</p>"]


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


def page(title: str, rows: list[Row], most: int, explained: list[dict], answers_file: Path) -> str:
    """The report's HTML."""
    table, points = task_table(rows), list(totals(rows).values())
    body = [f"<h1>Class report: {html.escape(title)}</h1>",
            f"<p>{len(points)} submissions. {html.escape(points_summary(rows, most))}.</p>",
            "<h2>Points</h2>", svg_histogram(histogram(points, most)),
            *most_failed_section(table), *tasks_section(table), *not_graded_section(rows),
            *answers_section(explained, answers_file)]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Class report: '
            f"{html.escape(title)}</title><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
