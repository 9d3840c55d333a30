"""With a real repository address (scripts/set_repository.py), the site's "Open in Colab" links: every
notebook page of the book has one, and each points at that repository's notebook, a file that exists."""

import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from helpers import ROOT

pytestmark = pytest.mark.slow  # a build of the site (about 20 s)

URL = "https://github.com/example-owner/example-course"


def test_every_colab_link_points_at_an_existing_notebook(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from set_repository import COLAB, set_repository

    out = tmp_path / "config"
    out.mkdir()
    # set_repository edits a copy of the config (the notebooks' install cells are not needed for the links)
    shutil.copyfile(ROOT / "_config.yml", out / "_config.yml")
    set_repository(URL, root=out)
    config = yaml.safe_load((out / "_config.yml").read_text())
    assert config["launch_buttons"]["colab_url"] == COLAB and config["repository"]["url"] == URL
    config.setdefault("execute", {})["execute_notebooks"] = "off"
    for name, path in (config.get("sphinx", {}).get("local_extensions") or {}).items():
        config["sphinx"]["local_extensions"][name] = str((ROOT / path).resolve())
    (out / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    done = subprocess.run([str(jupyter_book), "build", str(ROOT), "--path-output", str(tmp_path / "site"),
                           "--config", str(out / "_config.yml"), "-n", "-W", "--keep-going"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    html = tmp_path / "site" / "_build" / "html"
    prefix = f"{COLAB}/github/{urlparse(URL).path.strip('/')}/blob/{config['repository']['branch']}/"
    pages_with_notebooks = {p.relative_to(ROOT).with_suffix(".html") for folder in ("chapters", "exercises", "appendix")
                            for p in (ROOT / folder).glob("*.ipynb")}
    seen = {}
    for page in html.rglob("*.html"):
        for link in set(re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', page.read_text())):
            assert link.startswith(prefix), link
            seen[page.relative_to(html)] = link[len(prefix):]
    assert pages_with_notebooks <= set(seen), sorted(map(str, pages_with_notebooks - set(seen)))
    for page, notebook in seen.items():
        assert (ROOT / notebook).is_file(), f"{page}: its Colab link names {notebook}, which does not exist"
        assert Path(notebook).with_suffix(".html") == page, (page, notebook)
