"""The live page's files (live_loop.md), made at build time and copied into the site's _static/live/.

Nothing here is committed: the model is exported from the package's shipped weights by
``scripts/export_onnx.py``, js-tiktoken (with its GPT-2 ranks) is bundled into one browser file by
esbuild, and onnxruntime-web's files come from ``node_modules`` (``npm ci``, run by ``scripts/setup.sh``
from the pinned ``package-lock.json``). Both are made into ``_build/live/`` and redone only when what
they are made from changes. After the build, exactly ``FILES`` are copied into the site, so the page
never asks for anything the site does not hold (``tests/book/test_website.py`` checks it). Without Node
(no ``node_modules``) the site is still built, with ``live.js`` alone: the page then says it cannot load.
"""

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

ORT = "node_modules/onnxruntime-web/dist"
# name in _static/live/ -> where it comes from (relative to the book's source folder).
FILES = {
    "live.js": "live/live.js",  # the page's own code (committed)
    "model.onnx": "_build/live/model.onnx",  # scripts/export_onnx.py
    "model.json": "_build/live/model.json",
    "tiktoken-gpt2.js": "_build/live/tiktoken-gpt2.js",  # esbuild: js-tiktoken/lite + ranks/gpt2
    # onnxruntime-web's WASM-only build: the script (global `ort`), the module it imports, its binary
    "ort.wasm.min.js": f"{ORT}/ort.wasm.min.js",
    "ort-wasm-simd-threaded.mjs": f"{ORT}/ort-wasm-simd-threaded.mjs",
    "ort-wasm-simd-threaded.wasm": f"{ORT}/ort-wasm-simd-threaded.wasm",
}


def _digest(paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _redo_if_changed(stamp: Path, inputs, command, cwd: Path, what: str) -> None:
    """Run ``command`` unless ``stamp`` records the digest of ``inputs`` it was last run on."""
    digest = _digest(inputs)
    if stamp.is_file() and stamp.read_text() == digest:
        return
    logger.info(f"live page: {what}")
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise ExtensionError(f"live page: {what} failed ({' '.join(map(str, command))}):\n"
                             f"{result.stdout[-2000:]}{result.stderr[-4000:]}")
    stamp.write_text(digest)


def has_runtime(root: Path) -> bool:
    """Whether ``npm ci`` has installed the live page's JavaScript (it needs Node 20 and npm)."""
    return (root / "node_modules" / "onnxruntime-web").is_dir()


def make_assets(app) -> None:
    root = Path(app.srcdir)
    if not has_runtime(root):
        # Reading the course needs Python only: the site is built, and the live page says, when its button
        # is pressed, that this build has no live files. An info line, not a warning (-W would stop the build).
        logger.info("live page: node_modules is missing, so the site is built without the live page's files "
                    "(with Node 20 and npm, scripts/setup.sh installs them and the page runs)")
        return
    build = root / "_build" / "live"
    build.mkdir(parents=True, exist_ok=True)
    import nexttoken

    package = Path(nexttoken.__file__).parent
    weights = [package / "pretrained" / "config.json", package / "pretrained" / "model.safetensors",
               package / "model.py", root / "scripts" / "export_onnx.py"]
    _redo_if_changed(build / "model.stamp", weights,
                     [sys.executable, "scripts/export_onnx.py", "--out", str(build / "model.onnx")],
                     root, "exporting the shipped model to ONNX (scripts/export_onnx.py)")
    _redo_if_changed(build / "tiktoken.stamp", [root / "package-lock.json", root / "live" / "tiktoken-entry.js"],
                     [str(root / "node_modules" / ".bin" / "esbuild"), "live/tiktoken-entry.js", "--bundle",
                      "--format=iife", "--minify", "--log-level=warning",
                      f"--outfile={build / 'tiktoken-gpt2.js'}"],
                     root, "bundling js-tiktoken's GPT-2 tokenizer (esbuild)")


def copy_assets(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root, target = Path(app.srcdir), Path(app.outdir) / "_static" / "live"
    if target.exists():
        shutil.rmtree(target)  # exactly FILES: nothing left from an earlier build
    target.mkdir(parents=True)
    names = FILES if has_runtime(root) else ["live.js"]  # without Node: the page's code alone
    for name in names:
        shutil.copyfile(root / FILES[name], target / name)


def setup(app):
    app.connect("builder-inited", make_assets)
    app.connect("build-finished", copy_assets)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
