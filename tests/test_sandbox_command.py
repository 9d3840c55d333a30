"""The sandbox command mounts the Python installation and the package after its private /tmp, so that a
checkout or virtual environment under /tmp stays visible inside (bwrap applies mounts in order)."""

from nexttoken import sandbox


def test_package_binds_come_after_the_private_tmp(monkeypatch):
    monkeypatch.setattr(sandbox, "_python_roots", lambda: ["/tmp/checkout/.venv", "/tmp/checkout/lib"])
    cmd = sandbox.bwrap_command(["python"], sandbox.Limits(), notebook_fd=0, uid=61000)
    tmpfs = cmd.index("/tmp", cmd.index("--tmpfs"))
    binds = [i for i, a in enumerate(cmd) if a == "--ro-bind" and cmd[i + 1].startswith("/tmp/checkout")]
    assert len(binds) == 2 and all(i > tmpfs for i in binds)
    assert "--dir" in cmd and "/tmp/checkout" in cmd  # its parent is created inside the tmpfs
