"""The PostgreSQL cluster ``seed`` fills and ``bench scale`` reads: kept in a directory of its
own between runs (a seeded database takes minutes to make), started on a free port."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.postgres import PostgresCluster, _server_options, find_pg_binary
from worker.local.embedded import free_port

SERVER_SETTINGS = (
    # A production server's memory, in part: the 128 MB default would measure the disk.
    "-c shared_buffers=1GB -c effective_cache_size=4GB -c work_mem=16MB "
    "-c maintenance_work_mem=512MB -c max_wal_size=8GB -c synchronous_commit=off"
)


def scale_cluster(base: Path, *, fresh: bool = False) -> PostgresCluster:
    """The cluster in ``base`` (made there when ``fresh`` or missing), started."""
    initdb, pg_ctl = find_pg_binary("initdb"), find_pg_binary("pg_ctl")
    if not initdb or not pg_ctl:
        raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) not found")
    run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if fresh and base.exists():
        shutil.rmtree(base)
    if not (base / "data" / "PG_VERSION").exists():
        base.mkdir(parents=True, exist_ok=True)
        base.chmod(0o755)
        if run_as:
            shutil.chown(base, "postgres", "postgres")
        subprocess.run(
            [*run_as, initdb, "-D", str(base / "data"), "-U", "postgres", "--auth=trust",
             "-E", "UTF8", "--no-sync"],
            check=True,
            capture_output=True,
        )  # fmt: skip
    port = free_port()
    cluster = PostgresCluster(
        base=base,
        port=port,
        pg_ctl=pg_ctl,
        run_as=run_as,
        options=_server_options(port, base, SERVER_SETTINGS),
    )
    cluster.start_server()
    return cluster
