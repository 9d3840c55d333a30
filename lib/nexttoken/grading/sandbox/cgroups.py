"""Cgroups, v2 or v1: one per sandbox, so memory of every kind (pages of tmpfs files and memfds, kernel
memory such as inodes, which belong to no process), processes and CPU are limited per sandbox, and the
grader ends a sandbox by killing everything in its group."""

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .limits import Limits, SandboxError
from .users import kill_all

CGROUP_MESSAGE = (
    "no cgroup can limit each sandbox's memory and processes here: {why}.\n"
    "Run the grader as root, or in a cgroup delegated to you (cgroup v2: 'systemd-run --user --scope "
    "-p Delegate=yes python -m nexttoken.grade ...'; v1: a memory and a pids cgroup you own), or pass\n"
    "--allow-no-cgroup to grade with per-process limits only: memory that belongs to no process (tmpfs files,\n"
    "memfds, kernel memory) is then unbounded, and a hostile submission can make the kernel kill the grader."
)
_names = itertools.count()


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _v2_mount() -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def _write(path: Path, value) -> None:
    path.write_text(f"{value}\n")


@dataclass
class Group:
    """One sandbox's cgroup (a folder per v1 controller, or one v2 folder)."""
    version: int
    dirs: list[Path]

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> set[int]:
        found = set()
        for d in self.dirs:
            try:
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def kill(self) -> None:
        """Kill every process in the group, from outside (v2: cgroup.kill; else until none is left)."""
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            try:
                _write(self.dirs[0] / "cgroup.kill", 1)
            except OSError:
                pass
        kill_all(self.pids)  # a fork bomb is bounded by pids.max: a few rounds at most

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer ended a process of this group (it ran out of its memory)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for d in self.dirs:
            try:
                for line in (d / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
            except (OSError, ValueError):
                pass
        return False

    def remove(self, wait_s: float = 5.0) -> bool:
        """Remove the group's folders; False if one is still busy after ``wait_s`` (``Cgroups.sweep``
        removes it later)."""
        removed = True
        for d in self.dirs:
            deadline = time.monotonic() + wait_s
            while True:  # the kernel lets go of a group a moment after its last process has exited
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        removed = False
                        break
                    time.sleep(0.05)
        return removed


@dataclass
class Cgroups:
    """Where sandbox cgroups are made: v2 (one folder) or v1 (memory, pids and, if there, cpu)."""
    version: int
    bases: dict[str, Path]

    def describe(self) -> str:
        where = ", ".join(str(p) for p in self.bases.values())
        return f"cgroup v{self.version} ({where})"

    def new_group(self, limits: Limits) -> Group:
        name = f"nexttoken-{os.getpid()}-{next(_names)}"
        memory = limits.total_memory_mb * 1024 * 1024
        dirs = [base / name for base in self.bases.values()]
        try:
            for d in dirs:
                d.mkdir()
            if self.version == 2:
                d = dirs[0]
                settings = {"memory.max": memory, "memory.swap.max": 0, "pids.max": limits.processes,
                            "memory.oom.group": 1, "cpu.weight": 100}
                for key, value in settings.items():
                    if (d / key).exists():  # swap and cpu may be absent
                        _write(d / key, value)
            else:
                _write(self.bases["memory"] / name / "memory.limit_in_bytes", memory)
                swap = self.bases["memory"] / name / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    _write(swap, memory)
                _write(self.bases["pids"] / name / "pids.max", limits.processes)
                if "cpu" in self.bases:
                    _write(self.bases["cpu"] / name / "cpu.shares", 1024)  # equal, whatever its processes
        except OSError as exc:
            Group(self.version, dirs).remove()
            raise SandboxError(f"could not set up a sandbox cgroup under {self.describe()}: {exc}") from None
        return Group(self.version, dirs)

    def sweep(self) -> None:
        """End and remove the sandbox groups of graders that are gone (killed before they could), and this
        grader's own that were still busy when their sandbox ended."""
        names = {d.name for base in self.bases.values() for d in base.glob("nexttoken-*-*")}
        for name in sorted(names):
            pid = name.split("-")[1]
            if pid.isdigit() and (int(pid) == os.getpid() or not Path(f"/proc/{pid}").exists()):
                group = Group(self.version, [b / name for b in self.bases.values() if (b / name).is_dir()])
                group.kill()
                group.remove(wait_s=1.0)


def _v2_cgroups() -> tuple[Cgroups | None, str]:
    mount = _v2_mount()
    if mount is None:
        return None, "no cgroup v2 is mounted"
    base = mount / _own_cgroups().get("", "/").lstrip("/")
    try:
        available = set((base / "cgroup.controllers").read_text().split())
    except OSError:
        return None, f"cgroup v2 at {mount} is not readable"
    if not {"memory", "pids"} <= available:
        return None, f"cgroup v2 at {base} has no memory and pids controllers"
    wanted = {"memory", "pids"} | ({"cpu"} & available)
    try:
        enabled = set((base / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None, f"cgroup v2 at {base} is not readable"
    if not wanted <= enabled:
        try:
            # A v2 cgroup with processes cannot enable controllers for children: move the grader into a
            # leaf of its own first (its delegated scope then holds only groups).
            if (base / "cgroup.procs").read_text().split():
                leaf = base / f"nexttoken-grader-{os.getpid()}"
                leaf.mkdir(exist_ok=True)
                _write(leaf / "cgroup.procs", os.getpid())
            _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(wanted - enabled)))
        except OSError as exc:
            return None, f"cgroup v2 at {base} cannot enable memory and pids for sandboxes ({exc.strerror})"
    return Cgroups(2, {"": base}), ""


def _v1_cgroups() -> tuple[Cgroups | None, str]:
    own, bases = _own_cgroups(), {}
    for controller in ("memory", "pids", "cpu"):
        base = Path("/sys/fs/cgroup") / controller / own.get(controller, "/").lstrip("/")
        if controller in own and base.is_dir() and os.access(base, os.W_OK):
            bases[controller] = base
    if {"memory", "pids"} <= set(bases):
        return Cgroups(1, bases), ""
    return None, "cgroup v1's memory and pids controllers are not mounted or not writable by this user"


def find_cgroups() -> tuple[Cgroups | None, str]:
    """(Cgroups, "") where sandbox cgroups can be made, v2 first (the default on current distributions);
    else (None, why not)."""
    v2, why2 = _v2_cgroups()
    if v2 is not None:
        return v2, ""
    v1, why1 = _v1_cgroups()
    if v1 is not None:
        return v1, ""
    return None, CGROUP_MESSAGE.format(why=f"{why2}; {why1}")
