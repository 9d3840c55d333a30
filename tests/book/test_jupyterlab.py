"""JupyterLab opens the course's notebooks quietly: a notebook just opened is not marked as modified (its
stored kernelspec is the one the installed kernel writes), no pop-up asks to fetch Jupyter's news, and
nothing is autosaved, so running cells does not rewrite the course's files
(scripts/jupyterlab_overrides.json, installed into .venv by scripts/setup.sh)."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from helpers import ROOT

NOTEBOOKS = sorted(str(p.relative_to(ROOT)) for folder in ("chapters", "exercises", "solutions", "appendix")
                   for p in (ROOT / folder).glob("*.ipynb")) + ["model_card.ipynb", "model_card_smollm2.ipynb"]


def test_every_notebook_stores_the_installed_kernels_own_kernelspec():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    want = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    wrong = [nb for nb in NOTEBOOKS if nbformat.read(ROOT / nb, as_version=4).metadata.get("kernelspec") != want]
    assert not wrong, f"kernelspec is not {want} in {wrong}: run scripts/execute_notebooks.py on them"


def test_the_news_pop_up_is_off_in_the_courses_jupyterlab():
    overrides = json.loads((ROOT / "scripts" / "jupyterlab_overrides.json").read_text())
    schema = Path(sys.prefix) / "share/jupyter/lab/schemas/@jupyterlab/apputils-extension/notification.json"
    properties = json.loads(schema.read_text())["properties"]  # the setting names are JupyterLab's own
    setting = overrides["@jupyterlab/apputils-extension:notification"]
    assert setting == {"fetchNews": "false", "checkForUpdates": False} and set(setting) <= set(properties)
    installed = Path(sys.prefix) / "share/jupyter/lab/settings/overrides.json"
    assert installed.read_text() == (ROOT / "scripts" / "jupyterlab_overrides.json").read_text(), \
        "run bash scripts/setup.sh"


@pytest.mark.slow  # starts JupyterLab's server
def test_jupyterlab_does_not_autosave_the_courses_notebooks(tmp_path):
    """JupyterLab, given the course's overrides.json (as scripts/setup.sh installs it), serves autosave off:
    its settings API gives the page false as autosave's default, and no user setting over it (JupyterLab's
    own default, true, saves a notebook two minutes after a learner runs a cell, rewriting the file)."""
    import shutil
    import urllib.request

    settings = tmp_path / "settings"
    settings.mkdir()
    shutil.copyfile(ROOT / "scripts" / "jupyterlab_overrides.json", settings / "overrides.json")
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    lab = subprocess.Popen([str(Path(sys.executable).parent / "jupyter"), "lab", "--allow-root", "--no-browser",
                            f"--port={port}", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
                            "--ServerApp.password=", f"--ServerApp.root_dir={tmp_path}",
                            f"--LabApp.app_settings_dir={settings}", f"--LabApp.user_settings_dir={tmp_path / 'user'}"],
                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/docmanager-extension:plugin"
    try:
        for _ in range(60):  # the server's start
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    plugin = json.loads(response.read())
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("JupyterLab did not answer in 60 s")
    finally:
        lab.terminate()
        lab.wait(timeout=30)
    # the server applies overrides.json to the schema's defaults; the learner's own settings (none here) win
    assert plugin["schema"]["properties"]["autosave"]["default"] is False and "autosave" not in plugin["settings"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # about 40 s: starts JupyterLab and opens two notebooks in headless Chromium
@pytest.mark.browser
def test_jupyterlab_opens_a_chapter_and_an_exercise_unmodified_and_without_the_news_pop_up(tmp_path):
    from helpers import CHROMEDRIVER, CHROMIUM
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("needs chromium and chromium-driver (bash scripts/setup_browser.sh)")
        pytest.skip("needs chromium and chromium-driver (bash scripts/setup_browser.sh)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    lab = subprocess.Popen([str(Path(sys.executable).parent / "jupyter"), "lab", "--allow-root", "--no-browser",
                            f"--port={port}", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
                            "--ServerApp.password=", f"--ServerApp.root_dir={ROOT}",
                            # the checkpoint JupyterLab makes of a notebook it opens: here, not in the repository
                            f"--FileCheckpoints.checkpoint_dir={tmp_path / 'checkpoints'}"],
                           cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        for _ in range(60):  # the server's start
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(1)
        seen = {}
        for notebook in ("chapters/01_chain_rule.ipynb", "exercises/ch01.ipynb"):
            driver.get(f"http://127.0.0.1:{port}/lab/tree/{notebook}")
            name = Path(notebook).name
            state, opened = None, time.time()
            for _ in range(90):  # until the kernel is idle (the status bar says so), then a few seconds more
                time.sleep(1)
                state = driver.execute_script(
                    "const tab = [...document.querySelectorAll('.lm-TabBar-tab')]"
                    ".find(t => t.textContent.trim() === arguments[0]);"
                    "const bar = document.querySelector('#jp-main-statusbar');"
                    "return {found: !!tab, dirty: !!tab && tab.classList.contains('jp-mod-dirty'),"
                    " idle: !!bar && /Idle/.test(bar.textContent),"
                    " toasts: [...document.querySelectorAll('.Toastify__toast')].map(t => t.textContent)};", name)
                if state["found"] and (state["idle"] or time.time() - opened > 40):
                    break
            time.sleep(5)  # JupyterLab writes the kernel's metadata into the notebook once its session starts
            state = driver.execute_script(
                "const tab = [...document.querySelectorAll('.lm-TabBar-tab')]"
                ".find(t => t.textContent.trim() === arguments[0]);"
                "return {found: !!tab, dirty: !!tab && tab.classList.contains('jp-mod-dirty'), idle: arguments[1],"
                " toasts: [...document.querySelectorAll('.Toastify__toast')].map(t => t.textContent)};",
                name, state["idle"])
            seen[notebook] = state
        for notebook, state in seen.items():
            assert state["found"] and state["idle"], f"{notebook} did not open with an idle kernel: {state}"
            assert not state["dirty"], f"{notebook} is marked as modified just after opening"
            assert not any("news" in t.lower() for t in state["toasts"]), state["toasts"]
    finally:
        driver.quit()
        lab.terminate()
        lab.wait(timeout=30)
