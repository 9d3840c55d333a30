"""torch's CPU-only build in the course's lock, requirements.txt.

PyPI's torch for Linux is the CUDA build, which pulls in the NVIDIA libraries and triton: gigabytes the
course never uses. The CPU-only build ("+cpu") is on PyTorch's own index, INDEX. So the lock pins
``torch==VERSION`` with the hashes of the CPU-only wheels only (the "+cpu" wheels for Linux and Windows,
and macOS's wheel, which is CPU-only): no other build of that version can install from it, wherever pip
finds one. scripts/setup.sh installs that entry first, alone (from a copy pip finds without the network,
else from INDEX), then the rest of the lock from PyPI, where torch is then already satisfied.

    python3 scripts/torch_cpu.py install PYTHON      installs the lock's torch entry into PYTHON's environment
                                                      (scripts/setup.sh; TORCH_INDEX: another copy of INDEX)
    python3 scripts/torch_cpu.py relock NEW OLD       rewrites torch's entry of NEW, pip-compile's fresh
                                                      output, with the CPU wheels' hashes (scripts/lock.sh)

``relock`` takes the hashes from INDEX's page for torch; where INDEX cannot be reached, from OLD's torch
entry if it pins the same version (and fails, saying so, if not). Any hash pip-compile recorded itself (a
CPU wheel it found, as in a find-links folder) must be among them.
"""

import os
import re
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

INDEX = "https://download.pytorch.org/whl/cpu"
LOCK = Path(__file__).resolve().parents[1] / "requirements.txt"
ENTRY = re.compile(r"^torch==(?P<version>[^\s;\\]+).*?\n(?=\S|\Z)", re.M | re.S)  # the line and its indented ones
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")


def entry(lock: str) -> re.Match:
    found = ENTRY.search(lock)
    if found is None:
        raise SystemExit("the lock has no torch==VERSION entry: run bash scripts/lock.sh")
    return found


def index_hashes(version: str, index: str, timeout: float = 30) -> list[str]:
    """The sha256 of every CPU-only wheel of torch VERSION on INDEX: its PEP 503 page links each wheel with
    its hash (``torch-2.13.0%2Bcpu-cp311-...whl#sha256=...``)."""
    url = f"{index}/torch/" + ("index.html" if index.startswith("file:") else "")  # as pip reads a file: index
    with urllib.request.urlopen(url, timeout=timeout) as page:
        html = urllib.parse.unquote(page.read().decode())
    name = rf"torch-{re.escape(version)}(?:\+cpu-[^\"#/]*|-[^\"#/+]*macosx[^\"#/]*)\.whl"
    return sorted(set(re.findall(name + r"#sha256=([0-9a-f]{64})", html)))


def relock(new: str, old: str) -> str:
    """NEW with torch's entry pinning the version without its "+cpu" label, with the CPU wheels' hashes."""
    found = entry(new)
    version = found["version"].split("+")[0]
    index = os.environ.get("TORCH_INDEX") or INDEX
    try:
        hashes = index_hashes(version, index)
    except OSError as error:
        previous = ENTRY.search(old)
        if previous is None or previous["version"].split("+")[0] != version:
            raise SystemExit(f"{index} cannot be reached ({error}), and the old lock has no hashes for torch "
                             f"{version}: run scripts/lock.sh where it can be reached")
        print(f"note: {index} cannot be reached ({error}): torch {version}'s hashes kept from the old lock",
              file=sys.stderr)
        hashes = HASH.findall(previous.group(0))
    if not hashes:
        raise SystemExit(f"{index} lists no CPU-only wheel of torch {version}")
    unknown = set(HASH.findall(found.group(0))) - set(hashes)
    if unknown:
        raise SystemExit(f"pip-compile found a torch {found['version']} wheel that is not one of {index}'s CPU-only "
                         f"wheels (sha256 {sorted(unknown)}): where did it come from?")
    comments = [line for line in found.group(0).splitlines() if line.lstrip().startswith("#")]
    lines = [f"torch=={version} \\", *(f"    --hash=sha256:{h} \\" for h in hashes)]
    lines[-1] = lines[-1].removesuffix(" \\")
    return new[:found.start()] + "\n".join(lines + comments) + "\n" + new[found.end():]


def install(python: str, index: str) -> int:
    """pip-install the lock's torch entry into PYTHON's environment, --no-deps, its hash checked: a copy pip
    finds without the network if there is one, else from INDEX."""
    with tempfile.TemporaryDirectory() as folder:
        requirement = Path(folder) / "torch.txt"
        requirement.write_text(entry(LOCK.read_text()).group(0))
        pip = [python, "-m", "pip", "--disable-pip-version-check", "install", "--quiet", "--no-deps",
               "--require-hashes", "-r", str(requirement)]
        if subprocess.run([*pip, "--no-index"], capture_output=True).returncode == 0:
            return 0
        print(f"downloading torch's CPU-only build (about 200 MB) from {index}", flush=True)
        return subprocess.run([*pip, "--index-url", index]).returncode


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"] and len(argv) == 2:
        return install(argv[1], os.environ.get("TORCH_INDEX") or INDEX)
    if argv[:1] == ["relock"] and len(argv) == 3:
        new, old = Path(argv[1]), Path(argv[2])
        new.write_text(relock(new.read_text(), old.read_text() if old.is_file() else ""))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
