"""`supervisor doctor`: is everything a task needs here, and if not, what to do about it.

Each check says what it found and, when it failed, the fix. A check is *required* when the
configured workflow needs it (the CLIs its roles run on); the others are informational.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from supervisor.core import process
from supervisor.core.config import Settings, WorkflowDef
from supervisor.core.errors import SupervisorError
from supervisor.core.resources import NODE_BIN
from supervisor.guard import credentials
from supervisor.workflow.loading import load_workflow

ALL_CLIS = ("claude", "codex", "gemini")
VERSION = re.compile(r"\d+\.\d+\.\d+")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    hint: str = ""
    required: bool = True
    warning: bool = False
    """It works, but something found needs a look (an engine affected by an advisory whose
    condition does not hold here): shown as a warning, never with a ✓."""


def clis_in_use(definition: WorkflowDef, settings: Settings, repo: Path | None) -> list[str]:
    """The CLIs the workflow's roles run on (a role's own `cli:` or the configured default),
    their fallbacks included: a fallback without its binary or credentials is found here, before
    a task starts, not when a failover needs it."""
    return list(
        dict.fromkeys(cli for clis in _role_clis(definition, settings, repo) for cli in clis)
    )


def fallbacks_in_use(definition: WorkflowDef, settings: Settings, repo: Path | None) -> list[str]:
    """The CLIs that some role uses only as a fallback (what `doctor` marks as such)."""
    preferred = {clis[0] for clis in _role_clis(definition, settings, repo)}
    return [c for c in clis_in_use(definition, settings, repo) if c not in preferred]


def _role_clis(definition: WorkflowDef, settings: Settings, repo: Path | None) -> list[list[str]]:
    from supervisor.context.roles import load_role

    found = []
    for step in definition.steps.values():
        for name in [step.role] if step.role else step.roles or []:
            found.append(load_role(name, repo).clis or [settings.cli])
    return found


_T = TypeVar("_T")
Progress = Callable[[str], None]
"""Told the name of each group of checks as it finishes (doctor's progress line)."""


DemoTest = Callable[[Path], bool]
"""Whether a repository is the demo's, its config still the demo's own (supervisor.lifecycle.demo, a
layer above, passes it in: `configured_by_demo`)."""


def diagnose(
    path: Path, progress: Progress | None = None, demo: DemoTest | None = None
) -> list[Check]:
    """Every check for the repository at `path`. A diagnostic must not refuse to run where a
    task would: a missing repository, a repository without commits or a broken configuration is
    one failed row, and the other checks still run (with the package defaults if need be)."""
    from pathlib import Path

    from supervisor.core.config import load_settings
    from supervisor.core.errors import RepoError
    from supervisor.workspace.host_git import _git, find_repo_root

    checks: list[Check] = []
    try:
        root: Path | None = find_repo_root(path)
        checks.append(Check("repository", True, str(root)))
    except RepoError as e:
        found = _git(path.resolve(), "rev-parse", "--show-toplevel", check=False)
        root = Path(found.stdout.strip()) if path.exists() and found.returncode == 0 else None
        checks.append(Check("repository", False, e.message, e.hint))
    unread: SupervisorError | None = None
    try:
        settings = load_settings(root)
    except SupervisorError as e:
        checks.append(Check("configuration", False, e.message, e.hint))
        settings, unread = load_settings(None), e
    in_demo = root is not None and demo is not None and demo(root)
    return [*checks, *run_checks(root, settings, progress, unread, in_demo)]


def run_checks(
    repo: Path | None,
    settings: Settings,
    progress: Progress | None = None,
    unread: SupervisorError | None = None,
    in_demo: bool = False,
) -> list[Check]:
    """The checks at once, in threads: most of doctor's time is waiting on subprocesses and the
    Docker engine (a container that asks each CLI its version), not on this process. The rows
    come back in the same order whatever finishes first."""
    from concurrent.futures import ThreadPoolExecutor

    def done(name: str, result: _T) -> _T:
        if progress is not None:
            progress(name)
        return result

    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="doctor") as pool:
        workflow = pool.submit(lambda: done("workflow", _workflow(repo, settings, unread)))
        git = pool.submit(lambda: done("git", _git()))
        repomix = pool.submit(lambda: done("repomix", _repomix()))
        docker = pool.submit(lambda: done("Docker", _docker_checks(settings)))
        (workflow_check, needed), (docker_checks, versions, has_engine) = (
            workflow.result(),
            docker.result(),
        )
        checks = [workflow_check, git.result(), repomix.result(), *docker_checks]
    for cli in ALL_CLIS:
        required = cli in needed
        if has_engine:
            version = versions.get(cli)
            checks.append(
                Check(
                    f"{cli} CLI (in the image)",
                    version is not None,
                    version or "not found in the sandbox image",
                    "Rebuild the image with scripts/setup.sh.",
                    required,
                )
            )
        checks.append(_auth(cli, settings, required, repo if in_demo else None))
    if repo is not None and has_engine:
        checks.extend(toolchain_checks(repo, settings))
    return checks


def toolchain_checks(repo: Path, settings: Settings) -> list[Check]:
    """The toolchains the project declares against its project Dockerfile: a named finding
    (the version, the file that asks, what the image gives) rather than a package manager's
    stack trace at the next build. No row for a project that declares none."""
    from supervisor.core import trustmap
    from supervisor.project.project_image import dependency_files
    from supervisor.project.toolchain_check import image_versions, mismatches
    from supervisor.project.toolchain_sources import resolve_files
    from supervisor.project.toolchains import declares_any

    dockerfile = repo / trustmap.DOCKERFILE
    try:
        files = dependency_files(repo)
        if not declares_any(files):
            return []
        base = image_versions(settings.sandbox.image)
        resolved = resolve_files(files, base)
    except SupervisorError as e:
        return [Check("project toolchains", False, e.message, e.hint)]
    if not resolved:
        return []
    found = (
        mismatches(dockerfile.read_text(errors="replace"), resolved, base)
        if (dockerfile.is_file())
        else []
    )
    detail = "; ".join(f"{r.tool} {r.version} ({r.provider})" for r in resolved)
    if found:
        return [
            Check(
                "project toolchains",
                False,
                "; ".join(found),
                "Re-run `supervisor init` (it rewrites the Dockerfile it wrote, unless you "
                "edited it), or install that version in .supervisor/sandbox/Dockerfile.",
            )
        ]
    return [Check("project toolchains", True, detail)]


def _workflow(
    repo: Path | None, settings: Settings, unread: SupervisorError | None = None
) -> tuple[Check, list[str]]:
    """The workflow's check, and the CLIs it needs (their rows are required, the others not).
    With the configuration `unread`, the workflow built from the package defaults in its place
    is not the person's: it once reported a gate command missing that the unreadable file set."""
    if unread is not None:
        return Check(
            "workflow",
            False,
            "not checked: it is built from the configuration, which could not be read (the "
            "configuration row says where)",
            "Fix the configuration first; `supervisor doctor` then checks the workflow.",
        ), [settings.cli]
    try:
        definition = load_workflow(repo, settings)
        needed = clis_in_use(definition, settings, repo)
        spare = fallbacks_in_use(definition, settings, repo)
        runs_on = ", ".join(f"{c} (fallback)" if c in spare else c for c in needed)
        return Check("workflow", True, f"valid; roles run on {runs_on}"), needed
    except SupervisorError as e:
        return Check("workflow", False, e.message, e.hint), [settings.cli]


def _docker_checks(settings: Settings) -> tuple[list[Check], dict[str, str | None], bool]:
    """The engine, its DNS verdict, the image (and the CLI versions in it), the runtimes: one
    after the other, since each needs the one before."""
    engine, client = _docker()
    checks = [engine]
    versions: dict[str, str | None] = {}
    if client is None:
        return checks, versions, False
    checks.append(_engine_dns(client))
    image, versions = _image(client, settings.sandbox.image)
    checks.append(image)
    if image.ok:
        checks.extend(runtime_checks(client, settings))
    return checks, versions, True


def _git() -> Check:
    try:
        out = process.run(["git", "--version"]).stdout.strip()
        return Check("git", True, out)
    except SupervisorError as e:
        return Check("git", False, e.message, e.hint)


def _repomix() -> Check:
    try:
        binary = process.find_program("repomix", [NODE_BIN])
        out = process.run([binary, "--version"], timeout=60).stdout.strip()
        return Check("repomix", True, f"{out} ({binary})")
    except SupervisorError as e:
        return Check("repomix", False, e.message, e.hint)


def _docker() -> tuple[Check, object | None]:
    from supervisor.sandbox.docker import connect

    try:
        client = connect()
        version = client.version().get("Version", "?")
        return Check("Docker engine", True, f"engine {version}"), client
    except SupervisorError as e:
        return Check("Docker engine", False, e.message, e.hint), None


def _engine_dns(client: object) -> Check:
    """Fails on an engine version known to leak DNS out of internal networks (see
    sandbox/engine_version.py for the advisory and the condition)."""
    from supervisor.sandbox.engine_version import dns_verdict

    version = client.version().get("Version", "?")  # type: ignore[attr-defined]
    verdict = dns_verdict(version)
    return Check("sandbox DNS", verdict.ok, verdict.detail, verdict.hint, warning=verdict.warning)


def _image(client: object, image: str) -> tuple[Check, dict[str, str | None]]:
    import docker.errors

    try:
        found = client.images.get(image)  # type: ignore[attr-defined]
    except docker.errors.ImageNotFound:
        return Check(
            "sandbox image",
            False,
            f"{image} is not built",
            "Run scripts/setup.sh (it builds the image, offline too).",
        ), {}
    size = found.attrs.get("Size", 0) / 1e6
    label = (found.labels or {}).get("supervisor.build-hash", "-")
    versions = remembered(versions_file(), found.id)
    if versions is None:
        versions = _probe(client, image)
        remember(versions_file(), found.id, versions)
    return Check("sandbox image", True, f"{image} ({size:.0f} MB, build {label})"), versions


def versions_file() -> Path:
    """Per user ($SUPERVISOR_USER_DIR moves it): a repository has no say in it."""
    from supervisor.core.config import user_dir

    return user_dir() / "cache" / "image-cli-versions.json"


def remembered(path: Path, image_id: str) -> dict[str, str | None] | None:
    """The CLI versions found before in the image with this id (its content hash: they cannot
    have changed), or None. A second `doctor` starts no container for them."""
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    found = known.get(image_id) if isinstance(known, dict) else None
    if not isinstance(found, dict) or not all(isinstance(v, str | None) for v in found.values()):
        return None
    return {str(k): v for k, v in found.items()}


def remember(path: Path, image_id: str, versions: dict[str, str | None]) -> None:
    """Keeps the last few images' versions; a cache that cannot be written only costs time."""
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known = {k: v for k, v in (known if isinstance(known, dict) else {}).items() if k != image_id}
    kept = dict(list(known.items())[-7:]) | {image_id: versions}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(kept, indent=1))
        partial.replace(path)
    except OSError:
        return


def _probe(client: object, image: str) -> dict[str, str | None]:
    from supervisor.sandbox.container_ops import probe_output

    # Each CLI takes seconds to print its version (Node starting): asked at once, not in turn.
    probe = (
        " ".join(f"(echo {c}=$({c} --version 2>/dev/null | tail -n 1)) &" for c in ALL_CLIS)
        + " wait"
    )
    output = probe_output(client, image, probe)
    versions: dict[str, str | None] = {}
    for line in output.splitlines():
        name, _, value = line.partition("=")
        match = VERSION.search(value)
        versions[name] = match.group(0) if match else None
    return versions


DEMO_CLI = "claude"
"""The CLI the demo's config points at its scripted model API (supervisor/lifecycle/demo.py)."""


def _auth(cli: str, settings: Settings, required: bool, demo: Path | None = None) -> Check:
    """`demo`: the demo's repository, when that is where doctor runs."""
    cli_settings = settings.clis.get(cli)
    if cli_settings is None:
        return Check(f"{cli} credentials", False, "no settings", "Add it under `clis:`.", required)
    if cli == DEMO_CLI and demo is not None:
        # The demo worked with no key: it set a placeholder in its own process, which a later
        # shell does not have. Reported as missing, a key the demo never needed read as broken.
        return Check(
            f"{cli} credentials",
            True,
            f"none needed: this is the demo's repository, and its config points {cli} at the "
            f"demo's scripted model API ({cli_settings.base_url}), which answers only while "
            f"`supervisor demo --keep {demo}` runs",
            "For tasks of your own, work in your own repository (here: delete "
            ".supervisor/config.yaml and set ANTHROPIC_API_KEY, or log in with `claude`).",
            required,
            warning=True,
        )
    try:
        found = credentials.collect(cli, cli_settings)
        how = (
            "the sandbox sees a placeholder"
            if found.injection.header
            else "copied read-only into each run"
        )
        detail = f"{found.source}: {found.mode} ({how})"
        return Check(f"{cli} credentials", True, detail, required=required)
    except SupervisorError as e:
        return Check(f"{cli} credentials", False, e.message, e.hint, required)


GVISOR_RUNTIMES = ("runsc", "runsc-net")


def runtime_checks(client: object, settings: Settings) -> list[Check]:
    """One row per configured container runtime: registered with the engine, and a trivial
    container ran under it (a registered gVisor can still fail to start on this kernel). With
    runc configured, one informational row says whether gVisor is there to choose."""
    import docker.errors

    from supervisor.sandbox.runtime import known as registered

    known = registered(client)  # type: ignore[arg-type]
    chosen = {
        settings.sandbox.runtime: "gates",
        settings.sandbox.worker_runtime: "workers",
    }
    if settings.sandbox.runtime == settings.sandbox.worker_runtime:
        chosen = {settings.sandbox.runtime: "gates and workers"}
    if set(chosen) == {"runc"}:
        gvisor = [r for r in GVISOR_RUNTIMES if r in known]
        detail = "runc for gates and workers; " + (
            f"gVisor registered as {', '.join(gvisor)} (sandbox.runtime: runsc to use it)"
            if gvisor
            else "gVisor not registered (optional: scripts/setup.sh registers it)"
        )
        return [Check("container runtime", True, detail, required=False)]
    checks = []
    for name, used_by in chosen.items():
        row = f"container runtime ({used_by})"
        if name not in known:
            checks.append(
                Check(
                    row,
                    False,
                    f"{name} is not registered with the Docker engine "
                    f"(it knows {', '.join(known)})",
                    "Run scripts/setup.sh (it installs gVisor and registers runsc and runsc-net "
                    "in /etc/docker/daemon.json), or set the runtime back to runc in "
                    "~/.supervisor/config.yaml.",
                )
            )
            continue
        try:
            output = client.containers.run(  # type: ignore[attr-defined]
                settings.sandbox.image,
                ["sh", "-c", "dmesg 2>/dev/null | head -n 1; head -n 1 /proc/version"],
                runtime=name,
                remove=True,
                network_mode="none",
                user="65534:65534",
                read_only=True,
            ).decode()
        except docker.errors.DockerException as e:
            checks.append(
                Check(
                    row,
                    False,
                    f"{name} is registered but a container did not run under it: {e}",
                    "Check the runtime's entry in /etc/docker/daemon.json (Debian's runsc needs "
                    "--network=none or --network=host on 6.x kernels; scripts/setup.sh "
                    "registers both) and the engine's log.",
                )
            )
            continue
        kernel = "gVisor" if "gVisor" in output else output.strip().splitlines()[-1][:60]
        checks.append(Check(row, True, f"{name}: a container ran ({kernel})"))
    return checks
