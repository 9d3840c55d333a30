"""Reading a submitted notebook inside the sandbox, as a file: nbformat 4 (older formats upgraded), its code
cells, its chapter, and what it saved of when each cell ran (execution counts, times). What of a cell runs is
``cells``; running the cells is ``kernel``."""

import json
import re

from ..checks import is_int
from .contract import CHAPTERS


class Refused(Exception):
    """A notebook the recorder will not read: (status, reason). The reason never quotes the file."""


def read_notebook(notebook_path: str) -> dict:
    """The notebook as nbformat 4 (older formats upgraded), or Refused. Reasons name what is wrong and what
    to do, never the file's content (which could be anything a link pointed to)."""
    with open(notebook_path, "rb") as f:
        data = f.read()
    try:
        nb = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise Refused("invalid_notebook", f"not UTF-8 text (byte {exc.start}): not a notebook") from None
    except json.JSONDecodeError as exc:
        raise Refused("invalid_notebook", f"not a readable notebook: not JSON ({exc.msg}, line {exc.lineno} "
                                          f"column {exc.colno})") from None
    except RecursionError:
        raise Refused("invalid_notebook", "not a readable notebook: JSON nested too deeply") from None
    version = nb.get("nbformat") if isinstance(nb, dict) else None
    if not is_int(version):
        raise Refused("invalid_notebook", "not a readable notebook: no nbformat version number in it")
    if version in (1, 2, 3):  # Jupyter's older formats: upgraded as Jupyter itself would
        try:
            import nbformat

            nb = json.loads(nbformat.writes(nbformat.reads(data.decode("utf-8"), as_version=4)))
        except Exception as exc:
            raise Refused("old_notebook", f"an nbformat {version} notebook that could not be upgraded "
                                          f"({type(exc).__name__}): open it in Jupyter, save it (as nbformat 4) "
                                          "and submit it again") from None
    elif version != 4:
        raise Refused("old_notebook", f"nbformat {version}: only nbformat 4 (and 1 to 3, upgraded) is read; "
                                      "open it in Jupyter, save it and submit it again")
    if not isinstance(nb.get("cells"), list):
        raise Refused("invalid_notebook", "not a readable notebook: it has no list of cells")
    return nb


def code_cells(nb: dict) -> list[str]:
    """The source of each code cell, in order: the learner's "code cell N" is index N - 1."""
    cells = []
    for cell in nb.get("cells", []):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append("".join(map(str, source)) if isinstance(source, list) else str(source))
    return cells


def detect_chapter(nb: dict) -> str | None:
    """Which chapter a notebook is from, by its content, not its file name: the chapter named in the
    notebook's metadata, else the exercise module its code imports."""
    metadata = nb.get("metadata")
    ours = metadata.get("nexttoken") if isinstance(metadata, dict) else None
    meta = ours.get("chapter") if isinstance(ours, dict) else None
    if isinstance(meta, str) and meta in CHAPTERS:
        return meta
    found = set(re.findall(r"nexttoken\.exercises(?:\s+import\s+|\.)(ch0\d)", "\n".join(code_cells(nb))))
    found &= set(CHAPTERS)
    return found.pop() if len(found) == 1 else None


def execution_counts(nb: dict) -> list[int | None]:
    """Each code cell's execution count, as the notebook saved it (None: never run, or not saved)."""
    counts = []
    for cell in nb.get("cells", []):
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            n = cell.get("execution_count")
            counts.append(n if is_int(n) and n > 0 else None)
    return counts


def execution_times(nb: dict) -> list[float | None]:
    """When each code cell last ran, in seconds, where the notebook saved it (None elsewhere): Colab's
    ``executionInfo.timestamp`` (milliseconds), JupyterLab's ``execution["iopub.execute_input"]`` (with its
    timing recorded). Unlike execution counts, these order runs across kernel restarts."""
    from datetime import datetime

    times = []
    for cell in nb.get("cells", []):
        if not (isinstance(cell, dict) and cell.get("cell_type") == "code"):
            continue
        metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        colab, lab = metadata.get("executionInfo"), metadata.get("execution")
        when = None
        if isinstance(colab, dict) and is_int(colab.get("timestamp")) and colab["timestamp"] > 0:
            when = colab["timestamp"] / 1000
        elif isinstance(lab, dict) and isinstance(lab.get("iopub.execute_input"), str):
            try:
                when = datetime.fromisoformat(lab["iopub.execute_input"][:40].replace("Z", "+00:00")).timestamp()
            except (ValueError, OverflowError):
                when = None
        times.append(when)
    return times


def several_sessions(counts: list) -> bool:
    """Whether the saved execution counts certainly come from more than one kernel session: within one
    session each run takes the next count, so no two cells can show the same one; after a restart the
    counts begin again at 1, and a cell not run since keeps its count from before (which may be higher
    than any of the new session's)."""
    seen = [n for n in counts if n is not None]
    return len(seen) != len(set(seen))
