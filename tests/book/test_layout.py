"""guide/contributors/layout.md names what the repository holds, checked against git's own list of files:
every tracked top-level file and folder, every file of lib/nexttoken (its modules and its data), and every
file of the other folders whose table rows list their files one by one. A file added there and not to the
page fails this test."""

import re
import subprocess

import pytest
from helpers import ROOT

LAYOUT = ROOT / "guide" / "contributors" / "layout.md"
# folders whose row names each file (relative to the row's folder); the others are named as a whole
LISTED = ["lib/nexttoken/", "scripts/", "_ext/", "_static/", "live/", "bench/", ".github/workflows/"]
UNNAMED = {"__init__.py"}  # a package's marker: the row names the package


def tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"needs a git checkout: {err}")
    return out.splitlines()


def rows() -> dict[str, set[str]]:
    """Each row of the table: its first cell's first path -> every `code` span of the row."""
    table = {}
    for line in LAYOUT.read_text().splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) >= 2:
            spans = set(re.findall(r"`([^`]+)`", line))
            for first in re.findall(r"`([^`]+)`", cells[0]):
                table[first] = spans
    return table


def unnamed(files: list[str], table: dict[str, set[str]]) -> list[str]:
    everywhere = set().union(*table.values())
    missing = []
    for top in sorted({f.split("/")[0] + ("/" if "/" in f else "") for f in files}):
        if not any(span == top or span.startswith(top) and top.endswith("/") for span in everywhere):
            missing.append(top)  # a folder is named by itself or by a path inside it (`.ci/run`)
    for path in files:
        folder = max((f for f in LISTED if path.startswith(f)), key=len, default=None)
        if folder is None or path.rsplit("/", 1)[-1] in UNNAMED:
            continue
        # named in its own folder's row (lib/nexttoken/grading/'s row names cli.py), or by its path
        # relative to a listed folder anywhere (scripts/'s row names gradescope/'s files)
        own = path[: path.rindex("/") + 1]
        name = path[len(own):]
        if name not in table.get(own, ()) and path[len(folder):] not in everywhere and path not in everywhere:
            missing.append(path)
    return missing


def test_layout_names_every_tracked_folder_module_and_listed_file():
    files = tracked()
    table = rows()
    assert {"lib/nexttoken/", "scripts/", "tests/"} <= set(table)
    assert not unnamed(files, table), f"not in {LAYOUT.relative_to(ROOT)}: {unnamed(files, table)}"


def test_the_check_sees_a_missing_file():
    """The check itself: a new module, a new script and a new top-level folder are each reported."""
    files = tracked() + ["lib/nexttoken/new_module.py", "scripts/new.sh", "newfolder/a.txt",
                         "lib/nexttoken/grading/x.py"]
    assert unnamed(files, rows()) == ["newfolder/", "lib/nexttoken/new_module.py", "scripts/new.sh",
                                      "lib/nexttoken/grading/x.py"]
