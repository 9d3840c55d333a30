"""The text any submission or file name can hold, made safe to show and written back exactly: every
character a terminal acts on or that does not render escaped (``clean``, ``shown``), a file's name as text
(``name_text``), a spreadsheet cell that would be a formula (``escape``, ``unescape``), a reason on one line
(``one_line``). Every CSV, feedback file, results.json, report page and terminal line of the grader's
passes here."""

import bisect
import os
import unicodedata


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
    """A spreadsheet must not read a cell as a formula: such a cell gets a leading "'" (a lone "-", the task
    of a row about a notebook as a whole, is none). A cell that starts with "'" gets one too, so the escape
    escapes its own marker and ``unescape`` is exact (two file names never read back as one)."""
    text = str(value)
    return "'" + text if text[:1] in (*FORMULA_STARTS, "'") and text != "-" else text  # "-": rows.NOTEBOOK


def unescape(text: str) -> str:
    return text[1:] if text[:1] == "'" else text


def one_line(text: str) -> str:
    """A reason as one CSV line: the check's lines (summary, input, expected, got) joined by " | "."""
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())
