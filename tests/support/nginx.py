"""nginx (Debian package ``nginx-light`` or ``nginx``) running the shipped
``deploy/nginx.conf`` in front of a test's API: skipped where nginx is missing, a failure in
CI (``CI=true``; ``.ci/run`` installs it).

The configuration is the shipped one with only what ties it to docker-compose changed: where
it listens (a free port on 127.0.0.1), where it proxies to (the test's API), and where it
writes (the test's directory: no access log, its own temporary files, pid and error log).
Its server block, limits and forwarding headers are exactly what docker-compose runs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from worker.local.embedded import ProcessGroup, free_port, port_open, wait_until

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = ROOT / "deploy" / "nginx.conf"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TEMPORARY_FILES = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def nginx() -> str:
    found = shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx",) if os.access(path, os.X_OK)), None
    )
    if found is None:
        if IN_CI:
            pytest.fail("nginx is required in CI (Debian package nginx-light; .ci/run)")
        pytest.skip("nginx not found (apt-get install --no-install-recommends nginx-light)")
    return found


def _replaced(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"deploy/nginx.conf no longer holds {old!r} once"
    return text.replace(old, new)


def config_for_test(directory: Path, port: int, upstream_port: int) -> str:
    """The shipped configuration, listening on ``127.0.0.1:port`` and proxying to
    ``127.0.0.1:upstream_port``, writing in ``directory``."""
    text = SHIPPED_CONFIG.read_text()
    text = _replaced(text, "listen 8080;", f"listen 127.0.0.1:{port};")
    text = _replaced(
        text, "proxy_pass http://api:8080;", f"proxy_pass http://127.0.0.1:{upstream_port};"
    )
    paths = "".join(f"    {kind}_temp_path {directory / kind};\n" for kind in TEMPORARY_FILES)
    return _replaced(text, "http {\n", f"http {{\n    access_log off;\n{paths}")


@contextmanager
def nginx_in_front_of(api_url: str, directory: Path) -> Iterator[str]:
    """nginx with the shipped configuration in front of the API at ``api_url``; its URL."""
    binary = nginx()
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    upstream_port = int(api_url.rsplit(":", 1)[1])
    config = directory / "nginx.conf"
    config.write_text(config_for_test(directory, port, upstream_port))
    group = ProcessGroup()
    group.start(
        "nginx",
        [
            binary,
            *("-p", str(directory), "-c", str(config), "-e", str(directory / "error.log")),
            *("-g", f"daemon off; pid {directory / 'nginx.pid'};"),
        ],
        log_path=directory / "nginx.log",
    )
    try:
        wait_until(lambda: port_open("127.0.0.1", port) or bool(group.exited()), 15, "nginx")
        assert not group.exited(), (directory / "error.log").read_text(errors="replace")
        yield f"http://127.0.0.1:{port}"
    finally:
        group.stop()
