"""Where grading a class leaves its files when an instructor follows the README and the guides: nothing of
it (students' notebooks, grades, feedback) can be committed by mistake."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "guide" / "instructors").glob("*.md"))]
WRITTEN = re.compile(r"--(out|gradebook|feedback|gradescope|canvas|roster) ([A-Za-z0-9_.$/{}-]+)")


def named_paths() -> set[str]:
    """Every file or folder the pages' grading commands name (outputs, the roster, the submissions), with
    the grader's files made next to --out (X-problems.csv, X-explanations.csv, X-report.html)."""
    found = set()
    for page in PAGES:
        for command in re.findall(r"nexttoken\.grade[^\n`]*", page.read_text(encoding="utf-8")):
            for option, path in WRITTEN.findall(command):
                if path.isupper() or "$" in path:  # a placeholder (DIR, FILE) or a shell variable
                    continue
                found.add(path if path.endswith(".csv") else path.rstrip("/") + "/")  # a folder
                if option == "out":
                    found |= {path.replace(".csv", "-problems.csv"), path.replace(".csv", "-explanations.csv"),
                              path.replace(".csv", "-report.html")}
            found |= {m.split("/")[0] + "/" for m in re.findall(r"(submissions/[^\s`]*)", command)}
    return found


def test_the_pages_name_grading_files():
    assert {"grades.csv", "gradebook.csv", "submissions/", "feedback/", "grades-explanations.csv",
            "grades-report.html"} <= named_paths()


@pytest.mark.parametrize("path", sorted(named_paths()))
def test_every_grading_file_the_pages_name_is_ignored_by_git(path):
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
    assert done.returncode == 0, f"{path}: a grading command in the guides writes it, and git would commit it"


def test_every_grading_example_names_its_chapter():
    """A batch of notebooks of several chapters cannot misfile a grade: every grading command in the pages
    names the assignment's chapter (issue 66; an export without it is refused when the chapters differ)."""
    commands = [command for page in PAGES
                for command in re.findall(r"nexttoken\.grade[^\n`]*", page.read_text(encoding="utf-8")
                                          .replace("\\\n", " ")) if "--out" in command]
    assert len(commands) >= 6
    assert [c for c in commands if not re.search(r"--chapter \d", c)] == []


@pytest.mark.parametrize("path", ["feedback-fixed/", "gradescope-ho/", "grades-ho.csv", "grades-ho-report.html",
                                  "canvas-fixed.csv", "roster-canvas.csv", "gradebook-2.csv"])
def test_the_variants_an_instructor_makes_are_ignored_too(path):
    """A second run's folder or CSV named after the first (another --held-out run, a corrected roster)."""
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
    assert done.returncode == 0, f"{path}: git would commit it"
