"""The graded explanation of each chapter: one "why" question, answered in a few sentences in a Markdown
cell of the exercise notebook, which the instructor marks against a rubric (it is never auto-scored).

The solution notebook is the source. Just before its "## Going deeper: what you built" section it has three Markdown
cells:

- the question: a heading ``## Explain: TOPIC [core, about 3 minutes]`` (or ``[practice]``), the question,
  and a last paragraph that starts "Answer in the cell below" (how to answer: not part of the question);
- the answer cell, marked twice (cell metadata ``{"nexttoken": {"answer": "chNN.explain"}}`` and the
  invisible HTML comment ``<!-- answer: chNN.explain -->`` as its first line), holding a model answer;
- the rubric, marked by ``{"nexttoken": {"rubric": "chNN.explain"}}``: lines ``- N point(s): what an
  answer should say``.

``scripts/make_exercises.py`` writes ``explanations.json`` (this folder) from them: per chapter the
question, the rubric and the model answer. In ``exercises/`` the answer cell holds the marker and
``PLACEHOLDER`` only, and the rubric cell is left out. The student build leaves ``explanations.json``
out, like the solutions; the grader (``nexttoken.grading.read``) reads each submission's answer
with ``answer_text`` and exports it with the rubric for the instructor to mark.

The functions here read cells as plain JSON (a submission's, which may hold anything), never run them.
"""

import json
import re
from importlib import resources

PLACEHOLDER = "*Your answer (2 to 4 sentences): double-click to edit.*"
HEADING = re.compile(r"\A\s*#{1,6}[ \t]+Explain\b", re.I)  # the question cell's first line
ANY_HEADING = re.compile(r"\A\s*#{1,6}[ \t]")  # the next section starts at a cell that opens with a heading
MARKER = re.compile(r"<!--\s*answer:\s*ch\d\d\.explain\s*-->\n?")
INSTRUCTIONS = "Answer in the cell below"  # the question cell's last paragraph starts so: not part of the question


def task_id(chapter: str) -> str:
    return f"{chapter}.explain"


def marker(chapter: str) -> str:
    return f"<!-- answer: {task_id(chapter)} -->"


def source_text(cell) -> str:
    """A cell's source as one string, whatever a (hostile) notebook holds there: a string, a list of
    strings (nbformat's lines), or anything else (no text)."""
    source = cell.get("source") if isinstance(cell, dict) else None
    if isinstance(source, str):
        return source
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return ""


def ours(cell, key: str):
    """``cell.metadata.nexttoken[key]``, or None where any level is missing or not a dict."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    mine = metadata.get("nexttoken") if isinstance(metadata, dict) else None
    return mine.get(key) if isinstance(mine, dict) else None


def is_markdown(cell) -> bool:
    return isinstance(cell, dict) and cell.get("cell_type") == "markdown"


def is_question(cell) -> bool:
    return is_markdown(cell) and bool(HEADING.match(source_text(cell)))


def is_marked_answer(cell) -> bool:
    """The answer cell as make_exercises wrote it: by its metadata, or by its marker where a notebook
    editor dropped the metadata."""
    return is_markdown(cell) and (isinstance(ours(cell, "answer"), str) or bool(MARKER.search(source_text(cell))))


def heading_level(text: str) -> int | None:
    """The level of the Markdown heading a cell's text opens with (``## Explain`` is 2), or None."""
    found = re.match(r"\A\s*(#{1,6})[ \t]", text)
    return len(found.group(1)) if found else None


def answer_cells(cells: list) -> list:
    """The cells that hold the learner's answer: every marked answer cell, and every Markdown cell of the
    Explain section (after its question cell, up to the next heading of the question's level or above): a
    learner who retyped the cell (Colab, another editor), added one below it or put it under a heading of
    their own (``### My answer``) is still read. A rubric cell (solutions) is not."""
    found = [i for i, cell in enumerate(cells) if is_marked_answer(cell)]
    start = next((i for i, cell in enumerate(cells) if is_question(cell)), None)
    if start is not None:
        level = heading_level(source_text(cells[start])) or 1
        for i in range(start + 1, len(cells)):
            cell = cells[i]
            if is_markdown(cell) and (heading_level(source_text(cell)) or 7) <= level:
                break
            if is_markdown(cell) and ours(cell, "rubric") is None:
                found.append(i)
    return [cells[i] for i in sorted(set(found))]


def typed_into_question(cells: list) -> str:
    """What the learner typed into the question cell itself, below its last paragraph ("Answer in the cell
    below ..."): "" where nothing follows it (or the cell no longer has it to tell the question from an
    answer)."""
    question = next((cell for cell in cells if is_question(cell)), None)
    paragraphs = re.split(r"\n[ \t]*\n", source_text(question).strip()) if question is not None else []
    last = max((i for i, p in enumerate(paragraphs) if p.lstrip().startswith(INSTRUCTIONS)), default=None)
    return "" if last is None else "\n\n".join(paragraphs[last + 1:]).strip()


def without_scaffold(text: str) -> str:
    """A cell's text without the marker and the placeholder: what the learner wrote (may be "")."""
    text = MARKER.sub("", text)
    for placeholder in (PLACEHOLDER, PLACEHOLDER.strip("*")):
        text = text.replace(placeholder, "")
    return text.strip()


def answer_text(cells) -> str:
    """The learner's answer in a notebook's cells (JSON), "" where there is none (an untouched placeholder,
    an empty cell, no Explain section): typed into the question cell below the question, into the answer
    cell, or into cells of their own in the Explain section."""
    if not isinstance(cells, list):
        return ""
    parts = [typed_into_question(cells)] + [without_scaffold(source_text(cell)) for cell in answer_cells(cells)]
    return "\n\n".join(part for part in parts if part)


def table() -> dict | None:
    """{chapter: {"task", "title", "question", "rubric": [{"points", "point"}], "points", "model_answer"}}
    from the shipped explanations.json; None in a student build, which leaves it out."""
    shipped = resources.files(__package__).joinpath("explanations.json")
    if not shipped.is_file():
        return None
    return json.loads(shipped.read_text(encoding="utf-8"))
