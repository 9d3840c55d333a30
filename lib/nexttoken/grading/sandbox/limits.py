"""What one sandbox may use, as util-linux ``prlimit`` applies it per process (address space, processes
and threads, file size, CPU time), and the error when a sandbox cannot be set up."""

import shutil
from dataclasses import dataclass


class SandboxError(Exception):
    """The sandbox cannot be set up here; the message says why and what to do."""


@dataclass(frozen=True)
class Limits:
    """Per-submission limits. Defaults suit the course's small tensors; flags of the grader change them."""
    memory_mb: int = 2048  # address space per process (importing torch alone reserves about 600 MB)
    total_memory_mb: int = 2048  # memory of the whole sandbox, of every kind (its cgroup)
    processes: int = 64  # processes and threads of the sandbox (its cgroup; RLIMIT_NPROC too)
    file_size_mb: int = 16  # largest file it may write
    cpu_s: int = 600  # CPU seconds per process (the grader sets it to its --notebook-timeout)
    tmp_mb: int = 64  # size of each private tmpfs (/tmp, HOME, /submission)

    def __post_init__(self):
        for name in ("memory_mb", "total_memory_mb", "processes", "file_size_mb", "cpu_s", "tmp_mb"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")


def prlimit_args(limits: Limits, processes: bool = True) -> list[str]:
    mb = 1024 * 1024
    args = [shutil.which("prlimit") or "/usr/bin/prlimit", f"--as={limits.memory_mb * mb}",
            f"--fsize={limits.file_size_mb * mb}", f"--cpu={limits.cpu_s}", "--core=0", "--nofile=512"]
    if processes:
        args.append(f"--nproc={limits.processes}")
    return args + ["--"]
