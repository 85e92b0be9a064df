"""The publisher of ``docs/how-to/publish-commands.md`` works with exactly what the page says
to install: a fresh virtualenv holding only ``celery[redis]`` (from the package index, pinned
as the runtime lock pins it), running ``examples/publish_command.py`` against a real Redis,
puts the command on the ``users`` queue. Needs the package index: skipped locally without
one, a failure in CI."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import venv
from pathlib import Path

import pytest
import redis
from packaging.markers import default_environment

from tests.support.lockfile import RUNTIME_LOCK, read_lock
from tests.support.package_index import require_package_index
from tests.support.redis_server import RedisServer

pytestmark = [pytest.mark.install, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "publish-commands.md"
PUBLISHER = ROOT / "examples" / "publish_command.py"
INSTALL_BLOCK = re.compile(r"^```sh\n(pip install [^\n]*)\n```", re.MULTILINE)


def the_page_s_install_command() -> list[str]:
    [line] = INSTALL_BLOCK.findall(PAGE.read_text())
    return shlex.split(line)


def runtime_lock_pins(path: Path) -> Path:
    """A constraints file of the runtime lock's versions for this machine (no hashes: pip takes
    none in a constraints file)."""
    here = {key: str(value) for key, value in default_environment().items()}
    pins = [
        f"{package.name}=={package.version}"
        for package in read_lock(RUNTIME_LOCK)
        if package.needed_on(here)
    ]
    path.write_text("\n".join(pins) + "\n")
    return path


def test_the_page_names_celery_with_its_redis_extra() -> None:
    assert the_page_s_install_command() == ["pip", "install", "celery[redis]"]


def test_a_virtualenv_holding_only_what_the_page_installs_publishes_a_command(
    tmp_path: Path,
) -> None:
    require_package_index("the publisher's install")
    environment = tmp_path / "publisher-venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    clean_env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("BILLING_", "PYTHON", "VIRTUAL_ENV"))
    }
    _pip, *arguments = the_page_s_install_command()
    constraints = runtime_lock_pins(tmp_path / "constraints.txt")
    installed = subprocess.run(
        [python, "-m", "pip", "--quiet", *arguments, "--constraint", constraints],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]

    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        published = subprocess.run(
            [python, PUBLISHER, "usr_published"],
            env={**clean_env, "REDIS_URL": server.url},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert published.returncode == 0, published.stderr[-2000:]
        command_id = published.stdout.strip()

        [raw] = redis.Redis.from_url(server.url).lrange("users", 0, -1)
    finally:
        server.stop()
    message = json.loads(raw)
    assert message["headers"]["task"] == "users.enable"
    args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    assert (args, kwargs) == ([], {"command_id": command_id, "user_id": "usr_published"})
