"""The sandbox command mounts the Python installation and the package after its private /tmp, so that a
checkout or virtual environment under /tmp stays visible inside (bwrap applies mounts in order)."""

from nexttoken.grading import sandbox
from nexttoken.grading.sandbox import policy


def test_package_binds_come_after_the_private_tmp(monkeypatch):
    monkeypatch.setattr(policy, "python_roots", lambda: ["/tmp/checkout/.venv", "/tmp/checkout/lib"])
    cmd = sandbox.bwrap_command(["python"], sandbox.Limits(), notebook_fd=0, uid=61000)
    tmpfs = cmd.index("/tmp", cmd.index("--tmpfs"))
    binds = [i for i, a in enumerate(cmd) if a == "--ro-bind" and cmd[i + 1].startswith("/tmp/checkout")]
    assert len(binds) == 2 and all(i > tmpfs for i in binds)
    assert "--dir" in cmd and "/tmp/checkout" in cmd  # its parent is created inside the tmpfs


# --- the sandbox's walls, as root and as an unprivileged instructor -----------------------------------------

import ast  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

needs_root_and_bwrap = pytest.mark.skipif(
    os.geteuid() != 0 or sandbox.bwrap_path() is None or not os.path.exists("/usr/bin/python3"),
    reason="needs root (to become a throwaway user and make cgroups), bubblewrap and /usr/bin/python3")

# Every interface the seccomp filter denies, called from inside, with the errno each gave; and a sleeper in
# a session of its own that would outlive the sandbox if ending it relied on the init's death signal.
PROBE = r"""
import ctypes, errno, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def call(label, fn, *args):
    ok = getattr(libc, fn)(*args) >= 0
    return f"{label}={'ok' if ok else errno.errorcode.get(ctypes.get_errno(), '?')}"
subprocess.Popen(["sleep", "120"], start_new_session=True)
out = [call('ptrace', 'ptrace', 16, 1, None, None),
       call('vm_read', 'syscall', 310, 1, None, 0, None, 0, 0),
       call('keyctl', 'syscall', 250, 0, -3, 0),
       call('add_key', 'syscall', 248, b'user', b'planted', b'x', 1, -3),
       call('userns', 'unshare', 0x10000000),
       call('mount', 'mount', b'none', b'/tmp', b'tmpfs', 0, None)]
try:
    open('/dev/planted', 'w')
    out.append('dev=ok')
except OSError as e:
    out.append('dev=' + errno.errorcode[e.errno])
print(' '.join(out), flush=True)
import time
time.sleep(120)  # still running when the test looks: only the kill from outside ends it
"""
DENIED = "ptrace=EPERM vm_read=EPERM keyctl=EPERM add_key=EPERM userns=EPERM mount=EPERM dev=EROFS"


def processes_of(uid: int) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"Uid:\t{uid}\t" in open(f"/proc/{pid}/status").read():
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.slow
@needs_root_and_bwrap
@pytest.mark.parametrize("instructor", ["root", "unprivileged"])
def test_the_sandbox_denies_the_kernel_and_ends_from_outside(monkeypatch, instructor):
    """As root, and as an unprivileged instructor (a throwaway uid via setpriv, in a cgroup delegated to it
    by chown; the course's virtual environment lives under /root here, unreadable by that uid, so the
    sandbox runs Debian's python3 instead of the grader's). The sandbox's processes end when the grader
    kills its cgroup, the ptraced init or not."""
    cgroups, why = sandbox.find_cgroups()
    assert cgroups is not None, why
    uid = sandbox.allocate_uids(1)[0]
    monkeypatch.setattr(policy, "python_roots", lambda: [])
    group = cgroups.new_group(sandbox.Limits(total_memory_mb=256, processes=16))
    fds = [sandbox.memfd_with(b"{}", "n"), sandbox.memfd_with(sandbox.seccomp_filter(), "f")]
    try:
        if instructor == "root":
            cmd = sandbox.bwrap_command(["/usr/bin/python3", "-c", PROBE], sandbox.Limits(), fds[0], uid, fds[1])
            prefix = []
        else:
            for d in group.dirs:
                for f in [d, *d.iterdir()]:
                    os.chown(f, uid, uid)
            monkeypatch.setattr(os, "geteuid", lambda: uid)  # build the rootless (user namespace) command
            cmd = sandbox.bwrap_command(["/usr/bin/python3", "-c", PROBE], sandbox.Limits(), fds[0], None, fds[1])
            monkeypatch.undo()
            prefix = [shutil.which("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        proc = subprocess.Popen(prefix + sandbox.launcher(group, "/usr/bin/python3") + cmd, pass_fds=fds,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        report = proc.stdout.readline().strip()
        assert report == DENIED, (report, proc.stderr.read() if proc.poll() is not None else "")
        owner = uid  # as root the sandbox's uid; rootless, the instructor's uid mapped into the namespace
        assert processes_of(owner), "the sandbox should still be running (its sleeper)"
        group.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while processes_of(owner) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes_of(owner) == []
    finally:
        for fd in fds:
            os.close(fd)
        group.kill()
        group.remove()


@pytest.mark.slow  # two fresh Pythons
@needs_root_and_bwrap
def test_sandbox_uids_are_free_on_the_host_and_never_shared_by_two_graders():
    holder = subprocess.Popen([sys.executable, "-c", "import time\nfrom nexttoken.grading import sandbox\n"
                               "print(sandbox.allocate_uids(2), flush=True)\ntime.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    squatter = None
    try:
        held = ast.literal_eval(holder.stdout.readline())
        squatter = subprocess.Popen([shutil.which("setpriv"), f"--reuid={max(held) + 1}", "--", "sleep", "60"])
        time.sleep(0.5)  # a host process runs as the next uid
        mine = subprocess.run([sys.executable, "-c", "from nexttoken.grading import sandbox\n"
                               "print(sandbox.allocate_uids(2))"], capture_output=True, text=True, timeout=60)
        mine = ast.literal_eval(mine.stdout)
        assert len(mine) == 2 and not set(mine) & set(held) and max(held) + 1 not in mine
    finally:
        holder.kill()
        if squatter is not None:
            squatter.kill()
            squatter.wait()
        holder.wait()


def test_a_sandbox_gets_a_cgroup_with_its_limits(tmp_path, monkeypatch):
    """v1 and v2 alike: the limits written where the kernel reads them (a fake hierarchy, so this runs
    anywhere); kill() ends what is listed in cgroup.procs."""
    limits = sandbox.Limits(total_memory_mb=100, processes=7)
    v1 = sandbox.Cgroups(1, {c: tmp_path / "v1" / c for c in ("memory", "pids", "cpu")})
    v2 = sandbox.Cgroups(2, {"": tmp_path / "v2"})
    for base in [*v1.bases.values(), *v2.bases.values()]:
        base.mkdir(parents=True)
    real_mkdir = type(tmp_path).mkdir

    def mkdir_with_files(self, *args, **kwargs):  # the kernel makes a group's files; here, the test does
        real_mkdir(self, *args, **kwargs)
        for name in ("cgroup.procs", "memory.max", "pids.max", "cpu.weight", "memory.oom.group"):
            (self / name).write_text("")
    monkeypatch.setattr(type(tmp_path), "mkdir", mkdir_with_files)
    g1, g2 = v1.new_group(limits), v2.new_group(limits)
    monkeypatch.undo()
    read = lambda path: path.read_text().strip()  # noqa: E731
    assert read(g1.dirs[0] / "memory.limit_in_bytes") == str(100 << 20)
    assert read(g1.dirs[1] / "pids.max") == "7" and read(g1.dirs[2] / "cpu.shares") == "1024"
    assert read(g2.dirs[0] / "memory.max") == str(100 << 20) and read(g2.dirs[0] / "pids.max") == "7"
    assert read(g2.dirs[0] / "cpu.weight") == "100" and read(g2.dirs[0] / "memory.oom.group") == "1"
    assert g1.procs_files() == [str(d / "cgroup.procs") for d in g1.dirs]
    sleeper = subprocess.Popen(["sleep", "60"])
    (g2.dirs[0] / "cgroup.procs").write_text(f"{sleeper.pid}\n")
    assert g2.pids() == {sleeper.pid}
    # A real cgroup.procs empties as its processes die; the fake one does not: list the sleeper while alive.
    monkeypatch.setattr(sandbox.Group, "pids", lambda self: {sleeper.pid} if sleeper.poll() is None else set())
    g2.kill()
    assert sleeper.wait(timeout=10) == -9


MEMORY_ATTACKS = {  # memory that is no process's: empty files' inodes in the private tmpfs, memfd pages
    "empty files": "i = 0\nwhile i < 3_000_000:\n    open(f'/tmp/f{i}', 'w').close()\n    i += 1\nprint('survived')\n",
    "memfds": "import os\nfds = []\nfor i in range(400):\n    fds.append(os.memfd_create(str(i)))\n"
              "    os.write(fds[-1], b'x' * (4 << 20))\nprint('survived')\n",
}


@pytest.mark.slow
@needs_root_and_bwrap
@pytest.mark.parametrize("attack", sorted(MEMORY_ATTACKS))
def test_memory_of_no_process_is_charged_to_the_sandboxs_cgroup(monkeypatch, attack):
    """In a 128 MB sandbox the kernel's OOM killer acts inside its cgroup, long before the 3 million files
    (about 4 GB of kernel memory) or the 1.6 GB of memfds are made."""
    cgroups, why = sandbox.find_cgroups()
    assert cgroups is not None, why
    monkeypatch.setattr(policy, "python_roots", lambda: [])
    limits = sandbox.Limits(total_memory_mb=128, processes=16)
    group = cgroups.new_group(limits)
    fds = [sandbox.memfd_with(b"{}", "n"), sandbox.memfd_with(sandbox.seccomp_filter(), "f")]
    try:
        cmd = sandbox.bwrap_command(["/usr/bin/python3", "-c", MEMORY_ATTACKS[attack]], limits, fds[0],
                                    sandbox.allocate_uids(1)[0], fds[1])
        done = subprocess.run(sandbox.launcher(group, "/usr/bin/python3") + cmd, pass_fds=fds, capture_output=True,
                              text=True, timeout=180)
        assert "survived" not in done.stdout and done.returncode != 0
        assert group.oom_killed()
    finally:
        for fd in fds:
            os.close(fd)
        group.kill()
        group.remove()


@needs_root_and_bwrap
def test_groups_a_killed_grader_left_are_swept(monkeypatch):
    cgroups, why = sandbox.find_cgroups()
    assert cgroups is not None, why
    gone = 4_000_000  # a pid no process has (above this kernel's usual pid_max)
    assert not os.path.exists(f"/proc/{gone}")
    monkeypatch.setattr(os, "getpid", lambda: gone)
    left = cgroups.new_group(sandbox.Limits())
    monkeypatch.undo()
    mine = cgroups.new_group(sandbox.Limits())
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        (left.dirs[0] / "cgroup.procs").write_text(str(sleeper.pid))  # a survivor in the stale group
        cgroups.sweep()
        assert sleeper.wait(timeout=10) == -9
        assert not any(d.exists() for d in left.dirs + mine.dirs)
    finally:
        sleeper.kill()
        left.remove(wait_s=0)
        mine.remove(wait_s=0)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (scripts/setup_sandbox.sh)")
def test_where_bubblewrap_cannot_make_namespaces_the_refusal_names_no_sandbox(monkeypatch):
    """An unprivileged container: bwrap starts but cannot create its namespaces (stood in for here)."""
    refused = subprocess.CompletedProcess([], 1, "", "bwrap: No permissions to creating new namespace")
    sandbox.seccomp_filter()  # built (and kept) before the stand-in replaces subprocess.run
    monkeypatch.setattr(policy.subprocess, "run", lambda *a, **k: refused)
    uid = sandbox.FIRST_UID if os.geteuid() == 0 else None  # a root grader must name one (not used here)
    message = sandbox.check_bwrap(sandbox.Limits(), None, uid)
    assert "cannot create its namespaces" in message and "--no-sandbox" in message
    assert "one submission only" in message


# vsock (which no network namespace holds) and io_uring (whose operations no seccomp filter sees), tried
# by a process of the sandbox: open without the filter, denied with it.
SOCKETS_AND_RINGS = r"""
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
def call(label, fn, *args):
    ok = getattr(libc, fn)(*args) >= 0
    return f"{label}={'ok' if ok else errno.errorcode.get(ctypes.get_errno(), '?')}"
print(' '.join([call('vsock', 'socket', 40, 1, 0),
                call('vsock_high', 'syscall', 41, ctypes.c_long(0x100000028), 1, 0),
                call('vsock_pair', 'socketpair', 40, 1, 0, ctypes.create_string_buffer(8)),
                call('uring', 'syscall', 425, 8, ctypes.create_string_buffer(120)),
                call('uring_enter', 'syscall', 426, -1, 0, 0, 0, None, 0),
                call('uring_register', 'syscall', 427, -1, 0, None, 0),
                call('inet', 'socket', 2, 1, 0)]), flush=True)
"""


@needs_root_and_bwrap
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe uses x86_64 system call numbers")
def test_vsock_and_io_uring_are_denied_in_the_sandbox(monkeypatch):
    uid = sandbox.allocate_uids(1)[0]
    monkeypatch.setattr(policy, "python_roots", lambda: [])

    def run(with_filter: bool) -> str:
        fds = [sandbox.memfd_with(b"{}", "n")] + ([sandbox.memfd_with(sandbox.seccomp_filter(), "f")]
                                                  if with_filter else [])
        try:
            cmd = sandbox.bwrap_command(["/usr/bin/python3", "-c", SOCKETS_AND_RINGS], sandbox.Limits(), fds[0],
                                        uid, fds[1] if with_filter else None)
            done = subprocess.run(sandbox.launcher(None, "/usr/bin/python3") + cmd, pass_fds=fds,
                                  capture_output=True, text=True, timeout=120)
        finally:
            for fd in fds:
                os.close(fd)
        return done.stdout.strip() or done.stderr

    unfiltered = run(False)  # the attack: each interface opens (where this kernel has vsock at all)
    assert "uring=ok" in unfiltered and "inet=ok" in unfiltered, unfiltered
    assert run(True) == ("vsock=EPERM vsock_high=EPERM vsock_pair=EPERM uring=EPERM uring_enter=EPERM "
                         "uring_register=EPERM inet=ok")  # an ordinary socket (of its empty network) still opens


# --- without bubblewrap (--no-sandbox as root, Gradescope's fallback): a user id of its own -----------------

@needs_root_and_bwrap
def test_every_process_of_a_sandbox_user_is_killed_however_detached():
    """kill_user ends a sandbox uid's processes, a setsid daemon and its orphaned child included."""
    uid = sandbox.allocate_uids(1)[0]
    script = "import os, subprocess, time\nsubprocess.Popen(['sleep', '300'], start_new_session=True)\n" \
             "if os.fork() == 0:\n    os.setsid()\n    time.sleep(300)\n"
    subprocess.run(sandbox.drop_to(uid) + ["/usr/bin/python3", "-c", script], timeout=60, check=True)
    deadline = time.monotonic() + 10
    while len(sandbox.processes_of(uid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(sandbox.processes_of(uid)) == 2  # both outlived the process that started them
    sandbox.kill_user(uid)
    deadline = time.monotonic() + 10
    while sandbox.processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox.processes_of(uid) == set()
    with pytest.raises(ValueError):
        sandbox.kill_user(0)  # never root's, nor any id below the sandbox range


def test_without_bubblewrap_root_runs_the_code_as_its_slots_user(monkeypatch, tmp_path):
    """--no-sandbox as root: the recorder starts through setpriv as the slot's uid, with its process
    limit, in a scratch folder that uid owns; after the run every process of that uid is killed."""
    from nexttoken.grading import launch, run

    started, chowned, killed = [], [], []

    class Done(Exception):
        pass

    def popen(cmd, **kwargs):
        started.append(cmd)
        raise Done

    sandbox.seccomp_filter("no_threads")  # built (and kept) before Popen is replaced below
    monkeypatch.setattr(launch.subprocess, "Popen", popen)
    monkeypatch.setattr(launch.os, "chown", lambda path, uid, gid: chowned.append((str(path), uid)))
    monkeypatch.setattr(sandbox, "kill_user", killed.append)
    job = run.Job(b"{}", None, run.Settings(use_sandbox=False, uids=[61007]), 0, time.monotonic() + 60)
    with pytest.raises(Done):
        run.run_once(job, set())
    [cmd] = started
    assert cmd[cmd.index("--") + 1:][:2] == [shutil.which("setpriv") or "/usr/bin/setpriv", "--reuid=61007"]
    assert "--no-new-privs" in cmd and any(a.startswith("--nproc=") for a in cmd)
    assert {uid for _, uid in chowned} == {61007} and any(p.endswith("submission.ipynb") for p, _ in chowned)
    job = run.Job(b"{}", None, run.Settings(use_sandbox=False, uids=[None]), 0, time.monotonic() + 60)
    with pytest.raises(Done):  # not root: as before, no setpriv
        run.run_once(job, set())
    assert "--reuid=61007" not in " ".join(started[-1]) and not any(a.startswith("--nproc=") for a in started[-1])
    sandbox.close_view()  # the package view these runs made: what the batch would remove as it ends

    class Ended:
        pid = 2 ** 22 + 12345  # above pid_max: no such process group

        def wait(self, timeout=None):
            return 0

    launch.end(Ended(), None, 61007)
    assert killed == [61007]


def test_the_package_view_is_removed_when_closed_and_made_again_when_needed():
    """A run without bubblewrap reads the package from a view the grader makes; the batch that made it removes
    it as it ends (batch.run), and a later run makes it again."""
    from pathlib import Path

    first = Path(sandbox.view_env({}, None)["PYTHONPATH"])
    assert (first / "nexttoken" / "exercises" / "__init__.py").is_file()
    sandbox.close_view()
    assert not first.exists()
    again = Path(sandbox.view_env({}, None)["PYTHONPATH"])
    assert again.is_dir() and again != first
    sandbox.close_view()
    assert not again.exists()
