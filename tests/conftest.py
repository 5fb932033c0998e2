"""Fixtures shared by the tests that drive the real pipeline.

scripts/test.sh runs the suite in three pytest-xdist processes (`--dist loadgroup`). Everything a
spec makes is its own: tmp_path (per process), project images named after their checkout's path,
containers labelled with their repository, tmux on its own socket, scripted APIs on free ports.
Files pinned to one process with `pytest.mark.xdist_group`:
- `real_projects` (test_real_projects.py): module fixtures build two project images once; the
  last spec commits to the shared fixture repository.
- `egress_network` (test_egress.py, test_sandbox.py): they share the workers' test network and
  its host firewall chain. Creating that network from several processes at once is safe
  (supervisor/sandbox/egress.py keeps one network of a name), so other Docker specs run beside
  them.
- `postgres` (the `[postgresql]` state specs, test_state_shared.py, test_pg_dropped.py, which
  stops and restarts that cluster and starts one module dev server for its Temporal case): one
  throwaway PostgreSQL cluster (tests/pg_support.py) serves them all.
- `temporal` (test_temporal_e2e.py, test_temporal_ops_e2e.py and the fast Temporal files
  (test_team_stranded.py among them),
  test_temporal_dispatch.py's and test_worker_pools.py's specs each sharing a module dev server
  with in-process workers, tests/temporal_standin.py) and
  `temporal_team` (test_team_e2e.py, whose specs share a module dev server, and
  test_temporal_spread_e2e.py): every dev server has its own ports, database file and task
  queue, so the two groups may run side by side; each group keeps its specs in one process so
  that no more than two servers and their workers run at once. One group of all six files was
  about a third of the run, which made it the run's floor (benchmarks/test-durations.md).
- `ts_project` and `ts_project_2` (test_templates_ts_e2e.py, test_attacks_gates_ts.py): two
  groups of about equal length on one pnpm project image, built once per run and shared between
  the processes (tests/run_once.py: the first builds under a file lock in the run's shared
  temporary directory, the other finds it built and tags it with its own checkout's name). One
  group of all seven specs was the run's floor (benchmarks/test-durations.md).
- `monorepo_pnpm`, `monorepo_go` (test_monorepo_pnpm_e2e.py, test_monorepo_go_e2e.py): each
  file's specs share one project image of its workspace, built by a module fixture.
- `own_engine` (test_engine_restart_e2e.py): its specs crash and restart a second Docker daemon
  of their own (tests/dockerd_support.py), whose data root, with the sandbox image loaded, is kept
  between runs under one file lock: one process starts that daemon once for them all.
- `checkout_setup` (the specs that run scripts/setup.sh in this checkout, and the one that checks
  nothing holds its lock afterwards): setup.sh holds `.cache/setup.lock` while it runs, so the
  check must not run beside them.

Longest first: `--dist loadgroup` hands out the groups (largest first), then single specs in
collection order. `pytest_collection_modifyitems` below puts the minutes-long specs (`slow`),
then the other end-to-end ones (`docker`, `cli`), before the fast specs, so the run's last
minutes are filled with sub-second specs instead of one process finishing a long pipeline while
the others sit idle (the longest-processing-time-first rule)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from supervisor.fakeapi import ScriptedModelServer, load_script

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

pytest_plugins = ["browser_support"]  # browser, browser_context, page, serve_app (web specs)

LONG_FILES = frozenset(
    {
        "test_adopt_e2e.py",
        "test_adaptive_e2e.py",
        "test_attacks_gates.py",
        "test_attacks_gates_ts.py",
        "test_components_e2e.py",
        "test_harbor_agent.py",
        "test_monorepo_go_e2e.py",
        "test_monorepo_pnpm_e2e.py",
        "test_templates_ts_e2e.py",
    }
)
"""Files of end-to-end specs of one to three minutes each (benchmarks/test-durations.md)."""


def _weight(item: pytest.Item) -> int:
    """0 for the minutes-long specs, 1 for other end-to-end specs, 2 for the fast ones."""
    if item.get_closest_marker("slow") or item.path.name in LONG_FILES:
        return 0
    if item.get_closest_marker("docker") or item.get_closest_marker("cli"):
        return 1
    return 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest first (see above), with the specs that mostly wait (`waits`) spread evenly among
    the end-to-end ones: side by side, or beside other waiting specs, they left both cores idle
    for half a minute at a time (a run's idle time, sampled each second,
    benchmarks/test-durations.md); spread out, each waits beside the busy specs of the other
    processes."""
    items.sort(key=_weight)  # stable: files keep their own order within a weight
    waiting = [item for item in items if item.get_closest_marker("waits")]
    if not waiting:
        return
    rest = [item for item in items if not item.get_closest_marker("waits")]
    e2e = sum(1 for item in rest if _weight(item) < 2)
    gap = e2e // (len(waiting) + 1)
    for n, item in enumerate(waiting):  # from the back, so that earlier places do not move
        rest.insert(gap * (len(waiting) - n), item)
    items[:] = rest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """With $SUPERVISOR_TEST_TIMELINE set, append one line per spec (process, start, end, spec)
    to that file: which process ran what, and when, is what shows a run's floor
    (benchmarks/suite_timeline.py reads it)."""
    path = os.environ.get("SUPERVISOR_TEST_TIMELINE")
    start = time.time()
    yield
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with Path(path).open("a", encoding="utf-8") as out:
            out.write(f"{worker}\t{start:.3f}\t{time.time():.3f}\t{item.nodeid}\n")


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedModelServer]]:
    """Start a scripted model API on loopback from conversations; closed after the test. Every
    request is logged to stderr, which pytest shows for a failing test only."""
    servers: list[ScriptedModelServer] = []

    def start(*conversations: dict[str, Any]) -> ScriptedModelServer:
        server = ScriptedModelServer(
            load_script({"conversations": list(conversations)}), verbose=True
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture(autouse=True, scope="session")
def own_user_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No spec reads or writes the user's own ~/.supervisor (its config, trust records, caches):
    each run has one of its own, shared by its test processes as the real one was (what one
    probed, the others find), which `api_keys` narrows to a spec's. Before, the specs' trust
    records piled up in the real one, and a spec trusted an earlier run's folder of the same
    path (after pytest's numbering started again) as its own."""
    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # the run's folder; each process has its own below it
    user = run / "user"
    user.mkdir(exist_ok=True)
    patch = pytest.MonkeyPatch()
    patch.setenv("SUPERVISOR_USER_DIR", str(user))
    yield
    patch.undo()


@pytest.fixture(autouse=True, scope="session")
def no_container_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A spec that kills its supervisor and never resumes (a kill while a task waits) leaves what
    that supervisor prepared still running, a CLI waiting for a prompt that never comes: its next
    command on that repository would remove it, and a spec runs none. Whatever this test process's
    specs left (a container mounting a folder of its temporary tree) goes when it ends, so that a
    day of runs on one machine does not pile them up."""
    yield
    mine = str(tmp_path_factory.getbasetemp()) + os.sep  # pytest-13/..., never pytest-130/...
    try:
        import docker

        client = docker.from_env()
        for container in client.containers.list(all=True, filters={"label": "supervisor.repo"}):
            mounts = container.attrs.get("Mounts") or []
            if not any(str(m.get("Source", "")).startswith(mine) for m in mounts):
                continue
            container.remove(force=True)
            for mount in mounts:
                if mount.get("Type") == "volume" and mount.get("Name"):
                    client.volumes.get(mount["Name"]).remove(force=True)
    except Exception:  # no engine here (a fast run): nothing was started
        return


@pytest.fixture
def api_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private user config directory and a key for every CLI (the scripted API accepts any)."""
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "test-key")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL server (tests/pg_support.py), one per test process."""
    from pg_support import Cluster

    cluster = Cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def shared_state(pg_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh PostgreSQL database as the state of this spec and of every process it starts
    ($SUPERVISOR_STATE_URL, as a team's hosts would set it); its URL."""
    url = str(pg_cluster.database())
    monkeypatch.setenv("SUPERVISOR_STATE_URL", url)
    return url


@pytest.fixture
def temporal(tmp_path: Path) -> Iterator[Any]:
    """A Temporal dev server of this spec's own (tests/temporal_support.py)."""
    from temporal_support import DevServer

    server = DevServer(tmp_path)
    yield server
    server.stop()


# The state specs run against both backends; PostgreSQL's are pinned to one xdist process, so
# that a single cluster serves them all (and CI starts it once).
STATE_BACKENDS = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.xdist_group("postgres")),
]


@pytest.fixture(params=STATE_BACKENDS)
def state_url(request: pytest.FixtureRequest) -> str:
    """'' for the repository's own SQLite file, or the URL of a fresh PostgreSQL database;
    pass it to `Store(path, url=state_url)`."""
    if request.param == "sqlite":
        return ""
    return str(request.getfixturevalue("pg_cluster").database())
