"""The CSVs: text any submission or file name can hold, written and read back exactly; rewritten after each
submission, through a temporary file and an atomic rename."""

import bisect
import csv
import os
import tempfile
import unicodedata
from pathlib import Path
from typing import TypedDict

from .rosters import IDENTITY

MAX_REASON = 500  # characters of a reason in the CSV (the checks explain a mistake in a few lines)
NOTEBOOK = "-"  # the task of a row about a submission as a whole (unreadable, another chapter's, no chapter)


class Row(TypedDict):
    """One row of grades.csv, by column: one task of one submission, or (``about_notebook``) the submission
    as a whole. The grader makes them with ``task_row`` and ``notebook_row``; read back (--resume, merge),
    points and max_points are text."""
    submission: str
    task: str
    points: int
    max_points: int
    status: str
    reason: str
    library_calls: str  # rebuilt library functions called where no refusal scored the task


FIELDS = list(Row.__annotations__)  # grades.csv's columns, in order


def task_row(submission: str, task: str, points: int, max_points: int, status: str, reason: str,
             library_calls: str = "") -> Row:
    return Row(submission=submission, task=task, points=points, max_points=max_points, status=status,
               reason=reason, library_calls=library_calls)


def notebook_row(submission: str, status: str, reason: str, max_points: int = 0) -> Row:
    """The one row of a submission not graded task by task: 0 points of ``max_points``."""
    return task_row(submission, NOTEBOOK, 0, max_points, status, reason)


def about_notebook(row: Row) -> bool:
    """Whether the row is about the submission as a whole (``notebook_row``), not one of its tasks."""
    return row["task"] == NOTEBOOK


def clean(value) -> str:
    """The one escaping of everything a submission writes (reasons, library_calls, file names, answers),
    before any CSV, feedback file, results.json or terminal line: every character a terminal acts on or
    that does not render becomes its visible Python escape (\\x1b, \\u202e, \\ufe0f, \\udcff): the C0 and C1
    controls, DEL, format characters (bidirectional overrides, zero-width ones, tag characters), line and
    paragraph separators, a lone surrogate (JSON's "\\ud800", a file name's undecodable byte), every
    character Unicode says to draw as nothing where unsupported (``INVISIBLE``: variation selectors, the
    combining grapheme joiner, Hangul fillers, ...), and a combining mark with no visible character before
    it to sit on. Line breaks ("\\n") are kept: a reason's lines are a feedback file's; ``shown`` and the
    CSVs' ``one_line`` fold them. Text shown after it is the text written, character for character."""
    return visible(str(value), keep_newlines=True)


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): characters a font draws as nothing.
INVISIBLE = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
             (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
             (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
             (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
_STARTS = [start for start, _ in INVISIBLE]


def invisible(c: str) -> bool:
    """Whether ``c`` is drawn as nothing (``INVISIBLE``)."""
    at = bisect.bisect_right(_STARTS, ord(c)) - 1
    return at >= 0 and ord(c) <= INVISIBLE[at][1]


def visible(text: str, keep_newlines: bool) -> str:
    """``text`` with every character that a terminal acts on or that does not render as its escape (see
    ``clean``); line breaks kept or escaped. A combining mark is kept only on a visible base (a letter,
    digit, sign or mark kept before it), so no mark is stacked out of sight on a space or an escape."""
    out, base = [], False
    for c in text:
        if c == "\n" and keep_newlines:
            out.append(c)
            base = False
            continue
        kept = c.isprintable() and not invisible(c)
        if kept and unicodedata.category(c) in ("Mn", "Me"):
            kept = base
        out.append(c if kept else _escaped(c))
        base = kept and not c.isspace()
    return "".join(out)


def _escaped(c: str) -> str:
    return c.encode("unicode_escape").decode("ascii")


def shown(value) -> str:
    """Text as printed on a terminal: ``clean``, and on one line (a line break as \\n)."""
    return clean(value).replace("\n", "\\n")


def name_text(path) -> str:
    """A submission's name as written in the CSVs: its bytes as UTF-8, a byte that is not UTF-8 as \\xNN, a
    backslash doubled and every character ``clean`` escapes escaped (a line break too), so two different
    names never give the same text (--resume keys on it) and the text is what ``clean`` leaves as it is."""
    raw = os.fsencode(path).replace(b"\\", b"\\\\")
    return visible(raw.decode("utf-8", "backslashreplace"), keep_newlines=False)


# A spreadsheet reads a cell that starts with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def escape(value) -> str:
    """A spreadsheet must not read a cell as a formula: such a cell gets a leading "'". A cell that starts
    with "'" gets one too, so the escape escapes its own marker and ``unescape`` is exact (two file names
    never read back as one)."""
    text = str(value)
    return "'" + text if text[:1] in (*FORMULA_STARTS, "'") and text != NOTEBOOK else text


def unescape(text: str) -> str:
    return text[1:] if text[:1] == "'" else text


def write_csv(path: Path, header: list[str], rows: list[dict]) -> None:
    """Any CSV of the grader's (``rows`` by column), every cell through ``clean``, written atomically."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for r in rows:
                # A reason keeps its lines for the feedback files; in a CSV it is one line.
                writer.writerow([escape(one_line(clean(r.get(h, ""))) if h == "reason" else clean(r.get(h, "")))
                                 for h in header])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def task_names(rows: list[Row]) -> list[str]:
    """The tasks the rows grade, sorted (a gradebook's columns)."""
    return sorted({r["task"] for r in rows if not about_notebook(r)})


def gradebook(rows: list[Row]) -> tuple[list[str], list[dict]]:
    """One row per submission: each task's points, the total and the maximum (what an LMS imports)."""
    book: dict[str, dict] = {}
    for r in rows:
        entry = book.setdefault(r["submission"], {"submission": r["submission"], "total": 0, "max_points": 0})
        if not about_notebook(r):
            entry[r["task"]] = r["points"]
        entry["total"] += int(r["points"])
        entry["max_points"] += int(r["max_points"])
    return ["submission", *task_names(rows), "total", "max_points"], list(book.values())


def read_previous(path: Path) -> list[Row]:
    """Rows of an earlier run (for --resume); a missing file is an empty start."""
    if not path.exists():
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames not in (FIELDS, FIELDS + IDENTITY):
                raise SystemExit(f"--resume: {path} is not a grades CSV (columns {reader.fieldnames})")
            # The roster's columns and its missing_submission rows are made again from --roster at each save.
            rows = [Row(**{k: unescape(v or "") for k, v in r.items() if k not in IDENTITY})
                    for r in reader if r.get("roster_status") != "missing_submission"]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise SystemExit(f"--resume: {path} is not a readable grades CSV ({type(exc).__name__}: {exc})") from None
    for number, r in enumerate(rows, start=2):
        if not (r["points"].isdigit() and r["max_points"].isdigit()):
            raise SystemExit(f"--resume: {path} line {number}: points are not whole numbers")
    return rows


def clean_rows(rows: list[Row]) -> list[Row]:
    """Every field of every row as encodable text (the CSV and the summary can always be written)."""
    return [{k: clean(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]


def one_line(text: str) -> str:
    """A reason as one CSV line: the check's lines (summary, input, expected, got) joined by " | "."""
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def error_row(name: str, exc: BaseException) -> Row:
    """The row of a submission the grader failed on (a bug of ours): its other submissions are graded."""
    return notebook_row(name, "grader_error", one_line(clean(f"{type(exc).__name__}: {exc}"))[:MAX_REASON])
