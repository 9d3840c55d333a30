"""What the grader reads of a submission, the first stage of its way through grading: the file itself
(regular files only, never through a symbolic link, up to a size cap, never blocking on a FIFO or a
device; each read once, at the start, into a private folder), and what the grader's own process reads
from the notebook's JSON text, where nothing of it runs: the explanation's answer, and the chapter.

The notebook is hostile, so its JSON is parsed only under the recorder messages' cap of ``{``, ``[`` and
``,`` (``MAX_TOKENS``), one notebook at a time; the answer's control and invisible characters become
visible escapes, and it is cut at MAX_ANSWER characters (saying so).
"""

import errno
import hashlib
import json
import os
import stat
import tempfile
import threading
import unicodedata
from pathlib import Path

from ..exercises import explanations as source
from ..recorder.contract import MAX_TOKENS
from ..recorder.notebook import detect_chapter
from .text import clean, name_text

MAX_STRUCTURES = 1_000_000  # JSON objects and lists in a submission: more is refused before any parsing


class IsALink(Exception):
    """A component of a submission's path is a symbolic link."""


def open_no_symlinks(path: Path) -> int:
    """A descriptor of ``path``, opened one component at a time with O_NOFOLLOW (what openat2's
    RESOLVE_NO_SYMLINKS does, which Python does not offer): raises IsALink, naming the component, where
    any component of the path as given is a symbolic link."""
    parts = [p for p in os.fsencode(path).split(b"/") if p not in (b"", b".")]
    if not parts:
        raise IsADirectoryError(str(path))
    folder = os.open("/" if os.fsencode(path).startswith(b"/") else ".", os.O_PATH | os.O_DIRECTORY)
    try:
        for i, part in enumerate(parts):
            if stat.S_ISLNK(os.lstat(part, dir_fd=folder).st_mode):
                raise IsALink(os.fsdecode(b"/".join(parts[:i + 1])))
            last = i == len(parts) - 1
            flags = (os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY) if last else (os.O_PATH | os.O_DIRECTORY)
            try:  # O_NOFOLLOW: a link swapped in after the lstat is refused here (ELOOP, ENOTDIR)
                fd = os.open(part, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
            except OSError as exc:
                swapped = exc.errno in (errno.ELOOP, errno.ENOTDIR)
                if swapped and stat.S_ISLNK(os.lstat(part, dir_fd=folder).st_mode):
                    raise IsALink(os.fsdecode(b"/".join(parts[:i + 1]))) from None
                raise
            os.close(folder)
            folder = fd
        return folder
    except BaseException:
        os.close(folder)
        raise


def read_submission(path: Path, max_bytes: int) -> tuple[bytes | None, tuple[str, str] | None]:
    """(data, None), or (None, (status, reason)) for what is not a regular file within the size cap."""
    try:
        fd = open_no_symlinks(path)  # O_NONBLOCK: a FIFO opens at once
    except IsALink as exc:
        return None, ("symlink", f"a symbolic link ({clean(name_text(exc.args[0]))}), not graded: "
                                 "submit the notebook file itself")
    except OSError as exc:
        return None, ("unreadable", f"could not open it: {exc.strerror}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, ("not_a_file", "not a regular file (a folder, FIFO, device or socket); "
                                        "only regular files are graded")
        if info.st_size > max_bytes:
            return None, ("too_large", f"{info.st_size} bytes, over the limit of {max_bytes} (--max-size)")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:  # it grew while being read
            return None, ("too_large", f"over the limit of {max_bytes} bytes (--max-size)")
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if data.count(b"{") + data.count(b"[") > MAX_STRUCTURES:  # before anything parses it
        return None, ("too_complex", f"more than {MAX_STRUCTURES} JSON objects and lists; clear its outputs "
                                     "and metadata (Jupyter: Edit > Clear Outputs of All Cells) and save again")
    return data, None


class Snapshots:
    """Every submission read once, at the start, into a private folder (mode 0700): what is graded is what
    was there then, whatever is renamed, swapped for a link or rewritten during the batch. Files of the
    same bytes are noted (``first``): the grader grades them once and gives each its own rows."""

    def __init__(self, paths: list[Path], max_bytes: int):
        self.folder = tempfile.TemporaryDirectory(prefix="nexttoken-snapshots-")
        self.taken: dict[str, Path | tuple[str, str]] = {}
        self.first: dict[str, str] = {}  # name -> the first name read with the same bytes (itself if none)
        by_digest: dict[bytes, str] = {}
        for number, path in enumerate(paths):
            data, problem = read_submission(path, max_bytes)
            name = name_text(path)
            if problem is not None:
                self.taken[name] = problem
                self.first[name] = name
                continue
            copy = Path(self.folder.name) / f"{number}.ipynb"
            copy.write_bytes(data)
            self.taken[name] = copy
            self.first[name] = by_digest.setdefault(hashlib.sha256(data).digest(), name)

    def read(self, name: str) -> tuple[bytes | None, tuple[str, str] | None]:
        taken = self.taken[name]
        return (None, taken) if isinstance(taken, tuple) else (taken.read_bytes(), None)

    def close(self) -> None:
        self.folder.cleanup()


MAX_ANSWER = 2000  # characters of an answer in the CSV: 2 to 4 sentences are a few hundred
_PARSING = threading.Lock()  # one parsed notebook at a time in memory, whatever --jobs is


def too_many_values(data: bytes) -> bool:
    """Whether the bytes hold more JSON values than the grader parses (the recorder messages' cap)."""
    return data.count(b"{") + data.count(b"[") + data.count(b",") > MAX_TOKENS


def harmless(text: str) -> tuple[str, str]:
    """(status, text) for the exports: line breaks as "\\n" (a tab, a no-break or other space as a space, a
    line or paragraph separator as a line break), every character a terminal or a spreadsheet could act on
    or that does not render as its visible escape (``text.clean``: controls, bidirectional overrides,
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
    if too_many_values(data):
        return {"status": "not_read", "answer": f"not read: more than {MAX_TOKENS} JSON values in the "
                                                "notebook (open it to read the answer)"}
    with _PARSING:
        try:
            text = source.answer_text(notebook_cells(json.loads(data)))
        except (ValueError, RecursionError):  # not JSON (nor UTF-8), or nested too deep
            return {"status": "not_read", "answer": "not read: the notebook is not JSON"}
    status, answer = harmless(text)
    return {"status": status, "answer": answer}


def answer(data: bytes) -> dict:
    """``read_answer``, where a bug of ours in reading costs the answer, never the submission's grades."""
    try:
        return read_answer(data)
    except Exception as exc:
        return {"status": "not_read", "answer": f"not read: the grader could not read it ({type(exc).__name__})"}


def read_chapter(data: bytes) -> str | None:
    """The chapter of one submission's bytes, as the recorder finds it (``detect_chapter``: the notebook's
    metadata, else the exercise module its code imports), read here as JSON text under the same cap as an
    answer; None where none is found. For the refusal of a mixed batch's exports, before grading."""
    if too_many_values(data):
        return None
    with _PARSING:
        try:
            nb = json.loads(data)
        except (ValueError, RecursionError):
            return None
        cells = [{"cell_type": "code", "source": c.get("source", c.get("input", ""))}  # nbformat 3: "input"
                 for c in notebook_cells(nb) if isinstance(c, dict) and c.get("cell_type") == "code"]
        return detect_chapter({"metadata": nb.get("metadata") if isinstance(nb, dict) else None, "cells": cells})
