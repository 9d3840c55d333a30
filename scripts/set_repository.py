"""Set the course repository's address, kept in one place (_config.yml), and every notebook's install cell.

    .venv/bin/python scripts/set_repository.py https://github.com/OWNER/REPO

_config.yml's ``repository.url`` gives the website its repository and "Open in Colab" links; the first
code cell of each notebook a learner may open (chapters/, exercises/, solutions/, appendix/,
the two model cards) pip-installs ``nexttoken @ git+URL`` on Colab. This rewrites both, as text, so nothing
else in the files changes (no outputs are touched). tests/book/test_repository.py checks that they agree.

The website's GitHub and Colab buttons are shown only for a real address: with ``PLACEHOLDER`` (the
address the course ships with) ``html.use_repository_button`` is false and ``launch_buttons.colab_url``
empty; with any other address they are true and Colab's. Setting the placeholder again turns them off.
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_FOLDERS = ("chapters", "exercises", "solutions", "appendix")
CONFIG_URL = re.compile(r"^(repository:\n(?:[ \t]+.*\n)*?[ \t]+url:[ \t]*)(\S+)", re.M)
INSTALL = re.compile(r'("nexttoken @ git\+)([^"\\]+)(\\?")')  # in a notebook's JSON text: \"URL\"
GITHUB = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
PLACEHOLDER = "https://github.com/nexttoken-course/autoregressive-generation"  # not a real repository (yet)
COLAB = "https://colab.research.google.com"
BUTTON = re.compile(r"^([ \t]+use_repository_button:[ \t]*)(true|false)", re.M)
COLAB_URL = re.compile(r'^([ \t]+colab_url:[ \t]*)("[^"\n]*"|\S*)', re.M)


def notebooks(root: Path) -> list[Path]:
    found = [p for folder in NOTEBOOK_FOLDERS for p in sorted((root / folder).glob("*.ipynb"))]
    return found + [p for p in [root / "model_card.ipynb", root / "model_card_smollm2.ipynb"] if p.exists()]


def set_repository(url: str, root: Path = ROOT) -> list[Path]:
    """Write ``url`` into _config.yml and every notebook's install cell; return the files changed."""
    if not GITHUB.match(url):
        raise ValueError(f"url must look like https://github.com/OWNER/REPO (no trailing slash or .git), got {url!r}")
    changed = []
    config = root / "_config.yml"
    text = config.read_text()
    if not CONFIG_URL.search(text):
        raise ValueError(f"{config} has no repository: url: entry to change")
    if not BUTTON.search(text) or not COLAB_URL.search(text):
        raise ValueError(f"{config} has no use_repository_button: or colab_url: entry to change")
    real = url != PLACEHOLDER
    new = CONFIG_URL.sub(lambda m: m.group(1) + url, text, count=1)
    new = BUTTON.sub(lambda m: m.group(1) + ("true" if real else "false"), new, count=1)
    new = COLAB_URL.sub(lambda m: m.group(1) + (COLAB if real else '""'), new, count=1)
    if new != text:
        config.write_text(new)
        changed.append(config)
    for path in notebooks(root):
        text = path.read_text(encoding="utf-8")
        new = INSTALL.sub(lambda m: m.group(1) + url + m.group(3), text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("url", help="https://github.com/OWNER/REPO")
    args = parser.parse_args()
    try:
        changed = set_repository(args.url)
    except ValueError as err:
        sys.exit(f"set_repository.py: {err}")
    for path in changed:
        print(f"updated {path.relative_to(ROOT)}")
    print(f"{len(changed)} files now name {args.url}")
    if args.url == PLACEHOLDER:
        print("that is the placeholder: the website shows no GitHub or Colab button")
    else:
        print("the website shows the GitHub and Colab buttons (rebuild it: bash scripts/book.sh)")


if __name__ == "__main__":
    main()
