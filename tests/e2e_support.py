"""Shared pieces for tests that drive the real pipeline: real parts or a loud absence."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest

from supervisor.guard.trust import trust
from supervisor.lifecycle.demo import (
    fenced,
    implementation,
    make_demo_repo,
    read_turn,
    write_project_config,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

IMAGE = "supervisor-sandbox:latest"


def must_have_real_parts() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("SUPERVISOR_REQUIRE_REAL_PARTS") == "1"


def missing(reason: str) -> None:
    """Skip locally; under CI a missing real part is a failure, never a silent skip."""
    if must_have_real_parts():
        pytest.fail(f"real part missing under CI: {reason}")
    pytest.skip(reason)


def require_sandbox() -> None:
    try:
        import docker

        client = docker.from_env(timeout=60)  # a busy engine answers late, not never
        client.ping()
    except Exception as e:  # any failure to reach the engine means: no real Docker here
        missing(f"Docker engine not reachable: {e}")
        return
    try:
        client.images.get(IMAGE)
    except Exception:
        missing(f"sandbox image {IMAGE} not built (run scripts/setup.sh)")
    if shutil.which("git") is None:
        missing("git not installed")


CLI = os.environ.get("SUPERVISOR_TEST_CLI", "codex")
"""The CLI of the pipeline specs, where which CLI runs is not what they specify: codex starts up
on about a fifth of claude's CPU (0.3 against 1.5 CPU-s a run, benchmarks/cli_start.py), and the
suite is bound by the CPU of the 2-core machine (benchmarks/test-durations.md). Each CLI's own
behaviour has its specs (test_workers_contract.py, test_cli_project_config_e2e.py, the claude
hook attacks), and the demo and the wheel's spec run the default, claude.
`SUPERVISOR_TEST_CLI=claude` (or gemini) runs them on another."""
API_PATH = {"codex": "/v1"}  # where each CLI finds its model API on the scripted server


def pointed_at(config: str, base_url: str, cli: str = CLI) -> str:
    """A project config (`config`, with no `cli:` or `clis:` of its own) whose roles run `cli`
    against the scripted API at `base_url`."""
    url = base_url + API_PATH.get(cli, "")
    return f"cli: {cli}\n{config}clis:\n  {cli}: {{base_url: '{url}'}}\n"


def write_config(repo: Path, base_url: str, cli: str = CLI) -> None:
    """The demo's project config (supervisor.lifecycle.demo), its roles run by `cli` against the
    scripted API at `base_url`; the `clis` mapping stays last, for what a spec appends to it."""
    write_project_config(repo, base_url)
    if cli != "claude":  # the demo's default
        config = repo / ".supervisor" / "config.yaml"
        url = base_url + API_PATH.get(cli, "")
        config.write_text(f"cli: {cli}\n{config.read_text()}  {cli}:\n    base_url: {url}\n")
        trust(repo)


def new_repo(tmp_path: Path, base_url: str, extra_config: str = "", cli: str = CLI) -> Path:
    """A demo repository whose config points the CLIs at the scripted API (`cli` runs the roles
    that name none), trusted by the test's own user directory (as the user would with
    `supervisor trust`)."""
    repo = make_demo_repo(tmp_path / "repo")
    write_config(repo, base_url, cli)
    if extra_config:
        with (repo / ".supervisor" / "config.yaml").open("a") as handle:
            handle.write(extra_config)
    trust(repo)
    return repo


def opening_prompts(server: Any, marker: str = "") -> list[str]:
    """The opening prompt of every conversation holding `marker` (a retried step's too), in
    whichever CLI's format it came."""
    return [r.opening for r in server.requests if r.opening and marker in r.opening]


def write_workflow(repo: Path, yaml_text: str) -> None:
    (repo / ".supervisor" / "workflow.yaml").write_text(yaml_text)


PLAN_APPROVAL = (
    "workflow:\n  initial_step: plan\n  steps:\n"
    "    plan: {role: planner, next: implement, human_approval: true}\n"
    "    implement: {role: implementer, next: test}\n"
    "    test: {gate: test, next: review, on_fail: implement}\n"
    "    review: {role: reviewer, next: commit, on_reject: implement}\n"
    "    commit: {action: commit}\n"
)
"""The pipeline with a person's approval of the plan: the faces' specs (TUI, web) approve it."""


GOOD_CALC = """def add(a, b):
    return a + b


def multiply(a, b):
    return a * b
"""

BAD_CALC = GOOD_CALC.replace("a * b", "a + b")

PLAN_TEXT = "Plan:\n" + fenced(
    {
        "status": "COMPLETE",
        "phases": [{"id": "p1", "description": "calc", "components": []}],
        "estimated_components": 1,
    }
)

APPROVED = "LGTM\n" + fenced({"status": "APPROVED", "summary": "fine", "issues": []})


def planner(text: str = PLAN_TEXT, when: str = "ROLE: planner") -> dict[str, Any]:
    return {"when": when, "turns": [{"text": text}]}


def implementer(
    content: str,
    when: str = "ROLE: implementer",
    delay: float = 0.0,
    after: Path | None = None,
) -> dict[str, Any]:
    """`after`: its first answer waits until that file exists (see `released_on_adoption`)."""
    first: dict[str, Any] = {"delay": delay, **read_turn("calc.py")}
    if after is not None:
        first["after"] = str(after)
    return {
        "when": when,
        "turns": [
            first,
            {
                "tool_use": {
                    "name": "Write",
                    "input": {"file_path": "calc.py", "content": content},
                },
            },
            {"text": "Done.\n" + fenced(implementation("calc"))},
        ],
    }


def reviewer(text: str = APPROVED, when: str = "ROLE: reviewer") -> dict[str, Any]:
    return {"when": when, "turns": [{"text": text}]}


def writes(when: str, path: str, content: str, read: bool = False) -> dict[str, Any]:
    """A worker that writes one file (reading it first when it exists: `read`) and says so."""
    turns: list[dict[str, Any]] = []
    if read:
        turns.append({"tool_use": {"name": "Read", "input": {"file_path": path}}})
    turns.append({"tool_use": {"name": "Write", "input": {"file_path": path, "content": content}}})
    key = "files_modified" if read else "files_created"
    report = {"status": "SUCCESS", "summary": f"wrote {path}", key: [path]}
    turns.append({"text": "Done.\n" + fenced(report)})
    return {"when": when, "turns": turns}


@contextlib.contextmanager
def released_on_adoption(repo: Path, release: Path, workflow_id: int) -> Iterator[None]:
    """Create `release` (an `after` file of the scripted API) once a resume has adopted the
    workflow's worker, or when the block ends: a worker killed with its supervisor has its
    answer in flight from the kill until after the adoption, whatever the machine's load, and
    no spec waits out a fixed delay for it."""
    from supervisor.lifecycle import tasks

    done = threading.Event()

    def release_when_adopted() -> None:
        while not done.wait(0.2):
            with tasks.reading(repo) as store:
                if any(e.type == "worker_adopted" for e in store.events(workflow_id)):
                    break
        release.touch()

    watcher = threading.Thread(target=release_when_adopted, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        release.touch()


def run_to_the_end(task: str, repo: Path) -> Any:
    """start-task, approving every approval the template asks for (what `--yes` answers)."""
    from supervisor.core.errors import ApprovalRequired
    from supervisor.lifecycle import tasks

    try:
        return tasks.start_task(task, repo)
    except ApprovalRequired:
        pass
    while True:
        wf = tasks.workflows(repo)[0]
        tasks.decide(wf.id, repo, approve=True)
        try:
            return tasks.resume(wf.id, repo)
        except ApprovalRequired:
            continue


BUILD_CACHE = "supervisor-test-build-cache"
"""Project images the specs built are kept under this name, one tag per content hash, before
their checkout's tag goes: Docker's classic builder reuses a layer only while an image still holds
it, and removing the last tag prunes the whole chain. A later run (a fresh clone, as CI makes)
then builds the same project from the cache: the Go and Cargo images took 67 and 83 s cold."""
BUILD_CACHE_KEPT = 16


def killed_at(kill_at: str, repo: Path, *command: str) -> subprocess.CompletedProcess[str]:
    """The command line run until it SIGKILLs itself at `kill_at` (supervisor/core/faults.py)."""
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *command, "--repo", str(repo)],
        env={**os.environ, "SUPERVISOR_KILL_AT": kill_at},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def remove_project_image(tag: str) -> None:
    """Remove one project image tag, keeping its layers in the build cache (BUILD_CACHE)."""
    import docker
    from docker.errors import APIError, ImageNotFound

    client = docker.from_env()
    with contextlib.suppress(ImageNotFound, APIError):
        found = client.api.inspect_image(tag)
        content = ((found.get("Config") or {}).get("Labels") or {}).get("supervisor.project-hash")
        if content and content.isalnum():
            client.api.tag(found["Id"], BUILD_CACHE, content[:64])
            _trim_build_cache(client)
        client.images.remove(tag, noprune=False)


def _trim_build_cache(client: Any) -> None:
    """The newest BUILD_CACHE_KEPT cache tags stay; older ones go (their layers with them)."""
    from docker.errors import APIError, ImageNotFound

    kept = sorted(
        client.api.images(name=BUILD_CACHE), key=lambda image: image["Created"], reverse=True
    )
    for image in kept[BUILD_CACHE_KEPT:]:
        for tag in image.get("RepoTags") or []:
            with contextlib.suppress(ImageNotFound, APIError):
                client.images.remove(tag, noprune=False)


def remove_project_images(under: Path | str) -> None:
    """Remove the project images built for checkouts under `under`, their layers kept in the
    build cache (remove_project_image). The low-level listing, not `images.list`, which looks up
    every image one by one and fails when another test process removes one of them meanwhile."""
    import docker

    client = docker.from_env()
    for found in client.api.images(filters={"label": "supervisor.project"}):
        labels = found.get("Labels") or {}
        if str(labels.get("supervisor.project", "")).startswith(str(under)):
            for tag in found.get("RepoTags") or []:
                remove_project_image(tag)


def remove_containers(*checkouts: Path) -> None:
    """Every container (and its workspace volume) the supervisors of these checkouts left: what a
    killed worker leaves goes with the next command on its host, and a spec runs none there."""
    import docker

    from supervisor.sandbox.docker import LABEL_REPO, repo_label

    client = docker.from_env()
    for checkout in checkouts:
        label = {"label": f"{LABEL_REPO}={repo_label(checkout)}"}
        for container in client.containers.list(all=True, filters=label):
            container.remove(force=True, v=True)
        for volume in client.volumes.list(filters=label):
            volume.remove(force=True)


CONNECT = """
import socket, sys
for target in sys.argv[1:]:
    host, port = target.rsplit(':', 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        print('OPEN', target)
    except OSError as e:
        print('BLOCKED', target, type(e).__name__)
"""
"""Run in a container (`python3 -c CONNECT host:port ...`): OPEN or BLOCKED for each target."""


@contextlib.contextmanager
def recording_api() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A model API on the host's loopback that answers every request with 200 "hello" and keeps
    each request's headers: what a worker's route delivered, and with which key."""
    import http.server
    import threading

    seen: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.do_POST()

        def do_POST(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
