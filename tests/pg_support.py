"""A throwaway PostgreSQL cluster for the state specs: Debian's own server binaries, a temporary
data directory, a free port on 127.0.0.1, password authentication, no Unix socket.

PostgreSQL refuses to run as root; run as root (CI containers are), the cluster belongs to the
`postgres` user that Debian's package creates (scripts/setup-scaleout.sh installs it). Missing
binaries skip locally and fail under CI (tests/e2e_support.py `missing`).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

from e2e_support import missing

USER = "supervisor"


def pg_bin() -> Path | None:
    """The directory of Debian's newest PostgreSQL server binaries (initdb, pg_ctl)."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parts[4])
    )
    return versions[-1].parent if versions else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """One running server; `database()` hands out a fresh, empty database per spec."""

    def __init__(self) -> None:
        binaries = pg_bin()
        if binaries is None:
            missing("PostgreSQL server binaries not installed (bash scripts/setup-scaleout.sh)")
        assert binaries is not None
        self.bin = binaries
        self.as_user: list[str] = []
        owner = None
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                missing("running as root and no `postgres` user to run PostgreSQL as")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.dir = Path(tempfile.mkdtemp(prefix="supervisor-pg-"))
        self.password = secrets.token_hex(12)
        (self.dir / "pw").write_text(self.password + "\n")
        if owner is not None:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            os.chown(self.dir / "pw", owner.pw_uid, owner.pw_gid)
        self._run(
            "initdb", "-D", str(self.dir / "data"), "-U", USER, "--auth=scram-sha-256",
            f"--pwfile={self.dir / 'pw'}", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        self.port = free_port()
        self.start_server()

    def start_server(self) -> None:
        """Start the server on its data directory and port (again, after `stop_server`)."""
        options = f"-F -p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
        self._run(
            "pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-o", options,
            "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop_server(self) -> None:
        """Stop the server, its data kept (a restart's first half: every session is ended)."""
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "fast", "-w", "stop")

    def terminate(self, pid: int) -> None:
        """End one server session, as an operator's `pg_terminate_backend` does."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=USER, password=self.password, dbname="postgres",
            autocommit=True,
        ) as conn:  # fmt: skip
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))

    def _run(self, tool: str, *args: str) -> None:
        result = subprocess.run(
            [*self.as_user, str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if result.returncode != 0:
            log = self.dir / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed: {result.stdout}{result.stderr}{tail}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=USER, password=self.password, dbname="postgres",
            autocommit=True,
        ) as conn:  # fmt: skip
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
