"""A plan's components spread over several worker hosts (issue 15), on real parts: the Temporal
dev server, PostgreSQL as the shared state, a bare repository as the team's remote, three
`supervisor worker` processes each with its own clone, the real `claude` in the real Docker
sandbox against the scripted model API.

The fan-out step hands its ready components to the workflow, which runs one activity per
component on any worker; each builds and gates its component in its own clone and pushes the
component's branch; the step then merges them (the same merge code as the embedded runner).
A host killed with SIGKILL while it builds a component has that component retried on another
host, from the remote alone."""

from __future__ import annotations

import subprocess
import time
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import new_repo, planner, remove_containers, require_sandbox, write_workflow
from temporal_support import DevServer
from test_components_e2e import builds, component, plan
from test_temporal_e2e import start_worker, supervisor, wait_for
from test_temporal_ops_e2e import clone_for_a_host, config, git_out

from supervisor.state.store import Store

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.docker, pytest.mark.xdist_group("temporal_team")]

WORKFLOW = """workflow:
  initial_step: plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, gates: [compile], next: commit}
    commit: {action: commit}
"""
GATES = 'gates:\n  compile: "python3 -m py_compile *.py"\nlimits: {max_parallel_components: 6}\n'
PARTS = {cid: f"def {cid}():\n    return {i}\n" for i, cid in enumerate("abcdef")}


def test_six_components_spread_over_three_worker_hosts_and_merge_on_the_remote(
    tmp_path: Path,
    serve: Any,
    api_keys: None,
    temporal: DevServer,
    shared_state: str,
) -> None:
    require_sandbox()
    script = [planner(plan(*(component(cid, [f"{cid}.py"]) for cid in PARTS)))]
    script += [builds(cid, (f"{cid}.py", text), delay=4.0) for cid, text in PARTS.items()]
    script += [builds(cid, (f"{cid}.py", text)) for cid, text in PARTS.items()]  # a retry's
    server = serve(*script)
    remote = tmp_path / "team.git"
    repo = new_repo(tmp_path, server.url, config(temporal, remote) + GATES)
    write_workflow(repo, WORKFLOW)
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(remote)], check=True)
    hosts = [clone_for_a_host(remote, repo, tmp_path / f"host-{n}") for n in "abc"]
    before = git_out("-C", str(repo), "for-each-ref", "--format=%(refname) %(objectname)")

    started = supervisor("start-task", "--yes", "--backend", "temporal", "Build six parts",
                         "--repo", str(repo))  # fmt: skip
    assert started.returncode == 0, started.stderr
    log = tmp_path / "workers.log"
    workers = [start_worker(host, temporal, log) for host in hosts]
    try:
        lost = building_on(repo, hosts[0], log)
        workers[0].kill()  # SIGKILL mid-component: host A is gone, with whatever its clone held
        workers[0].wait()
        done = wait_for(repo, 1, {"completed", "failed"}, log, timeout=300)
    finally:
        for proc in workers:
            proc.kill()
            proc.wait()
        remove_containers(*hosts)  # host A's, killed mid-component
    assert done.status == "completed", done.error
    for cid, text in PARTS.items():  # every component's work is on the remote's task branch
        assert git_out("--git-dir", str(remote), "show", f"{done.task_branch}:{cid}.py") == text
    audit = git_out("--git-dir", str(remote), "for-each-ref", "refs/supervisor/wf1/attempts/")
    for cid in PARTS:  # each attempt's commit is kept on the remote, whichever host made it
        assert f"refs/supervisor/wf1/attempts/implement/{cid}/step" in audit, audit
    with Store(repo / ".supervisor" / "state.db") as store:
        log_events = store.events(1)
    ran = {e.payload["component"]: e.payload for e in log_events if e.type == "component_ran"}
    merged = {e.payload["component"] for e in log_events if e.type == "component_merged"}
    assert set(ran) == merged == set(PARTS)
    # The components ran on more than one worker process, in more than one clone.
    assert len({p["worker"] for p in ran.values()}) >= 2, ran
    assert len({p["clone"] for p in ran.values()}) >= 2, ran
    assert {p["clone"] for p in ran.values()} <= {str(h) for h in hosts}
    # The component cut short on host A ran again elsewhere.
    assert ran[lost]["clone"] != str(hosts[0])
    with Store(repo / ".supervisor" / "state.db") as store:
        runs = [s["status"] for s in store.steps(1) if s["name"] == f"implement/{lost}"]
    assert runs == ["interrupted", "succeeded"]
    # The user's checkout: only the task branch start-task made, still at the base.
    after = git_out("-C", str(repo), "for-each-ref", "--format=%(refname) %(objectname)")
    made = set(after.splitlines()) - set(before.splitlines())
    assert made == {f"refs/heads/{done.task_branch} {done.base_sha}"}


def building_on(repo: Path, host: Path, log: Path, timeout: float = 180) -> str:
    """The first component a worker runs in `host`'s clone, once its worker step runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with Store(repo / ".supervisor" / "state.db") as store:
            here = [
                e.payload["component"]
                for e in store.events(1)
                if e.type == "component_ran" and e.payload["clone"] == str(host)
            ]
            running = {s["name"] for s in store.running_steps(1)}
        for cid in here:
            if f"implement/{cid}" in running:
                return cid
        time.sleep(0.3)
    raise AssertionError(f"no component ran in {host}: {log.read_text()[-3000:]}")
