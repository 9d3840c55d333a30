"""Execute notebooks in place, the one way their stored outputs are made (never edit outputs by hand).

    .venv/bin/python scripts/execute_notebooks.py chapters/*.ipynb

Each notebook runs in a fresh kernel in its own folder. Fails if a cell writes to stderr (warnings,
progress bars) or raises, unless the cell is tagged ``raises-exception``; prints each notebook's time.
The notebook's kernelspec is stored as the installed ``python3`` kernel names itself, so JupyterLab, which
rewrites it when the kernel starts, does not mark a notebook as modified on opening it.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def kernelspec() -> dict:
    """The installed python3 kernel's kernelspec metadata, as JupyterLab writes it into a notebook."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    return {"display_name": spec.display_name, "language": spec.language, "name": "python3"}


def execute(path: Path, timeout: int) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = kernelspec()
    start = time.time()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    problems = []
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        expected_error = "raises-exception" in cell.metadata.get("tags", [])
        for out in cell.get("outputs", []):
            if out.output_type == "stream" and out.name == "stderr":
                problems.append(f"{path}: code cell {i} wrote to stderr: {out.text[:300]!r}")
            if out.output_type == "error" and not expected_error:
                problems.append(f"{path}: code cell {i} raised {out.ename}: {out.evalue[:300]}")
    nbformat.write(nb, path)
    print(f"{path}: {time.time() - start:.1f} s", flush=True)
    return problems


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--timeout", type=int, default=180, help="seconds per cell")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    os.environ.setdefault("TQDM_DISABLE", "1")
    problems = [p for nb in args.notebooks for p in execute(nb, args.timeout)]
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
