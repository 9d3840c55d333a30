"""The sandbox's allow-list, wherever the package is installed, and what it holds. With nexttoken under /usr
(a system-wide pip, a Docker ``python`` image) ``python_roots`` drops every /usr root, which the sandbox
shows whole: the package's own files are still bound from where they are (the allow-list, never the whole
package with its held-out inputs and solutions), a package that cannot be shown so is refused, and a run
without bubblewrap imports a copy of what a sandbox shows (the package view). Every top-level entry of
the package is shown or kept outside on purpose, and what is shown imports only what is shown. The grading
runs through such installs are in test_grade_end_to_end.py."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from nexttoken.grading import sandbox
from nexttoken.grading.sandbox import policy

PACKAGE = policy.package_folder()


@pytest.fixture(autouse=True)
def own_view(monkeypatch):
    """Each test its own package view, removed after it: the grader's is removed when its process exits,
    after the test session's check for files left in its temporary folder."""
    view = policy.PackageView()
    monkeypatch.setattr(policy, "_VIEW", view)
    yield
    if view.folder is not None:
        shutil.rmtree(view.folder, ignore_errors=True)


def binds_of(cmd: list[str]) -> dict[str, str]:
    """{where it appears: what is bound there} of a bwrap command's read-only binds."""
    return {cmd[i + 2]: cmd[i + 1] for i, a in enumerate(cmd) if a == "--ro-bind"}


@pytest.mark.parametrize("roots", [[], ["/usr/local"]])
def test_a_package_the_sandbox_shows_with_usr_gets_its_allow_list_bound_from_where_it_is(monkeypatch, roots):
    """python_roots() as it is for a package under /usr or /usr/local (those roots are dropped: the sandbox
    shows /usr whole): still a --tmpfs over the package, and only the allow-list bound into it."""
    monkeypatch.setattr(policy, "python_roots", lambda: roots)
    cmd = sandbox.bwrap_command(["python"], sandbox.Limits(), 3, 61000, 4)
    at = cmd.index("--tmpfs", cmd.index(str(PACKAGE)) - 1)
    assert cmd[at + 1] == str(PACKAGE) and cmd.index("--remount-ro", at) > at
    binds = binds_of(cmd[at:])
    assert binds[str(PACKAGE / "exercises" / "__init__.py")] == str(PACKAGE / "recorder" / "stand_in.py")
    assert str(PACKAGE / "exercises" / "held_out.py") not in binds and str(PACKAGE / "grading") not in binds
    assert binds[str(PACKAGE / "generate.py")] == str(PACKAGE / "generate.py")


def test_a_package_that_is_not_a_folder_of_files_is_refused_with_what_the_machine_must_provide(monkeypatch, tmp_path):
    zipped = tmp_path / "nexttoken.zip" / "nexttoken"
    monkeypatch.setattr(policy, "package_folder", lambda: zipped)
    with pytest.raises(sandbox.SandboxError, match="installed as a folder of files"):
        sandbox.bwrap_command(["python"], sandbox.Limits(), 3, 61000, 4)
    assert "is not a folder" in sandbox.check_bwrap(sandbox.Limits(), None, 61000)
    lacking = tmp_path / "nexttoken"
    (lacking / "recorder").mkdir(parents=True)
    (lacking / "__init__.py").write_text("")
    monkeypatch.setattr(policy, "package_folder", lambda: lacking)
    assert "lacks generate.py, recorder/stand_in.py" in policy.allow_list_problem(lacking)


@pytest.mark.slow  # a recorder started as the grader starts it, in a fresh Python
def test_without_bubblewrap_the_recorder_imports_a_view_of_the_allow_list_and_the_stand_in():
    view = Path(sandbox.view_env({}, None)["PYTHONPATH"]) / "nexttoken"
    files = {p.relative_to(view).as_posix() for p in view.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert "exercises/__init__.py" in files and "recorder/main.py" in files and "generate.py" in files
    assert not {f for f in files if f.startswith(("grading/", "training/")) or f.startswith("exercises/")
                and f != "exercises/__init__.py"}
    assert (view / "exercises" / "__init__.py").read_bytes() == (PACKAGE / "recorder" / "stand_in.py").read_bytes()
    assert all(p.stat().st_mode & 0o777 in (0o644, 0o755) for p in view.rglob("*"))
    env = {"PATH": "/usr/bin:/bin", **sandbox.view_env({}, None)}
    done = subprocess.run([sys.executable, "-c", policy.PROBE], env=env, cwd="/", capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # the full package on the path instead: the probe finds it and says so
    done = subprocess.run([sys.executable, "-c", policy.PROBE], env={"PATH": "/usr/bin:/bin"}, cwd="/",
                          capture_output=True, timeout=300)
    assert done.returncode == policy.NOT_THE_STAND_IN, done.stderr[-2000:]


def test_the_view_for_the_tasks_that_forbid_generate_has_no_loop_to_save_or_read():
    rule = "forbidden call: nexttoken.generate was called, but the task says: write the loop yourself"
    view = Path(sandbox.view_env({}, rule)["PYTHONPATH"]) / "nexttoken"
    assert (view / "generate.py").read_bytes() == sandbox.without_generate(rule)
    assert not list((view / "__pycache__").glob("generate.*.pyc"))
    assert sandbox.view_env({}, rule) == sandbox.view_env({}, rule)  # made once
    assert sandbox.view_env({}, None) != sandbox.view_env({}, rule)


def test_every_top_level_entry_of_the_package_is_shown_or_kept_outside():
    """A file added to the package is put on one side on purpose: a sandbox shows it (SHOWN) or never does
    (OUTSIDE)."""
    entries = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert not set(policy.SHOWN) & set(policy.OUTSIDE)
    assert entries == set(policy.SHOWN) | set(policy.OUTSIDE), (
        f"not classified: {sorted(entries - set(policy.SHOWN) - set(policy.OUTSIDE))}; "
        f"classified but not in the package: {sorted((set(policy.SHOWN) | set(policy.OUTSIDE)) - entries)}")
    assert {p.name for p in policy.hidden(PACKAGE)} == set(policy.OUTSIDE)


def shown_modules() -> dict[str, Path]:
    """The package's modules a sandbox shows, by name: those under the allow-list, and the stand-in as
    ``nexttoken.exercises``."""
    found = helpers.modules()
    inside = {name: path for name, path in found.items()
              if path.relative_to(helpers.PACKAGE).parts[0] in policy.SHOWN}
    return {**inside, "nexttoken.exercises": helpers.PACKAGE / policy.STAND_IN[0]}


def test_every_file_the_sandbox_shows_imports_only_what_the_sandbox_shows():
    """Read from the code (every import, a function's own too): a shown file importing one kept outside
    would fail in the sandbox, or would need the allow-list to grow past what a submission may see."""
    known, shown = set(helpers.modules()), shown_modules()
    assert {"nexttoken.recorder.contract", "nexttoken.model"} <= set(shown)
    assert any(name.startswith("nexttoken.fast.") for name in shown)  # the shown folders' modules too
    outside = {name: sorted(m for m in helpers.imports(name, path, known) if m not in shown)
               for name, path in shown.items()}
    assert not {name: found for name, found in outside.items() if found}


def test_the_import_check_sees_an_import_of_the_grader(tmp_path):
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from ..grading import judge\n    import nexttoken.training\n")
    known = set(helpers.modules())
    assert helpers.imports("nexttoken.recorder.x", source, known) == {"nexttoken.grading.judge",
                                                                       "nexttoken.training"}
