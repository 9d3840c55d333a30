"""Copy Jupyter Book's output through as it comes, without the banner it ends a build with.

That banner tells the reader to open ``_build/html/index.html`` as a file (``file://...``), which breaks the
live page (its model is fetched over HTTP); scripts/book.sh pipes the build through this script and ends
with its own line: serve the site over HTTP. Everything else, a failed build's message among it, passes.

    jupyter-book build ... | python3 scripts/drop_book_banner.py
"""

import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
BANNER_START = "Finished generating HTML for book."


def plain(line: str) -> str:
    return ANSI.sub("", line).strip()


def is_border(line: str) -> bool:
    return set(plain(line)) == {"="}


def main(lines, out) -> None:
    lines = iter(lines)
    held = []  # a border line and the blank lines after it, until the next line says whose border it is
    for line in lines:
        if plain(line).startswith(BANNER_START):
            held = []
            for line in lines:  # the banner's paths, up to its closing border
                if is_border(line):
                    break
            continue
        if is_border(line) or (held and not plain(line)):
            held.append(line)
            continue
        out.write("".join(held) + line)
        out.flush()
        held = []
    out.write("".join(held))
    out.flush()


if __name__ == "__main__":
    main(sys.stdin, sys.stdout)
