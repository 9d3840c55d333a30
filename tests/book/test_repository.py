"""The repository's address lives in _config.yml; every notebook's Colab install cell agrees with it."""

import shutil

import nbformat
import pytest
import yaml
from helpers import INSTALL_LINE, ROOT, learner_notebooks, load_script, repository_url, toc_notebooks


def load_set_repository():
    module = load_script("scripts/set_repository.py")
    return module


def install_problems(paths, url: str) -> list[str]:
    """Why each notebook's first code cell is not the Colab guard installing the package from ``url``."""
    problems = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code").source
        where = f"{path.parent.name}/{path.name}"
        if 'if "google.colab" in sys.modules:' not in first:
            problems.append(f"{where}: first code cell is not the Colab guard")
        if INSTALL_LINE.findall(first) != [url]:
            problems.append(f"{where}: first code cell installs {INSTALL_LINE.findall(first)}, not {url}")
    return problems


def test_every_notebook_installs_the_package_from_the_configured_repository():
    notebooks = learner_notebooks()
    folders = {p.parent.name for p in notebooks}
    assert {"chapters", "exercises", "solutions", "appendix"} <= folders
    assert ROOT / "model_card.ipynb" in notebooks
    assert set(toc_notebooks()) <= set(notebooks)
    assert not install_problems(notebooks, repository_url())


def test_set_repository_changes_the_config_and_every_install_cell(tmp_path):
    module = load_set_repository()
    shutil.copy2(ROOT / "_config.yml", tmp_path / "_config.yml")
    for path in module.notebooks(ROOT):
        (tmp_path / path.relative_to(ROOT)).parent.mkdir(exist_ok=True)
        shutil.copy2(path, tmp_path / path.relative_to(ROOT))
    copies = module.notebooks(tmp_path)
    assert len(copies) == len(learner_notebooks())

    new = "https://github.com/someone/their-course"
    changed = module.set_repository(new, root=tmp_path)
    assert len(changed) == 1 + len(copies)
    assert f"url: {new}\n" in (tmp_path / "_config.yml").read_text()
    assert buttons(tmp_path / "_config.yml") == (True, "https://colab.research.google.com")  # shown after
    assert not install_problems(copies, new)
    assert all(repository_url() not in p.read_text() for p in copies)

    module.set_repository(repository_url(), root=tmp_path)  # and back: byte for byte the original files
    assert (tmp_path / "_config.yml").read_bytes() == (ROOT / "_config.yml").read_bytes()
    assert all(c.read_bytes() == (ROOT / c.relative_to(tmp_path)).read_bytes() for c in copies)


@pytest.mark.parametrize("url", ["github.com/a/b", "https://github.com/a/b/", "https://gitlab.com/a/b"])
def test_set_repository_refuses_what_is_not_a_repository_address(url, tmp_path):
    with pytest.raises(ValueError, match="url must look like https://github.com/OWNER/REPO"):
        load_set_repository().set_repository(url, root=tmp_path)


def buttons(config_path) -> tuple[bool, str]:
    """(GitHub button shown, Colab URL) as Jupyter Book reads them from a _config.yml."""
    config = yaml.safe_load(config_path.read_text())
    return config["html"]["use_repository_button"], config["launch_buttons"]["colab_url"]


def test_the_buttons_are_hidden_while_the_address_is_the_placeholder(tmp_path):
    """The placeholder's GitHub and Colab buttons would lead nowhere: off for it, on for any other address."""
    module = load_set_repository()
    placeholder = repository_url() == module.PLACEHOLDER
    assert buttons(ROOT / "_config.yml") == ((False, "") if placeholder else (True, module.COLAB))
    shutil.copy2(ROOT / "_config.yml", tmp_path / "_config.yml")
    module.set_repository(module.PLACEHOLDER, root=tmp_path)
    assert buttons(tmp_path / "_config.yml") == (False, "")
    module.set_repository("https://github.com/someone/their-course", root=tmp_path)
    assert buttons(tmp_path / "_config.yml") == (True, module.COLAB)
