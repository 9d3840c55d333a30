"""The README is a front page that keeps its word, and the guide's pages (the book's parts "For instructors"
and "For contributors", guide/) link to what exists.

- README.md is at most 1,500 words (``len(text.split())``);
- every Python snippet of README.md, and of the guide's pages, runs as pasted, in a fresh process of the
  course's environment (.venv), from an empty folder; where a line prints and its comment says what it
  prints, the output holds that text. A snippet that loads SmolLM2 takes 15 to 30 s: marked slow, as are
  the guide's snippets (the README's own run in the fast tier, a few seconds each);
- every command of the shell blocks of README.md and of guide/instructors/before_you_upload.md names a
  script or module that exists, and every option it passes is one the script or module knows; every
  script README.md or the guide names exists;
- every relative link of README.md and of the guide's pages points at a file that exists, and a guide
  page links only to pages of the book (a link to any other file would fail the site's build);
- every guide page is a page of _toc.yml; the text says ``python3`` (or ``.venv/bin/python``), never a
  bare ``python``, and holds no dated figures or diary words ("this machine", "today").
"""

import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, toc_pages

README = ROOT / "README.md"
GUIDE = sorted((ROOT / "guide").rglob("*.md"))
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable
MAX_WORDS = 1500
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
SCRIPT = re.compile(r"(?<![\w/.-])((?:scripts|bench|\.ci)/[\w/.-]*\w)")
SLOW_SNIPPET = ("load_smollm2", "load_gpt2")


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def blocks(path: Path, language: str) -> list[str]:
    """The fenced code blocks of one language in a Markdown file, dedented."""
    found = []
    for indent, lang, body in FENCE.findall(path.read_text(encoding="utf-8")):
        if lang == language:
            found.append("".join(line[len(indent):] for line in body.splitlines(keepends=True)))
    return found


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return FENCE.sub("", text)


def snippets() -> list:
    params, seen = [], set()
    for path in [README, *GUIDE]:
        for k, code in enumerate(blocks(path, "python"), 1):
            if code in seen:
                continue  # the same snippet on two pages runs once
            seen.add(code)
            slow = path != README or any(name in code for name in SLOW_SNIPPET)
            params.append(pytest.param(code, id=f"{rel(path)}-{k}", marks=[pytest.mark.slow] if slow else []))
    return params


def test_readme_is_a_front_page_of_at_most_1500_words():
    words = len(README.read_text(encoding="utf-8").split())
    assert words <= MAX_WORDS, f"README.md has {words} words, more than {MAX_WORDS}: move the detail to guide/"


def test_the_readme_has_python_snippets_and_the_guide_more():
    assert blocks(README, "python"), "README.md has no Python snippet: the test below would test nothing"
    assert len(snippets()) >= 3


@pytest.mark.slow  # each snippet in a fresh Python
@pytest.mark.parametrize("code", snippets())
def test_python_snippet_runs_as_pasted(code, tmp_path):
    result = subprocess.run([PYTHON, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"the snippet failed:\n{code}\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), "the snippet printed nothing"
    for line in code.splitlines():
        match = re.match(r"\s*print\(.*\)\s*#\s*(.+)$", line)
        if match:
            assert match.group(1).strip() in result.stdout, f"{line!r} printed {result.stdout!r}"


def shell_commands(path: Path) -> list[list[str]]:
    """Each command of the file's bash blocks, as words: comments dropped, `a && b` split, a `\\` line
    joined to the next, `sudo` and leading VAR=value assignments dropped."""
    commands = []
    for block in blocks(path, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            command = []
            for word in [*words, "&&"]:
                if word in ("&&", "||", ";"):
                    while command and (command[0] == "sudo" or re.match(r"^[A-Z_]+=", command[0])):
                        command.pop(0)
                    if command:
                        commands.append(command)
                    command = []
                else:
                    command.append(word)
    return commands


def module_help(python: str, module: str) -> str:
    result = subprocess.run([python, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"python3 -m {module} --help failed:\n{result.stderr[-2000:]}"
    return result.stdout


# Pages whose shell blocks are an instructor's or a contributor's to paste as they stand: each command is
# checked as the README's are (the other guide pages' blocks hold Slurm and CI variables, unzip, cat).
COMMAND_PAGES = [README, ROOT / "guide" / "instructors" / "before_you_upload.md"]


@pytest.mark.slow  # each module's --help in a fresh Python
@pytest.mark.parametrize("page", COMMAND_PAGES, ids=rel)
def test_readme_commands_exist_with_their_options(page):
    commands = shell_commands(page)
    assert len(commands) >= (5 if page == README else 4), commands
    checked = []
    for command in commands:
        program, args = command[0], command[1:]
        if program == "bash":
            script = ROOT / args[0]
            assert script.is_file(), f"{' '.join(command)}: no {args[0]}"
            text = script.read_text()
            for option in [a for a in args[1:] if a.startswith("--")]:
                assert option in text, f"{' '.join(command)}: {args[0]} does not handle {option}"
        elif program in (".venv/bin/python", "python3") and args[0] == "-m":
            module = args[1]
            assert importlib.util.find_spec(module) is not None, f"{' '.join(command)}: no module {module}"
            options = [a.split("=")[0] for a in args[2:] if a.startswith("--") and a != "--"]
            if options:
                known = module_help(PYTHON, module)
                missing = [o for o in options if not re.search(rf"{re.escape(o)}\b", known)]
                assert not missing, f"{' '.join(command)}: {module} has no option {missing}"
        elif program == ".venv/bin/python":
            assert (ROOT / args[0]).is_file(), f"{' '.join(command)}: no {args[0]}"
        else:
            pytest.fail(f"{rel(page)} runs {program!r}, which this test does not know how to check: {command}")
        checked.append(program)
    assert "bash" in checked and ".venv/bin/python" in checked


@pytest.mark.parametrize("path", [README, *GUIDE], ids=rel)
def test_named_scripts_and_modules_exist(path):
    text = path.read_text(encoding="utf-8")
    missing = [name for name in SCRIPT.findall(text) if "*" not in name and not (ROOT / name).exists()]
    assert not missing, f"{rel(path)} names files that do not exist: {missing}"
    for module in set(re.findall(r"python3? -m ([\w.]+)", text)):
        assert importlib.util.find_spec(module) is not None, f"{rel(path)}: no module {module}"


def test_the_guide_is_in_the_book():
    pages = set(toc_pages())
    assert GUIDE, "no guide pages"
    missing = [rel(p) for p in GUIDE if rel(p).removesuffix(".md") not in pages]
    assert not missing, f"guide pages missing from _toc.yml (the site would not show them): {missing}"


@pytest.mark.parametrize("path", [README, *GUIDE], ids=rel)
def test_relative_links_point_at_files_that_exist(path):
    problems = []
    for image, text, target in LINK.findall(prose(path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = (path.parent / target.split("#")[0]).resolve()
        if not file.exists():
            problems.append(f"{target} ({text!r}) is not a file of the repository")
        elif path != README:
            if file.suffix not in (".md", ".ipynb") or file.relative_to(ROOT).with_suffix("").as_posix() \
                    not in toc_pages():
                problems.append(f"{target} ({text!r}) is not a page of the book, so the site cannot link it")
            if "#" in target:
                problems.append(f"{target}: the book has no heading anchors; link the page")
    assert not problems, f"{rel(path)}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("path", [README, *GUIDE], ids=rel)
def test_python3_and_no_diary(path):
    text = path.read_text(encoding="utf-8")
    bare = [m.group(0) for m in re.finditer(r"(?<![\w/.-])python(?= )", text)]
    assert not bare, f"{rel(path)} says `python`, which many systems lack: say python3 or .venv/bin/python"
    diary = re.findall(r"\b20\d\d-\d\d-\d\d\b|\bthis machine\b|\btoday\b|\bon these machines\b", text, re.I)
    assert not diary, f"{rel(path)} reads as a diary: {diary}"


def test_the_gradescope_rehearsals_unpacking_line_runs_as_written_in_a_fresh_folder(tmp_path):
    """The rehearsal's first line, as written, with /tmp/ag a folder that does not exist yet (nor its parent):
    it must make the folders it unpacks into (unzip -d makes only the last one). A small zip stands
    in for autograder.zip; the slow test below runs the whole rehearsal with the real one."""
    import zipfile

    (block,) = [b for b in blocks(ROOT / "guide" / "instructors" / "gradescope.md", "bash") if "run_autograder" in b]
    first = block.splitlines()[0]
    assert "/tmp/ag" in first and "unzip" in first, first
    with zipfile.ZipFile(tmp_path / "autograder.zip", "w") as archive:
        archive.writestr("run_autograder", "#!/usr/bin/env bash\n")
        archive.writestr("setup.sh", "#!/usr/bin/env bash\n")
    (tmp_path / "my.ipynb").write_text("{}")
    folder = tmp_path / "fresh" / "ag"
    done = subprocess.run(["bash", "-e", "-c", first.replace("/tmp/ag", str(folder))], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "source" / "run_autograder").is_file() and (folder / "source" / "setup.sh").is_file()
    assert (folder / "submission" / "my.ipynb").read_text() == "{}"


@pytest.mark.slow  # about a minute: the autograder's zip built, a notebook graded in the sandbox
@pytest.mark.sandbox
def test_the_gradescope_rehearsal_runs_as_written_in_a_fresh_folder():
    """guide/instructors/gradescope.md's rehearsal, its commands as written, run from a folder laid out as the
    repository root (.venv, autograder.zip, my.ipynb), with /tmp/ag moved to a folder that does not exist yet.
    That folder is under _build/ (git-ignored), not pytest's tmp_path: the submission's user id must reach the
    Python it runs ($PWD/.venv/bin/python), and tmp_path lies in a folder only root can open."""
    import os
    import shutil
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("the rehearsal runs run_autograder as root (sudo)")
    (block,) = [b for b in blocks(ROOT / "guide" / "instructors" / "gradescope.md", "bash") if "run_autograder" in b]
    (ROOT / "_build").mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="rehearsal-", dir=ROOT / "_build"))
    scratch.chmod(0o755)
    try:
        rehearse(block, scratch)
    finally:
        shutil.rmtree(scratch)


def rehearse(block: str, scratch: Path):
    import shutil

    here = scratch / "repository"
    here.mkdir()
    (here / ".venv").symlink_to(ROOT / ".venv")
    made = subprocess.run([PYTHON, str(ROOT / "scripts" / "make_gradescope_autograder.py"), "--chapter", "1"],
                          cwd=here, capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-3000:]
    shutil.copyfile(ROOT / "solutions" / "ch01.ipynb", here / "my.ipynb")
    folder = scratch / "fresh" / "ag"  # no parent made: the commands make what they need
    assert "/tmp/ag" in block and not folder.parent.exists()
    script = block.replace("/tmp/ag", str(folder)).replace("sudo ", "")
    done = subprocess.run(["bash", "-e", "-c", script], cwd=here, capture_output=True, text=True, timeout=900)
    log = done.stdout + done.stderr
    if done.returncode != 0 and "--no-sandbox" in log and "cannot start" in log:  # the grader's own refusal
        pytest.skip("bubblewrap cannot make its namespaces here and a sandbox user id cannot start this Python: "
                    "the rehearsal's grading needs one of them (its unpacking line ran, as written)")
    assert done.returncode == 0, log[-3000:]
    written = (folder / "results" / "results.json").read_text()
    assert done.stdout.rstrip().endswith(written.rstrip())  # the last command, cat, shows it
    results = json.loads(written)
    graded = [t for t in results["tests"] if t["visibility"] == "visible"]
    assert len(graded) >= 3 and all(t["status"] == "passed" and t["name"].startswith("ch01.") for t in graded)
    assert results["score"] == sum(t["max_score"] for t in graded)


@pytest.mark.slow  # grades three notebooks with --held-out in the sandbox, then merges: about a minute
def test_the_first_upload_commands_run_as_written_on_a_class_as_canvas_downloads_it(tmp_path):
    """guide/instructors/before_you_upload.md's grading and merge commands, as written (the course's Python
    named by its full path), in a folder holding submissions/ and roster.csv as Canvas exports it: every
    file Canvas named is placed, the one renamed by hand gives its student a blank (not 0) until the
    corrected roster's merge places it, and every student who did the core gets full marks."""
    first_upload(tmp_path)


def first_upload(tmp_path: Path):
    import csv
    import shutil

    page = ROOT / "guide" / "instructors" / "before_you_upload.md"
    (grade,) = [b.replace(".venv/bin/python", PYTHON) for b in blocks(page, "bash") if "nexttoken.grade --chapter" in b]
    (fix,) = [b.replace(".venv/bin/python", PYTHON) for b in blocks(page, "bash") if "nexttoken.grade merge" in b]
    (tmp_path / "submissions").mkdir()
    for name in ("ivanovadaria_1001_555_ch05.ipynb", "okaforben_LATE_1002_556_ch05-1.ipynb",
                 "Lee Ann ch05.ipynb"):  # the last renamed by hand: Canvas's name lost
        shutil.copyfile(ROOT / "solutions" / "ch05.ipynb", tmp_path / "submissions" / name)
    canvas = ("Student,ID,SIS User ID,SIS Login ID,Section,Chapter 5 (4242)\n    Points Possible,,,,,1\n"
              "\"Ivanova, Daria\",1001,S-07,divanova,A,\n\"Okafor, Ben\",1002,S-08,bokafor,A,\n"
              "\"Lee, Ann\",1003,S-09,alee,B,\n")
    (tmp_path / "roster.csv").write_text(canvas, encoding="utf-8")
    fixed = ("file,student_id,name,section,canvas_id,sis_user_id,sis_login_id\n"
             "ivanovadaria_1001_*,S-07,\"Ivanova, Daria\",A,1001,S-07,divanova\n"
             "okaforben_*_1002_*,S-08,\"Okafor, Ben\",A,1002,S-08,bokafor\n"
             "Lee Ann*,S-09,\"Lee, Ann\",B,1003,S-09,alee\n")
    (tmp_path / "roster-fixed.csv").write_text(fixed, encoding="utf-8")

    def points(name):
        with open(tmp_path / name, newline="", encoding="utf-8") as f:
            return {r["ID"]: r["Chapter 5 (4242)"] for r in csv.DictReader(f)}

    done = subprocess.run(["bash", "-e", "-c", grade], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    full = str(len(__import__("nexttoken.exercises", fromlist=["chapter"]).chapter("ch05").CORE))
    assert points("canvas.csv") == {"1001": full, "1002": full, "1003": ""}  # a blank, not 0: her file is unplaced
    assert "by its name it is Lee, Ann (S-09)" in (tmp_path / "grades-problems.csv").read_text()
    done = subprocess.run(["bash", "-e", "-c", fix], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert points("canvas-fixed.csv") == {"1001": full, "1002": full, "1003": full}
