"""The explanations, for the instructor to mark: each submission's answer to its chapter's explanation
question (``nexttoken/exercises/explanations.py``), with the question, the rubric and the points possible,
in one CSV next to --out (grades.csv: grades-explanations.csv). Nothing here scores an answer: the
``points`` column is left blank for the instructor, and no total of grades.csv or the exports counts it.

The answer is read in the grader's own process, from the snapshot the grader took (``submissions``): the
notebook is parsed as JSON text and nothing in it runs. The notebook is still hostile, so it is parsed only
under the recorder messages' cap of ``{``, ``[`` and ``,`` (``protocol.MAX_TOKENS``), one notebook at a time;
the answer's control and invisible characters become visible escapes, it is cut at MAX_ANSWER characters
(saying so), and ``csvs.write_csv`` keeps a spreadsheet from reading any cell as a formula.

Each grading run writes the file whole after every submission, as it writes grades.csv; ``--resume`` keeps
the answers already in it (and any points the instructor typed there), and ``merge`` joins the shards'
files, found next to each shard's grades CSV.
"""

import csv
import json
import threading
import unicodedata
from pathlib import Path

from ..exercises import explanations as source
from ..recorder.notebook import detect_chapter
from . import rosters
from .csvs import about_notebook, clean, unescape, write_csv
from .exports import per_submission
from .rosters import IDENTITY, Roster
from .protocol import MAX_TOKENS

MAX_ANSWER = 2000  # characters of an answer in the CSV: 2 to 4 sentences are a few hundred
# The answer after the question and the rubric, as in every export: it cannot stand where they stand.
FIELDS = ["submission", "chapter", "status", "question", "rubric", "points_possible", "answer", "points"]
BEFORE_ISSUE_63 = ["submission", "chapter", "status", "answer", "question", "rubric", "points_possible", "points"]
WITHHELD = "not in this build (a student build leaves the rubric out): export with the full package"
# status: answered, cut (longer than MAX_ANSWER), no_answer (empty, or the placeholder untouched),
# not_read (not JSON, or too many JSON values to parse here), or the notebook's own status where it was
# not graded as a chapter (invalid_notebook, wrong_chapter, too_large, ...), missing_submission (--roster).

_PARSING = threading.Lock()  # one parsed notebook at a time in memory, whatever --jobs is


def explanations_path(out: Path) -> Path:
    """Where the answers go: next to --out (grades.csv: grades-explanations.csv), as the roster's problems."""
    return out.with_name(f"{out.stem}-explanations.csv")


def harmless(text: str) -> tuple[str, str]:
    """(status, text) for the exports: line breaks as "\\n" (a tab, a no-break or other space as a space, a
    line or paragraph separator as a line break), every character a terminal or a spreadsheet could act on
    or that does not render as its visible escape (``csvs.clean``: controls, bidirectional overrides,
    zero-width ones, variation selectors, tag characters, a combining mark with nothing visible to sit on),
    and at most MAX_ANSWER characters, the cut said at its end."""
    text = str(text).replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    text = "".join(" " if unicodedata.category(c) == "Zs" else "\n" if unicodedata.category(c) in ("Zl", "Zp")
                   else c for c in text)
    text = clean(text).strip()
    if not text:
        return "no_answer", ""
    if len(text) > MAX_ANSWER:
        return "cut", f"{text[:MAX_ANSWER]} [cut here: the first {MAX_ANSWER} of {len(text)} characters]"
    return "answered", text


def notebook_cells(nb) -> list:
    """The cells of a parsed notebook: nbformat 4's ``cells``, or nbformat 3's worksheets' cells."""
    if not isinstance(nb, dict):
        return []
    if isinstance(nb.get("cells"), list):
        return nb["cells"]
    sheets = nb.get("worksheets")
    if isinstance(sheets, list):
        return [c for sheet in sheets if isinstance(sheet, dict) and isinstance(sheet.get("cells"), list)
                for c in sheet["cells"]]
    return []


def read_answer(data: bytes) -> dict:
    """{"status", "answer"} of one submission's bytes (see ``harmless``); never raises for what they hold."""
    if data.count(b"{") + data.count(b"[") + data.count(b",") > MAX_TOKENS:
        return {"status": "not_read", "answer": f"not read: more than {MAX_TOKENS} JSON values in the "
                                                "notebook (open it to read the answer)"}
    with _PARSING:
        try:
            text = source.answer_text(notebook_cells(json.loads(data)))
        except (ValueError, RecursionError):  # not JSON (nor UTF-8), or nested too deep
            return {"status": "not_read", "answer": "not read: the notebook is not JSON"}
    status, answer = harmless(text)
    return {"status": status, "answer": answer}


def read_chapter(data: bytes) -> str | None:
    """The chapter of one submission's bytes, as the recorder finds it (``detect_chapter``: the notebook's
    metadata, else the exercise module its code imports), read here as JSON text under the same cap as an
    answer; None where none is found. For the refusal of a mixed batch's exports, before grading."""
    if data.count(b"{") + data.count(b"[") + data.count(b",") > MAX_TOKENS:
        return None
    with _PARSING:
        try:
            nb = json.loads(data)
        except (ValueError, RecursionError):
            return None
        cells = [{"cell_type": "code", "source": c.get("source", c.get("input", ""))}  # nbformat 3: "input"
                 for c in notebook_cells(nb) if isinstance(c, dict) and c.get("cell_type") == "code"]
        return detect_chapter({"metadata": nb.get("metadata") if isinstance(nb, dict) else None, "cells": cells})


def question_columns(chapter: str, table: dict | None) -> dict:
    """The question, rubric and points possible of a chapter's explanation ("" where none is known)."""
    if not chapter:
        return {"question": "", "rubric": "", "points_possible": ""}
    if table is None:
        return {"question": "", "rubric": WITHHELD, "points_possible": ""}
    entry = table[chapter]
    rubric = "\n".join(f"{p['points']} point{'s' if p['points'] != 1 else ''}: {p['point']}" for p in entry["rubric"])
    return {"question": entry["question"], "rubric": rubric, "points_possible": entry["points"]}


def export_rows(rows: list[dict], answers: dict[str, dict], expected: str | None = None) -> list[dict]:
    """One row per submission of the grades ``rows`` (in their order): its chapter (from its tasks, else
    --chapter's), its answer, and that chapter's question and rubric. A notebook not graded as a chapter
    (one row for the whole notebook: invalid, another chapter's, too large) has its status and no answer."""
    table = source.table()
    out = []
    for name, mine in per_submission(rows).items():
        tasks = [r["task"] for r in mine if not about_notebook(r)]
        chapter = tasks[0].split(".")[0] if tasks else (expected or "")
        if tasks:
            got = answers.get(name, {"status": "not_read", "answer": ""})
            status, answer = got["status"], got["answer"]
        else:
            status, answer = mine[0]["status"], ""
        out.append({"submission": name, "chapter": chapter, "status": status, "answer": answer,
                    **question_columns(chapter, table), "points": answers.get(name, {}).get("points", "")})
    return out


def missing_line(student: dict, expected: str | None, table: dict | None) -> dict:
    """The line of a roster student with no file: no answer, the assignment's question."""
    return {"submission": "-", "chapter": expected or "", "status": "missing_submission", "answer": "",
            **question_columns(expected or "", table), "points": ""}


def write(path: Path, rows: list[dict], answers: dict[str, dict], roster: Roster | None,
          expected: str | None = None) -> None:
    """The explanations CSV for the grades ``rows`` (as grades.csv holds them)."""
    lines = export_rows(rows, answers, expected)
    if roster is None:
        write_csv(path, FIELDS, lines)
    else:
        table = source.table()  # the instructor marks by student: the IDENTITY columns first
        write_csv(path, IDENTITY + FIELDS, rosters.with_identity(lines, roster,
                                                                 lambda s: missing_line(s, expected, table)))


def read(path: Path) -> dict[str, dict]:
    """{submission: {"status", "answer", "points"}} of an earlier run's explanations CSV (for --resume and
    merge; the roster's missing_submission rows are made again at each write). Missing file: {}."""
    if not path.exists():
        return {}
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames not in (FIELDS, IDENTITY + FIELDS, BEFORE_ISSUE_63, IDENTITY + BEFORE_ISSUE_63):
                raise SystemExit(f"{path} is not an explanations CSV (columns {reader.fieldnames})")
            return {unescape(r["submission"]): {k: unescape(r[k] or "") for k in ("status", "answer", "points")}
                    for r in reader if r.get("roster_status") != "missing_submission"}
    except (UnicodeDecodeError, csv.Error) as exc:
        raise SystemExit(f"{path} is not a readable explanations CSV ({type(exc).__name__}: {exc})") from None
