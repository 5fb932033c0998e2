"""The settings' schema: one pydantic model per section of the configuration, and `Settings`, the
whole of it.

Kept apart from their loading (supervisor/core/config.py) because they are read for two other
reasons: every wing that consults a setting types it with these models, and the configuration
reference (docs/configuration.md, scripts/docs_pages.py) is rendered from their fields and the
words written beside each one. Every model forbids unknown keys (StrictModel).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from supervisor.core.pool_settings import WorkerPoolSettings, WorkerSettings
from supervisor.core.projects import ProjectDef, ProjectDependency, ProjectMap
from supervisor.core.strict_model import StrictModel


class DecompositionLimits(StrictModel):
    """When a component is split into a sub-plan (supervisor/workflow/decompose.py)."""

    max_depth: int = Field(3, ge=0)
    """Levels of sub-plans below the plan's components; 0 turns decomposition off."""
    max_files: int = Field(12, ge=1)
    """A component planned over this many files is split before any worker starts on it."""
    max_estimated_lines: int = Field(800, ge=1)
    """... or over this many lines (the plan's `estimated_lines`)."""
    max_plan_attempts: int = Field(2, ge=1)
    """Sub-plans asked for one component before an invalid answer goes to a person."""


class Limits(StrictModel):
    step_timeout_seconds: float = Field(900, gt=0)
    idle_timeout_seconds: float = Field(300, gt=0)
    gate_timeout_seconds: float = Field(600, gt=0)
    worker_memory: str = "4g"
    worker_cpus: float = Field(2.0, gt=0)
    gate_memory: str = "2g"
    gate_cpus: float = Field(1.0, gt=0)
    max_prompt_bytes: int = Field(600_000, gt=0)
    max_worktree_mb: float = Field(200, gt=0)
    max_files_added: int = Field(2000, gt=0)
    max_parallel_components: int = Field(3, ge=1)
    prepare_ahead: int = Field(2, ge=0)
    """Worker steps prepared while the step before them runs (supervisor/workflow/lookahead.py):
    worktree, route, context pack, and for the likeliest its container with its CLI started;
    0: none."""
    prepare_containers: int | None = Field(None, ge=0)
    """Of those, how many get their container started ahead (a CLI's start-up, 2-5 s of CPU);
    None: the likeliest one, and more only while cores are idle for them."""
    component_scope: Literal["feedback", "replan", "allow"] = "feedback"
    """A component that changes another's files: sent back with feedback, the plan sent back to
    its planner, or allowed (see supervisor.workflow.ownership)."""
    decomposition: DecompositionLimits = Field(default_factory=DecompositionLimits)


class DepthSettings(StrictModel):
    """How deep a task goes (supervisor/workflow/depth.py): the analyzer's complexity score up to
    `simple_max` may take the simple path (no planner); from `researched_min` on, the task is
    researched before it is planned. Between them: planned (the fixed pipeline)."""

    simple_max: int = Field(3, ge=0, le=10)
    researched_min: int = Field(7, ge=1, le=11)
    """11: never researched automatically (`start-task --depth researched` still can)."""

    @model_validator(mode="after")
    def _ordered(self) -> DepthSettings:
        if self.simple_max >= self.researched_min:
            raise ValueError("`simple_max` must be below `researched_min`")
        return self


class AdaptiveWeights(StrictModel):
    """How much each figure counts in a CLI's score (normalised to sum 1; the plan's 0.7/0.3)."""

    success: float = Field(0.7, ge=0)
    cost: float = Field(0.3, ge=0)
    retries: float = Field(0.0, ge=0)
    time: float = Field(0.0, ge=0)


class AdaptiveSettings(StrictModel):
    """Choosing a role's CLI from recorded runs (supervisor/routing/adaptive.py)."""

    enabled: bool = True
    min_samples_before_adapt: int = Field(10, ge=1)
    """Runs of the role (all its CLIs together) in the window before metrics may move it."""
    min_samples_per_cli: int = Field(3, ge=1)
    """Runs a CLI needs in the window to be scored at all."""
    adaptation_interval_days: float = Field(7, gt=0)
    """The window: only runs this recent count, so the choice follows how the CLIs do now."""
    switch_margin: float = Field(0.05, ge=0, le=1)
    """The guardrail: another CLI must score this much above the default to replace it."""
    max_deviation_from_default: float = Field(0.2, ge=0, le=1)
    """A cheaper CLI may not win with a success rate more than this below the default's."""
    weights: AdaptiveWeights = Field(default_factory=AdaptiveWeights)
    locked_assignments: dict[str, str] = Field(default_factory=dict)
    """role -> CLI, always: manual assignment wins over any metric."""


class CliSettings(StrictModel):
    base_url: str
    """The model API endpoint; the only destination the worker sandbox may reach."""
    credential_env: list[str] = Field(default_factory=list)
    """Host environment variables handed to the worker (values never logged)."""
    login_files: list[str] = Field(default_factory=list)
    """Files under $HOME copied read-only into each run's home when no key variable is set."""
    model: str | None = None
    """Overrides every role's model for this CLI."""
    default_model: str | None = None
    """The model for roles that name none for this CLI."""
    extra_env: dict[str, str] = Field(default_factory=dict)
    extra_flags: list[str] = Field(default_factory=list)

    @field_validator("login_files")
    @classmethod
    def _inside_home(cls, files: list[str]) -> list[str]:
        for rel in files:
            problem = login_file_problem(rel)
            if problem is not None:
                raise ValueError(
                    f"login file '{rel}' {problem}; login files must stay inside the home "
                    "directory (a relative path such as .claude/.credentials.json)"
                )
        return files


def login_file_problem(rel: str) -> str | None:
    """Why a `login_files` entry is not a plain path below the home directory, or None."""
    if not rel.strip():
        return "is empty"
    if rel.startswith(("/", "~", "\\")) or PurePosixPath(rel).is_absolute():
        return "is absolute"
    if ".." in PurePosixPath(rel.replace("\\", "/")).parts:
        return "climbs out with '..'"
    return None


RUNTIME_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
USER_ONLY_SANDBOX_KEYS = ("runtime", "worker_runtime")
"""Sandbox keys a repository may not set: a cloned repository choosing its own container runtime
could undo the isolation the user chose (runc in place of gVisor)."""


class SandboxSettings(StrictModel):
    image: str = "supervisor-sandbox:latest"
    egress_network: str = "supervisor-egress"
    dependency_changes: Literal["approve", "allow"] = "approve"
    """A worker's change to dependency files rebuilds the project image (with network) only after
    `supervisor approve` (`approve`), or at once (`allow`)."""
    workspace: Literal["overlay", "full"] = "overlay"
    """Step workspaces as copy-on-write views of one shared tree per commit (`overlay`, whose
    cost does not grow with the repository; a resume adopts a worker in one as in a full
    worktree, see sandbox/adopt.py), or each written in full (`full`); an overlay that
    cannot be mounted falls back to `full` by itself."""
    runtime: str = Field("runc", pattern=RUNTIME_NAME)
    """The Docker engine's OCI runtime for containers without network: gates, static checks and
    probes. `runsc` (gVisor, registered by scripts/setup.sh with `--network=none`) answers their
    system calls in a user-space kernel, so a test suite the repository wrote meets gVisor, not
    the host's kernel. The user's choice only: a repository's config may not set it."""
    worker_runtime: str = Field("runc", pattern=RUNTIME_NAME)
    """The runtime for workers. Debian's gVisor (2022) cannot use its own network stack on
    kernels that give every network namespace `net.core.rmem_default` (6.x): `runsc-net` runs
    gVisor with `--network=host`, i.e. the host kernel's network stack inside the worker's own
    (internal, firewalled) network namespace; the rest of the kernel surface stays gVisor's."""


class ProtectedPaths(StrictModel):
    """Changes to the package's list of paths workers may not change
    (supervisor/guard/protected.py)."""

    add: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)


class TemplateChoice(StrictModel):
    """A project's workflow: a template from config/workflow_templates/, adjusted."""

    template: str = "_base"
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    add: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """New steps; each needs `position: after <step>`."""
    disable: list[str] = Field(default_factory=list)


NotifyEvent = Literal["approval", "budget", "rate_limited", "failed", "completed"]


class NotificationSettings(StrictModel):
    """Who hears that a task waits, failed or finished (supervisor/policy/notify.py). `webhook`
    routes
    data off the machine, so it is honoured only from the user's own config."""

    webhook: str | None = None
    events: list[NotifyEvent] = Field(default_factory=lambda: list(get_args(NotifyEvent)))
    desktop: bool = False


class TelemetrySettings(StrictModel):
    """OpenTelemetry export of each run's trace and metrics (docs/telemetry.md). Where the data
    goes is the user's choice, so the block is honoured from the user's own config only (a
    repository's is ignored, supervisor/core/trust_records.py); the standard `OTEL_*` variables
    switch it on as well and win over these."""

    enabled: bool = False
    endpoint: str | None = None
    """The collector's OTLP/HTTP base URL (`/v1/traces` and `/v1/metrics` are added)."""
    headers: dict[str, str] = Field(default_factory=dict)
    traces: Literal["otlp", "console", "none"] = "otlp"
    metrics: Literal["otlp", "console", "none"] = "otlp"
    service_name: str = "supervisor"
    resource_attributes: dict[str, str] = Field(default_factory=dict)
    capture_content: bool = False
    """Add the task's text and the workers' answers to the spans, redacted as context packs are."""
    timeout_seconds: float = Field(3.0, gt=0, le=60)
    """How long one export may take before it is given up (a task never waits longer)."""


class Budget(StrictModel):
    usd: float | None = Field(None, gt=0)
    tokens: int | None = Field(None, gt=0)


class Price(StrictModel):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class BudgetSettings(StrictModel):
    """Spend limits per task and per step (supervisor/policy/budgets.py), and the prices of models
    whose
    CLI reports tokens but no cost, in dollars per million tokens."""

    task: Budget = Field(default_factory=Budget)
    step: Budget = Field(default_factory=Budget)
    prices: dict[str, Price] = Field(default_factory=dict)


class ContinuitySettings(StrictModel):
    """Bounded continuations (supervisor/workflow/continuation.py): a listed role whose answer is
    sent back continues its own CLI session, up to `max_continuation_turns` times."""

    default_mode: Literal["fresh"] = "fresh"
    allow_continuation: bool = True
    max_continuation_turns: int = Field(3, ge=0, le=10)
    continuation_roles: list[str] = Field(default_factory=lambda: ["planner", "investigator"])


class FailoverSettings(StrictModel):
    """When a step leaves its CLI for the role's next one (supervisor/routing/failover.py)."""

    max_wait_seconds: float = Field(600, ge=0)
    """A rate limit whose reset is further off than this moves the step to a fallback CLI; a
    shorter one is waited out. Without a fallback every rate limit is waited out."""
    down_seconds: float = Field(900, gt=0)
    """How long a CLI whose API stayed down (or stayed rate-limited without a reset time) after
    the retry policy's attempts is passed over before the preferred CLI is tried again."""


class StateSettings(StrictModel):
    # A shared PostgreSQL database (postgresql+psycopg://...); honoured from the user's config
    # or $SUPERVISOR_STATE_URL only (supervisor/state/location.py). None: the repo's SQLite file.
    url: str | None = None


class ForgeSettings(StrictModel):
    """Pull requests and issues (docs/pull-requests.md). Each key routes the user's forge token
    or what a pull request links to, so a repository's value needs `supervisor trust`."""

    # github or gitlab, for a remote host that is neither github.com nor gitlab.com; `--forge`
    # wins over it
    kind: Literal["github", "gitlab"] | None = None
    # The forge's API (GitHub Enterprise: https://HOST/api/v3; GitLab: https://HOST): where the
    # token is sent
    api_url: str | None = None
    # The web dashboard's address (`supervisor web`), for the events link in a pull request
    dashboard_url: str | None = None
    # Whose comments on a pull request `supervisor pr sync` takes: writers (people with write
    # access to the repository) or everyone; honoured from your own config only
    comments_from: Literal["writers", "everyone"] = "writers"


class TemporalSettings(StrictModel):
    """Where the Temporal runner submits tasks (docs/team-mode.md)."""

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    # The queue's name ("supervisor" when unset); the repository's identity (its root commits)
    # is always appended, so two repositories never share a queue (temporal/identity.py)
    task_queue: str | None = None
    # A worker silent this long is taken for dead: its step is retried on another worker.
    heartbeat_timeout_seconds: float = Field(30, gt=0)
    # How many times a step or component is tried before the task is failed in Temporal (and
    # recorded failed in the state); a busy task is waited for, not counted.
    max_attempts: int = Field(10, ge=1)
    # A git URL every worker host reads and pushes the tasks' branches and refs to, so each host
    # keeps its own clone (supervisor/workspace/remote.py); unset: every worker of the queue
    # works in the same checkout.
    remote: str | None = None
    # A component fan-out runs one activity per component, on any worker of the queue
    # (supervisor/workflow/steps/dispatched.py); false: all of them in the step's own activity.
    spread_components: bool = True
    # How long a step whose role prefers a pool (`preferred_worker`) waits for a worker of that
    # pool before it goes to its fallback (docs/worker-pools.md); a required pool never falls back.
    pool_wait_seconds: float = Field(60, ge=0)


class RolePackSettings(StrictModel):
    """What installed role packs may do; read from the user's own config only (a repository
    cannot loosen it), by supervisor/context/packs/store.py."""

    require_signed: bool = False
    """Install a pack only at a tag `git verify-tag` accepts."""
    pack_clis: list[str] = Field(default_factory=list)
    """CLIs a community role may ask for (`*`: any); any other `cli:` of a pack is ignored."""
    pack_models: list[str] = Field(default_factory=list)
    """Models a community role may ask for (`*`: any); any other model of a pack is ignored."""


class Settings(StrictModel):
    cli: str = "claude"
    workflow: TemplateChoice = Field(default_factory=TemplateChoice)
    retry_policy: str = "default"
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    gates: dict[str, str] = Field(default_factory=dict)
    clis: dict[str, CliSettings] = Field(default_factory=dict)
    limits: Limits = Field(default_factory=Limits)
    protected_paths: ProtectedPaths = Field(default_factory=ProtectedPaths)
    notifications: NotificationSettings = Field(default_factory=NotificationSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)
    adaptive: AdaptiveSettings = Field(default_factory=AdaptiveSettings)
    depth: DepthSettings = Field(default_factory=DepthSettings)
    continuity: ContinuitySettings = Field(default_factory=ContinuitySettings)
    failover: FailoverSettings = Field(default_factory=FailoverSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    # embedded: this process runs the task; temporal: a `supervisor worker` runs its steps
    backend: Literal["embedded", "temporal"] = "embedded"
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)
    forge: ForgeSettings = Field(default_factory=ForgeSettings)
    roles: RolePackSettings = Field(default_factory=RolePackSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    worker_pools: WorkerPoolSettings = Field(default_factory=WorkerPoolSettings)
    projects: list[ProjectDef] = Field(default_factory=list)
    """The projects of a monorepo (supervisor/core/projects.py); empty: one project."""
    cross_project_dependencies: dict[str, ProjectDependency] = Field(default_factory=dict)
    shared_paths: list[str] = Field(default_factory=list)
    """Files every project may change (a root lock file, a base tsconfig); a change to one is
    gated by every project."""

    def project_map(self, source: str = "the config") -> ProjectMap:
        """The validated projects: an unknown name, an overlap or a cycle is a ConfigError."""
        return ProjectMap.build(
            self.projects, self.cross_project_dependencies, self.shared_paths, source
        )
