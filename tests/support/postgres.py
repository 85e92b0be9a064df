"""A throwaway PostgreSQL cluster made with the server binaries on the machine."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
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

    def promote(self) -> None:
        """``pg_ctl promote`` of a standby; back once it accepts writes."""
        self._pg_ctl("promote")

    def kill(self) -> None:
        """SIGKILL the postmaster and its backends at once (a crash: no shutdown, no
        checkpoint; clients' connections are cut mid-statement)."""
        pid_file = self.base / "data" / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0])
        children = subprocess.run(
            ["pgrep", "-P", str(postmaster)], capture_output=True, text=True, check=False
        ).stdout.split()
        for pid in [postmaster, *map(int, children)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        subprocess.run(
            [*self.run_as, self.pg_ctl, "-D", str(self.base / "data"), "-m", "immediate", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(self.base, ignore_errors=True)


def start_cluster(
    extra_options: str = "",
    *,
    run_in: Sequence[str] = (),
    listen: Sequence[str] = ("127.0.0.1",),
    trust: Sequence[str] = (),
) -> PostgresCluster:
    """initdb + pg_ctl start on a free port; as root the server runs as ``postgres``.

    ``extra_options``: more of the server's options (``-c name=value``), over the defaults.
    ``run_in`` goes before every ``pg_ctl`` (``ip netns exec NAME``: the server runs in that
    network namespace); it listens on the ``listen`` addresses (the first is where the tests
    reach it) and trusts clients from the ``trust`` networks besides loopback."""
    initdb, pg_ctl = find_pg_binary("initdb"), find_pg_binary("pg_ctl")
    if not initdb or not pg_ctl:
        raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) not found")
    base, run_as = _own_directory("billing-pg-")
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
    options = _server_options(
        port, base, f"-c synchronous_commit=off {extra_options}", listen=listen
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


def _own_directory(prefix: str) -> tuple[Path, list[str]]:
    """A new directory for a cluster's data, and the command prefix its binaries run under
    (as root: the ``postgres`` user, which initdb and the server insist on)."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
        return base, ["runuser", "-u", "postgres", "--"]
    return base, []


def _server_options(
    port: int, base: Path, extra: str = "", *, listen: Sequence[str] = ("127.0.0.1",)
) -> str:
    return (
        f"-p {port} -k {base} -c listen_addresses={','.join(listen)} -c fsync=off "
        f"-c full_page_writes=off -c max_connections=200 {extra}"
    ).strip()


@dataclass
class StreamingPair:
    """A primary and a streaming standby (``pg_basebackup``), as managed PostgreSQL and
    Patroni run them: a switchover promotes the standby (``pg_ctl promote``).

    Replication is synchronous (``synchronous_standby_names='*'``): a commit the primary
    acknowledged is on the standby too, so a primary killed mid-commit loses nothing the
    application was told was written. The standby carries no such setting: once promoted it
    commits alone (its old primary is gone or read-only)."""

    primary: PostgresCluster
    standby: PostgresCluster

    def url(self, database: str) -> str:
        """libpq's multi-host URL: each host in turn, the first that accepts writes."""
        hosts = "&".join(f"host=127.0.0.1:{server.port}" for server in (self.primary, self.standby))
        return f"postgresql+psycopg://postgres@/{database}?{hosts}&target_session_attrs=read-write"

    def create_database(self, name: str) -> str:
        """A database made on the primary (the standby replays it); its multi-host URL."""
        self.primary.create_database(name)
        return self.url(name)

    def caught_up(self) -> None:
        """Wait until the standby replayed everything the primary wrote (60 s at most)."""
        import time

        import psycopg

        primary = f"postgresql://postgres@127.0.0.1:{self.primary.port}/postgres"
        standby = f"postgresql://postgres@127.0.0.1:{self.standby.port}/postgres"
        with psycopg.connect(primary, autocommit=True) as connection:
            row = connection.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        target = str(row[0])
        deadline = time.monotonic() + 60
        with psycopg.connect(standby, autocommit=True) as connection:
            while True:
                done = connection.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)
                ).fetchone()
                if done and done[0]:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the standby never replayed up to {target}")
                time.sleep(0.05)

    def promote(self) -> None:
        """``pg_ctl promote``: back once the standby accepts writes."""
        self.standby.promote()

    def make_primary_read_only(self) -> None:
        """The old primary stays up and refuses every write (SQLSTATE 25006), its sessions
        included: ``default_transaction_read_only`` reloaded, as a demoted server answers."""
        import psycopg

        url = f"postgresql://postgres@127.0.0.1:{self.primary.port}/postgres"
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            connection.execute("SELECT pg_reload_conf()")

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster and every backend: no shutdown, no goodbye."""
        self.primary.kill()

    def switch_over(self) -> None:
        """A planned switchover, as managed PostgreSQL and Patroni make one: the primary
        stopped (``-m fast``: it sends its standby every record it wrote first), then the
        standby promoted; back once it accepts writes. The old primary is then made a standby
        of the new one again, from a new base backup on its own port (the multi-host URL keeps
        naming both), and the two trade roles: a later switchover flips them back."""
        self.primary.stop_server()
        self.standby.promote()
        old = self.primary
        shutil.rmtree(old.base / "data")
        _base_backup(self.standby, old.base, old.run_as)
        old.options = _server_options(old.port, old.base, "-c synchronous_commit=off")
        old.start_server()
        self.primary, self.standby = self.standby, old

    def stop(self) -> None:
        self.standby.stop()
        self.primary.stop()


def start_streaming_pair() -> StreamingPair:
    """A primary (:func:`start_cluster`, synchronous replication) and a standby made from it
    with ``pg_basebackup -R``, streaming; both accept connections when this returns."""
    primary = start_cluster(
        "-c synchronous_standby_names='*' -c synchronous_commit=on -c wal_level=replica"
    )
    try:
        base, run_as = _own_directory("billing-pg-standby-")
        _base_backup(primary, base, run_as)
        port = free_port()
        standby = PostgresCluster(
            base=base,
            port=port,
            pg_ctl=primary.pg_ctl,
            run_as=run_as,
            options=_server_options(port, base, "-c synchronous_commit=off"),
        )
        standby.start_server()
    except BaseException:
        primary.stop()
        raise
    return StreamingPair(primary, standby)


def _base_backup(primary: PostgresCluster, base: Path, run_as: Sequence[str]) -> None:
    """``pg_basebackup -R`` of ``primary`` into ``base``'s data: a standby streaming from it
    once started."""
    basebackup = find_pg_binary("pg_basebackup")
    if not basebackup:
        raise FileNotFoundError("pg_basebackup not found")
    subprocess.run(
        [
            *run_as,
            basebackup,
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(base / "data"),
            "-R",  # standby.signal and primary_conninfo: it streams from the primary
            "-X",
            "stream",
            "--checkpoint=fast",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
    )
