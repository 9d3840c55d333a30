"""User ids for sandboxes when the grader is root (one unprivileged id per concurrent job, locked against
other graders), running a command as one of them, and killing every process of a sandbox."""

import fcntl
import grp
import os
import pwd
import shutil
import signal
import time
from pathlib import Path

from .limits import SandboxError

# Unprivileged user ids for sandboxes when the grader is root: one per concurrent job, so a fork bomb in
# one sandbox cannot use up the process limit of another (RLIMIT_NPROC counts per user id). Each is checked
# free on the host (no account, no process) and held with a lock file, so two graders never share one.
FIRST_UID = 61000
UID_RANGE = 1000
UID_LOCKS = Path("/run/nexttoken-grade")
_held_uid_locks: list[int] = []  # open lock files, held until the grader exits


def _user_ids() -> dict[int, list[int]]:
    """Each process's user ids (real, effective, saved, filesystem), as its /proc/PID/status says."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("Uid:"):
                    found[int(pid)] = [int(u) for u in line.split()[1:]]
                    break
        except (OSError, ValueError):
            pass
    return found


def _uids_running() -> set[int]:
    return {uid for uids in _user_ids().values() for uid in uids}


def processes_of(uid: int) -> set[int]:
    """The processes whose real or effective user id is ``uid``."""
    return {pid for pid, uids in _user_ids().items() if uid in uids[:2]}


def _has_account(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def kill_user(uid: int) -> None:
    """Kill every process of a sandbox user id, until none is left (a fork bomb is bounded by its
    RLIMIT_NPROC): how a run without bubblewrap's PID namespace, or a cgroup, ends all it started."""
    if not isinstance(uid, int) or uid < FIRST_UID:
        raise ValueError(f"not a sandbox user id: {uid!r}")
    kill_all(lambda: processes_of(uid))


def kill_all(list_pids) -> None:
    """SIGKILL every process ``list_pids()`` names, again and again until it names none (processes can
    fork while being killed; a fork bomb's limit bounds the rounds)."""
    for _ in range(500):
        pids = list_pids()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def drop_to(uid: int) -> list[str]:
    """The argv prefix (setpriv) that runs a command as the unprivileged ``uid``, with no groups and no
    capabilities; the grader is root."""
    return [shutil.which("setpriv") or "/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def allocate_uids(n: int) -> list[int | None]:
    """n user ids for sandboxes, as root: free on the host (no account or group, no process) and locked
    for this grader's lifetime. Not root: None each (bwrap maps the caller into a user namespace)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int (the jobs), got {n!r}")
    if os.geteuid() != 0:
        return [None] * n
    UID_LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
    running, found = _uids_running(), []
    for uid in range(FIRST_UID, FIRST_UID + UID_RANGE):
        if len(found) == n:
            break
        if uid in running or _has_account(uid):
            continue
        fd = os.open(UID_LOCKS / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another grader holds it
            os.close(fd)
            continue
        _held_uid_locks.append(fd)
        found.append(uid)
    if len(found) < n:
        raise SandboxError(f"fewer than {n} free user ids in {FIRST_UID}-{FIRST_UID + UID_RANGE - 1} "
                           "for sandboxes (other graders or host accounts hold them): lower --jobs")
    return found
