"""A throwaway PostgreSQL cluster made with the server binaries on the machine."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from worker.local.embedded import free_port


def find_pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


@dataclass
class PostgresCluster:
    base: Path
    port: int
    pg_ctl: str
    run_as: list[str]
    options: str = ""
    """The server's options (``postgres`` command line)."""
    host: str = "127.0.0.1"
    """Where the tests reach the server (a link's address when it runs in a namespace)."""

    @property
    def admin_url(self) -> str:
        return self.url("postgres")

    def url(self, database: str, host: str | None = None) -> str:
        """The URL of ``database``, reached at ``host`` (default :attr:`host`)."""
        return f"postgresql+psycopg://postgres@{host or self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(
            f"postgresql://postgres@{self.host}:{self.port}/postgres", autocommit=True
        ) as connection:
            # A stack stopped just before may hold connections a moment longer: closed.
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _pg_ctl(self, *args: str) -> None:
        """``pg_ctl`` on this cluster's data, waiting (60 s at most) for it to be done."""
        subprocess.run(
            [
                *self.run_as,
                self.pg_ctl,
                "-D",
                str(self.base / "data"),
                # The log file, always: without it the server would write to our pipe.
                "-l",
                str(self.base / "postgres.log"),
                "-w",
                "-t",
                "60",
                *args,
            ],
            check=True,
            capture_output=True,
        )

    def start_server(self) -> None:
        """Start the server; back once it accepts connections."""
        self._pg_ctl("-o", self.options, "start")

    def stop_server(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``: the data stays, :meth:`start_server` starts it again."""
        self._pg_ctl("-m", mode, "stop")

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m mode``; back once the server accepts connections again."""
        self._pg_ctl("-m", mode, "-o", self.options, "restart")

    def stop(self) -> None:
        subprocess.run(
            [*self.run_as, self.pg_ctl, "-D", str(self.base / "data"), "-m", "immediate", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(self.base, ignore_errors=True)


def start_cluster(
    *,
    run_in: Sequence[str] = (),
    listen: Sequence[str] = ("127.0.0.1",),
    trust: Sequence[str] = (),
) -> PostgresCluster:
    """initdb + pg_ctl start on a free port; as root the server runs as ``postgres``.

    ``run_in`` goes before every ``pg_ctl`` (``ip netns exec NAME``: the server runs in that
    network namespace); it listens on the ``listen`` addresses (the first is where the tests
    reach it) and trusts clients from the ``trust`` networks besides loopback."""
    initdb, pg_ctl = find_pg_binary("initdb"), find_pg_binary("pg_ctl")
    if not initdb or not pg_ctl:
        raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) not found")
    base = Path(tempfile.mkdtemp(prefix="billing-pg-"))
    base.chmod(0o755)
    run_as: list[str] = []
    if os.geteuid() == 0:
        # initdb refuses to run as root.
        shutil.chown(base, "postgres", "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [
            *run_as,
            initdb,
            "-D",
            str(base / "data"),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
    )
    with (base / "data" / "pg_hba.conf").open("a") as rules:
        for network in trust:
            rules.write(f"host all all {network} trust\n")
    port = free_port()
    options = (
        f"-p {port} -k {base} -c listen_addresses={','.join(listen)} -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    cluster = PostgresCluster(
        base=base,
        port=port,
        pg_ctl=pg_ctl,
        run_as=[*run_in, *run_as],
        options=options,
        host=listen[0],
    )
    cluster.start_server()
    return cluster
