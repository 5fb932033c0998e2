"""Running workers and gates in Docker containers (the Docker SDK against a real engine).

Every container: only its worktree mounted read-write, a non-root user, a read-only root file
system (a gate's is a throw-away copy-on-write layer instead), tmpfs /tmp, memory and CPU limits,
and labels naming the repository and workflow so that a container orphaned by a crash is found
and removed on the next start or resume. Gates get no network at all; nor do workers, which
reach their model API through their run's socket (`model_relay.py`), but under gVisor, where they
join the internal egress network (`egress.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from supervisor.core.errors import CommandTimeoutError, SandboxError, SupervisorError, Terminated
from supervisor.core.parsing import strip_ansi
from supervisor.sandbox import engine_loss, model_relay, node_modules, reach, run_files, runtime
from supervisor.sandbox.container_ops import (
    OverlayMountError,
    _kill,
    _remove_volume,
    _stream,
    _wait_exit,
    remove_labelled,
    started_at,
    workspace_volume,
)
from supervisor.sandbox.container_ops import remove_container as remove_container
from supervisor.sandbox.egress import EgressRelay, Route, ensure_network
from supervisor.sandbox.idle import RECHECK, idle_limit, last_activity
from supervisor.sandbox.labels import LABEL_LOWER as LABEL_LOWER
from supervisor.sandbox.labels import LABEL_PROBE as LABEL_PROBE
from supervisor.sandbox.labels import LABEL_REPO as LABEL_REPO
from supervisor.sandbox.labels import LABEL_STEP as LABEL_STEP
from supervisor.sandbox.labels import LABEL_STEP_ID as LABEL_STEP_ID
from supervisor.sandbox.labels import LABEL_WORKFLOW as LABEL_WORKFLOW
from supervisor.sandbox.labels import LABEL_WORKSPACE as LABEL_WORKSPACE
from supervisor.sandbox.labels import RUN_PREFIX as RUN_PREFIX
from supervisor.sandbox.reach import connect as connect
from supervisor.sandbox.run_folders import probe_run_dir_owners as probe_run_dir_owners
from supervisor.sandbox.run_folders import record_dir_path as record_dir_path
from supervisor.sandbox.run_folders import remove_stale_run_dirs as remove_stale_run_dirs
from supervisor.sandbox.run_folders import run_dir_label as run_dir_label
from supervisor.sandbox.run_spec import ENTRYPOINT as ENTRYPOINT
from supervisor.sandbox.run_spec import HOME as HOME
from supervisor.sandbox.run_spec import LOOPBACK_HOSTS as LOOPBACK_HOSTS
from supervisor.sandbox.run_spec import RUN_DIR as RUN_DIR
from supervisor.sandbox.run_spec import WORKSPACE as WORKSPACE
from supervisor.sandbox.run_spec import RunResult as RunResult
from supervisor.sandbox.run_spec import RunSpec as RunSpec
from supervisor.sandbox.run_spec import folder_files as folder_files
from supervisor.sandbox.run_spec import repo_label as repo_label
from supervisor.workspace import overlay

if TYPE_CHECKING:
    from collections.abc import Callable

    import docker

    from supervisor.guard.placeholders import Injection


class DockerSandbox:
    mounts_overlay = True
    """Step workspaces may be copy-on-write views (supervisor/workspace/overlay.py), mounted as
    volumes."""
    records_model_exchanges = True
    """Every worker run's model exchanges are recorded by the credential proxy, outside the
    container: a run that claims an answer without a record is refused (witnessing.py)."""

    def __init__(
        self,
        image: str,
        egress_network: str,
        client: docker.DockerClient | None = None,
        *,
        runtime: str = "runc",
        worker_runtime: str = "runc",
        worker_network: bool | None = None,
    ):
        self.image = image
        self.egress_network = egress_network
        self.client = client or connect()
        # The engine's OCI runtime for containers without network (gates, checks, probes) and
        # for workers: gVisor (`runsc`) puts a user-space kernel between them and the host's.
        self.runtime = runtime
        self.worker_runtime = worker_runtime
        # Workers reach their model API over the egress network, or (the default but under
        # gVisor) through a Unix socket with no network at all (model_relay.py).
        self.worker_network = (
            not model_relay.uses_socket(worker_runtime)
            if worker_network is None
            else worker_network
        )
        self._relay: EgressRelay | None = None
        self._relay_lock = threading.Lock()  # parallel steps open their first routes at once
        # Worker containers a killed supervisor left running, by step id (see adopt.py): found
        # by `resume`, then taken over by the engine's worker step.
        self.adoptable: dict[int, Any] = {}
        self.adopting: dict[int, Any] = {}
        self.say: Callable[[str], None] = engine_loss.say_on_stderr  # the engine's loss, waited

    def check_image(self) -> None:
        import docker.errors

        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound as e:
            raise SandboxError(
                f"The sandbox image '{self.image}' is not built.",
                reach.build_hint(),
            ) from e

    def base_image_id(self) -> str:
        return str(self.client.images.get(self.image).id)

    def route(
        self,
        base_url: str,
        injection: Injection | None = None,
        port: int | None = None,
        *,
        placeholder: str | None = None,
        vendor: str | None = None,
        record_dir: Path | None = None,
        task: str | None = None,
    ) -> Route:
        """Open one run's allowlisted path to its model API (a listener of the proxy daemon);
        the proxy adds the real credential (`injection`), which never enters a container.
        `port`/`placeholder`: those an adopted container was given (see EgressRelay.route)."""
        with self._relay_lock:
            if self._relay is None:
                network = (
                    ensure_network(self.client, self.egress_network)
                    if self.worker_network
                    else None
                )
                self._relay = EgressRelay(network)
            relay = self._relay
        return relay.route(
            base_url,
            injection,
            port,
            placeholder=placeholder,
            vendor=vendor,
            record_dir=record_dir,
            task=task,
        )

    def _close_orphaned_routes(self, task: str) -> None:
        """The proxy daemon's routes of this task whose supervisor died and whose container is
        not being adopted: their listeners and firewall rules go now, not after their grace."""
        from supervisor.sandbox.proxy_client import ProxyClient

        keep = {a.placeholder for a in self.adoptable.values() if a.placeholder}
        client = ProxyClient.running()
        if client is None:
            return
        try:
            with contextlib.suppress(SupervisorError, OSError):
                client.close_orphans(task, keep)
        finally:
            client.close()

    def close_route(self, route: Route) -> None:
        with self._relay_lock:
            relay = self._relay
        if relay is not None:
            relay.close_route(route)

    def leave_route(self, route: Route) -> None:
        """See EgressRelay.leave_route."""
        with self._relay_lock:
            relay = self._relay
        if relay is not None:
            relay.leave_route(route)

    def close(self) -> None:
        with self._relay_lock:
            relay, self._relay = self._relay, None
        if relay is not None:
            relay.close()

    def run(self, spec: RunSpec) -> RunResult:
        """One run; lost with the Docker engine, it runs again once the engine is back (a
        gate's) or raises RunLost (a worker's): engine_loss.py."""
        return engine_loss.rerunning(self._run_once, spec, self.client, self.say)

    def _run_once(self, spec: RunSpec) -> RunResult:
        """The run's folder goes with the run, but for a step's worker left running by a stop
        (`Terminated`): its container still reads its home there, and `resume` adopts both."""
        label = run_dir_label(spec.labels)
        run_path = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{label}-"))
        left = False
        try:
            (run_path / "stdin").write_text(spec.stdin_text, encoding="utf-8")
            for name, text in folder_files(spec).items():
                (run_path / name).write_text(text, encoding="utf-8")
            run_files.private_for_container(run_path)
            run_files.write_private_home(run_path / "home", spec.home_files)
            view = overlay.view_for(spec.worktree)
            if view is not None and view.mode == "overlay":
                try:
                    return self._run(spec, run_path, view)
                except OverlayMountError as e:
                    view.fall_back(e.reason)  # the whole tree, written the old way
            if view is not None:
                spec = dataclasses.replace(spec, worktree=view.tree)
            run_files.own_for_container(spec.worktree)
            return self._run(spec, run_path)
        except Terminated:
            left = spec.keep
            raise
        finally:
            if not left:
                shutil.rmtree(run_path, ignore_errors=True)

    def _workspace(
        self, spec: RunSpec, view: overlay.View | None
    ) -> tuple[dict[str, dict[str, str]], list[Any], Any]:
        """The workspace's mounts: the worktree bound, or a copy-on-write view as an overlay
        volume (its upper layer the worker's, its base never written), with the volume."""
        import docker.errors
        import docker.types

        if view is None:
            binds = {
                str(spec.worktree): {"bind": WORKSPACE, "mode": "rw"},
                **run_files.git_file_read_only(spec.worktree),
            }
            return binds, [], None
        try:
            volume = self.client.volumes.create(
                name=f"supervisor-ws-{os.urandom(8).hex()}",
                driver="local",
                driver_opts={"type": "overlay", "device": "overlay", "o": view.mount_options()},
                labels=spec.labels,
            )
        except docker.errors.APIError as e:
            raise OverlayMountError(f"Docker refused the overlay volume: {e}") from e
        mount = docker.types.Mount(WORKSPACE, volume.name, type="volume", no_copy=True)
        return {str(view.dot_git): {"bind": f"{WORKSPACE}/.git", "mode": "ro"}}, [mount], volume

    def _run(self, spec: RunSpec, run_path: Path, view: overlay.View | None = None) -> RunResult:
        started = time.monotonic()
        container, volume = self.create(spec, run_path, view)
        if spec.on_start is not None:
            try:
                spec.on_start(cast(str, container.id))
            except BaseException:
                remove_container(container)
                _remove_volume(volume)
                raise
        return self._finish(container, spec, started, start=True, volume=volume)

    def create(
        self,
        spec: RunSpec,
        run_path: Path,
        view: overlay.View | None = None,
        entrypoint: str = ENTRYPOINT,
        cpu_shares: int | None = None,
    ) -> tuple[Any, Any]:
        """The run's container, created (not started), and its overlay volume if any; a
        prepared run (sandbox/warm.py) gives the entrypoint that takes its prompt late."""
        import docker.errors

        if view is not None:
            view_labels = {LABEL_WORKSPACE: "overlay", LABEL_LOWER: view.base.commit}
            spec = dataclasses.replace(spec, labels={**spec.labels, **view_labels})
        binds, mounts, volume = self._workspace(spec, view)
        mounts += node_modules.mounts(self.client, spec.image)  # the image's, over the tree's
        masks, masked_dirs = run_files.cli_config_masks(spec.argv, spec.worktree, view, run_path)
        binds.update(masks)
        if spec.home_dir is not None:
            binds[str(spec.home_dir)] = {"bind": HOME, "mode": "rw"}
        route = spec.route
        by_socket = route is not None and bool(route.socket_dir)
        gate = route is None and spec.network == "none"
        networkless = gate or by_socket
        if networkless:
            hosts = run_path / "hosts"
            alias = f"127.0.0.1\t{route.alias}\n" if route is not None and by_socket else ""
            hosts.write_text(LOOPBACK_HOSTS + alias, encoding="utf-8")
            hosts.chmod(0o644)
            binds[str(hosts)] = {"bind": "/etc/hosts", "mode": "ro"}
        if route is not None and by_socket:
            binds[route.socket_dir] = {"bind": model_relay.CONTAINER_DIR, "mode": "ro"}
        extra_hosts = {route.alias: route.gateway} if route is not None and not by_socket else None
        try:
            container = self.client.containers.create(
                spec.image or self.image,
                command=["sh", "-c", entrypoint, "sh", *spec.argv],
                working_dir=WORKSPACE,
                user=run_files.container_user(),
                environment={"HOME": HOME, "PYTHONDONTWRITEBYTECODE": "1", **spec.env},
                volumes={**binds, str(run_path): {"bind": RUN_DIR, "mode": "ro"}},
                mounts=mounts or None,
                runtime=self.runtime if gate else self.worker_runtime,
                network_mode="none" if networkless else None,
                network_disabled=networkless,
                network=None if networkless else spec.network,
                extra_hosts=extra_hosts,
                read_only=not spec.writable_layer,
                tmpfs={"/tmp": "rw,exec,nosuid,size=1g", **masked_dirs},
                mem_limit=spec.memory,
                nano_cpus=int(spec.cpus * 1e9),
                cpu_shares=cpu_shares,
                pids_limit=512,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                labels=spec.labels,
                stdin_open=False,
                tty=False,
            )
        except docker.errors.ImageNotFound as e:
            _remove_volume(volume)
            raise SandboxError(
                f"The sandbox image '{self.image}' is not built.",
                reach.build_hint(),
            ) from e
        except docker.errors.APIError as e:
            _remove_volume(volume)
            if "unknown runtime" in str(e.explanation or e).lower():
                raise runtime.missing(str(e.explanation or e)) from e
            raise SandboxError(
                f"Docker refused to create the container: {e.explanation or e}",
                "Check `docker info` and the sandbox settings in .supervisor/config.yaml.",
            ) from e
        return container, volume

    def adopt(self, container_id: str, spec: RunSpec) -> RunResult:
        """Take over a container a killed supervisor left (see adopt.py): wait for it within
        `spec.timeout` counted from its own start, then read it as if this process had run it."""
        import docker.errors

        try:
            container = self.client.containers.get(container_id)
        except docker.errors.NotFound:
            return RunResult(-1, "", "The adopted container is gone.", 0.0, container_id)
        began = started_at(container.attrs)
        elapsed = 0.0 if began is None else max(0.0, time.time() - began)
        volume = workspace_volume(self.client, container)
        return self._finish(container, spec, time.monotonic() - elapsed, start=False, volume=volume)

    def remove_run(self, container_id: str) -> None:
        """A kept run's container (`RunSpec.keep`) and its overlay volume, once its step's end
        is recorded."""
        import docker.errors

        try:
            container = self.client.containers.get(container_id)
        except docker.errors.APIError:  # NotFound included: gone already
            return
        volume = workspace_volume(self.client, container)
        remove_container(container)
        _remove_volume(volume)

    def finish_prepared(self, container: Any, spec: RunSpec, volume: Any) -> RunResult:
        """A prepared run (sandbox/warm.py), its prompt just given (and its container named to
        its step: `spec.on_start` was called then): waited for, read and removed like any run,
        its limits counted from now."""
        started = time.monotonic()
        return self._finish(container, spec, started, start=False, volume=volume, whole_log=True)

    def _finish(
        self,
        container: Any,
        spec: RunSpec,
        started: float,
        *,
        start: bool,
        volume: Any = None,
        whole_log: bool = False,
    ) -> RunResult:
        import docker.errors

        try:
            if start:
                try:
                    container.start()
                except docker.errors.APIError as e:
                    if volume is None:
                        raise
                    raise OverlayMountError(f"the overlay could not be mounted: {e}") from e
            # An adopted container's output so far was shown by the run that started it.
            since = None if start or whole_log else time.time()
            exit_code = self._wait(container, spec, started, since=since)
            stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
            stderr = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        except Terminated:
            if not spec.keep:  # a step's worker: left running for `resume` to adopt
                remove_container(container)
                _remove_volume(volume)
            raise
        except BaseException as e:
            if engine_loss.lost(e):  # waited for; then waited on, read, or said lost
                if engine_loss.after_loss(container, self.say, e) != "lost":
                    return self._finish(container, spec, started, start=False, volume=volume)
                remove_container(container)
                _remove_volume(volume)
                raise engine_loss.lost_run(spec, e) from e
            if not engine_loss.gave_up(e):  # else left as it is, for `resume`
                remove_container(container)
                _remove_volume(volume)
            raise
        if not spec.keep:
            remove_container(container)
            _remove_volume(volume)
        return RunResult(
            exit_code=exit_code,
            stdout=strip_ansi(stdout),
            stderr=strip_ansi(stderr),
            duration=time.monotonic() - started,
            container_id=cast(str, container.id),
        )

    def _wait(
        self, container: Any, spec: RunSpec, started: float, since: float | None = None
    ) -> int:
        """Stream output while waiting; end the container at the time or idle limit. The engine
        tells when the container exits (`container.wait()`, one blocking request, bounded by the
        nearer limit); no polling."""
        last_output = [time.monotonic()]
        streamer = threading.Thread(
            target=_stream, args=(container, spec.on_output, last_output, since), daemon=True
        )
        streamer.start()
        while True:
            limit = started + spec.timeout
            last = last_activity(last_output[0], spec.record_dir)
            idle = idle_limit(spec)
            if idle is not None:
                limit = min(limit, last + idle)
            wait = max(limit - time.monotonic(), 0.0)
            if spec.record_dir is not None:
                wait = min(wait, RECHECK)  # the start-up ends, or the stream moves, meanwhile
            exited = _wait_exit(container, wait + 0.05)
            if exited is not None:
                streamer.join(timeout=5)
                container.reload()
                if container.attrs.get("State", {}).get("OOMKilled"):
                    raise SandboxError(
                        f"The container ran out of memory (limit {spec.memory}).",
                        "Raise worker_memory/gate_memory under limits: in the config.",
                    )
                return exited
            now = time.monotonic()
            if now - started > spec.timeout:
                _kill(container)
                raise CommandTimeoutError(
                    f"The container ran past its time limit of {spec.timeout:.0f} s and was ended.",
                    "Raise step_timeout_seconds/gate_timeout_seconds under limits:, or split "
                    "the step.",
                )
            quiet = now - last_activity(last_output[0], spec.record_dir)
            idle = idle_limit(spec)
            if idle is not None and quiet > idle:
                _kill(container)
                if idle != spec.idle_timeout:
                    raise CommandTimeoutError(
                        f"The worker printed nothing and sent no model request in its first "
                        f"{idle:.0f} s, and was ended as hung.",
                        "Check that the CLI starts in the sandbox image (`supervisor doctor`).",
                    )
                streamed = ", nor did its model stream," if spec.record_dir else ""
                raise CommandTimeoutError(
                    f"The worker printed nothing for {spec.idle_timeout:.0f} s{streamed} and "
                    "was ended as hung.",
                    "Raise idle_timeout_seconds under limits: if the CLI is just slow.",
                )

    def remove_stale(self, labels: dict[str, str], *, run_dirs: bool = True) -> list[str]:
        """Remove containers (and overlay volumes) left by a crashed run (matched by labels),
        and their run folders: with a workflow label, only that task's (other tasks may be
        running meanwhile); but for those kept for adoption (`adoptable`) and their run folders.
        A run folder is named for its task, not its step: `run_dirs=False` when other steps of
        the task may be running (the task's next clean-up removes it)."""
        kept = {a.container_id for a in self.adoptable.values()}
        kept_steps = {str(step_id) for step_id in self.adoptable}
        removed = remove_labelled(self.client, labels, kept, kept_steps)
        if LABEL_REPO in labels and run_dirs:
            keep = {a.run_dir for a in self.adoptable.values() if a.run_dir}
            label = f"{RUN_PREFIX}{run_dir_label(labels)}"
            keep |= {record_dir_path(label, step_id) for step_id in self.adoptable}
            keep |= {a.record_dir for a in self.adoptable.values() if a.record_dir}
            remove_stale_run_dirs(run_dir_label(labels), keep)
        if LABEL_WORKFLOW in labels:
            self._close_orphaned_routes(run_dir_label(labels))
        return removed
