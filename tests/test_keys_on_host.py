"""Keys stay on the host, with the real CLIs in the real sandbox against the scripted API.

The scripted API here demands the real key (a request without it is a 401, as from the vendor's
API); the key is in the supervisor's environment only. Each CLI's worker prints its environment
through its shell tool, so the output goes to the model in the next request: the API must see the
placeholder there, never the key, while every request still carried the key in its auth header.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from typing import TYPE_CHECKING, Any

import pytest
from e2e_support import GOOD_CALC, IMAGE, implementer, new_repo, require_sandbox, reviewer
from e2e_support import write_workflow as use_workflow

from supervisor.core.errors import CredentialsError, SandboxError
from supervisor.lifecycle import tasks
from supervisor.sandbox.docker import LABEL_REPO, DockerSandbox, RunSpec, repo_label
from supervisor.sandbox.model_relay import CONTAINER_DIR

PLACEHOLDER = r"sk-supervisor-[0-9a-f]{32}"  # each run its own

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from supervisor.fakeapi import ScriptedModelServer

pytestmark = pytest.mark.docker
REAL = {
    "claude": ("ANTHROPIC_API_KEY", "sk-ant-api03-REALKEYNEVERINSANDBOX-claude"),
    "codex": ("OPENAI_API_KEY", "sk-proj-REALKEYNEVERINSANDBOX-codex"),
    "gemini": ("GEMINI_API_KEY", "AIzaSyREALKEYNEVERINSANDBOX-gemini"),
}
WORKFLOW = (
    "workflow:\n  initial_step: implement\n  steps:\n"
    "    implement: {role: implementer, next: review, max_retries: 1}\n"
    "    review: {role: reviewer, next: commit, max_retries: 1}\n"
    "    commit: {action: commit}\n"
)
SHOW_ENV = "env; tr '\\0' '\\n' < /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def keyed_server(serve: Any, key: str, *conversations: dict[str, Any]) -> ScriptedModelServer:
    server = serve(*conversations)
    server.api_key = key
    return server


def repo_for(tmp_path: Path, server: ScriptedModelServer) -> Path:
    extra = f"  codex: {{base_url: '{server.url}/v1'}}\n  gemini: {{base_url: '{server.url}'}}\n"
    repo = new_repo(tmp_path, server.url, extra)
    use_workflow(repo, WORKFLOW)
    return repo


class ContainerEnvs:
    """Records the environment `docker inspect` shows for the repository's worker containers."""

    def __init__(self, repo: Path) -> None:
        self.label = f"{LABEL_REPO}={repo_label(repo)}"
        self.envs: dict[str, list[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import docker

        client = docker.from_env(timeout=30)
        while not self._stop.wait(0.2):
            try:
                for container in client.containers.list(filters={"label": self.label}):
                    if not is_worker(container.attrs):
                        continue  # a gate: no route to a model, no key of any kind
                    self.envs[container.id] = container.attrs["Config"]["Env"]
            except docker.errors.DockerException:
                continue

    def stop(self) -> dict[str, list[str]]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.envs


def is_worker(attrs: dict[str, Any]) -> bool:
    """A worker has its model route: its run's socket bound in, or the workers' network."""
    mounts = {m.get("Destination") for m in attrs.get("Mounts") or []}
    return CONTAINER_DIR in mounts or attrs["HostConfig"]["NetworkMode"] != "none"


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini"])
def test_a_worker_that_prints_its_environment_has_no_key_to_leak(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch, cli: str
) -> None:
    variable, key = REAL[cli]
    monkeypatch.setenv(variable, key)
    snoop = implementer(GOOD_CALC, delay=1.0)  # the delay: time to `docker inspect` the worker
    snoop["turns"].insert(0, {"tool_use": {"name": "Bash", "input": {"command": SHOW_ENV}}})
    server = keyed_server(serve, key, snoop, reviewer())
    repo = repo_for(tmp_path, server)
    watcher = ContainerEnvs(repo)
    try:
        wf = tasks.start_task("Implement add and multiply", repo, cli=cli)
    finally:
        envs = watcher.stop()
    assert wf.status == "completed"

    requests = server.requests
    assert requests and all(r.key_ok for r in requests)  # every request had the real key
    bodies = [json.dumps(r.body) for r in requests]
    assert not any(key in body for body in bodies)
    # The shell tool's output went to the model: it holds the placeholder in the key's place.
    assert any(re.search(f"{variable}={PLACEHOLDER}", body) for body in bodies)

    assert envs, "no worker container was seen running"
    for env in envs.values():
        assert any(re.fullmatch(f"{variable}={PLACEHOLDER}", entry) for entry in env)
        assert not any(key in entry for entry in env)


def test_a_key_the_api_rejects_stops_at_once_with_the_fix(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-revoked")
    server = keyed_server(serve, REAL["claude"][1], implementer(GOOD_CALC), reviewer())
    repo = repo_for(tmp_path, server)
    with pytest.raises(CredentialsError) as info:
        tasks.start_task("Implement add and multiply", repo, cli="claude")
    assert "ANTHROPIC_API_KEY" in info.value.hint
    assert server.requests and not any(r.key_ok for r in server.requests)
    with tasks.reading(repo) as store:
        wf = store.workflows()[0]
        assert wf.status == "failed" and store.count_steps(wf.id) == 1


def test_an_unreachable_base_url_stops_with_the_host_named(tmp_path: Path, serve: Any) -> None:
    server = serve()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    repo = new_repo(tmp_path, f"http://127.0.0.1:{closed}")
    use_workflow(repo, WORKFLOW)
    with pytest.raises(SandboxError) as info:
        tasks.start_task("Implement add and multiply", repo, cli="claude")
    assert f"127.0.0.1:{closed} is unreachable" in info.value.message
    assert "base_url" in info.value.hint
    assert server.requests == []


@pytest.fixture
def sandbox() -> Iterator[DockerSandbox]:
    box = DockerSandbox(IMAGE, "supervisor-egress-test")
    yield box
    box.close()


def test_login_files_are_read_only_private_and_outside_the_worktree(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    script = (
        "stat -c 'seed %a %u' /run/supervisor/home/.claude/.credentials.json; "
        "stat -c 'dir %a %u' /run/supervisor/home/.claude; "
        'stat -c "copy %a %u" "$HOME/.claude/.credentials.json"; id -u; '
        "echo x >> /run/supervisor/home/.claude/.credentials.json 2>/dev/null || echo seed-ro; "
        "ls -A /workspace"
    )
    result = sandbox.run(
        RunSpec(
            argv=["sh", "-c", script],
            worktree=worktree,
            home_files={".claude/.credentials.json": b'{"oauth": "token"}'},
        )
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.split("\n")
    uid = lines[3]
    assert lines[0] == f"seed 400 {uid}"  # the container user's own, nobody else's
    assert lines[1] == f"dir 700 {uid}"
    assert lines[2] == f"copy 600 {uid}"
    assert lines[4] == "seed-ro"
    assert lines[5:] == [""]  # nothing in the worktree
