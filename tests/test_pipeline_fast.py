"""Pipelined steps, pure logic and the real engine with the stand-in sandbox: which worker steps
are prepared while the current step runs (and from which commit), when a preparation is used,
and that every preparation the next step does not take is discarded, leaving nothing behind.
The real containers are in test_pipeline_e2e.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from supervisor.core import dag
from supervisor.core.config import StepDef, WorkflowDef, load_settings
from supervisor.guard.credentials import Credentials
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.sandbox.credproxy import Injection
from supervisor.sandbox.docker import RunSpec
from supervisor.sandbox.egress import Route
from supervisor.sandbox.standin import StandinSandbox, WorkerCall, answer
from supervisor.sandbox.warm import fingerprint
from supervisor.state.store import Store
from supervisor.workflow import lookahead
from supervisor.workflow.lookahead import Expected
from supervisor.workflow.steps.base import Reporter, StepContext
from supervisor.workflow.steps.prepare import Pipeline, Prepared
from supervisor.workspace.worktrees import Workspace

if TYPE_CHECKING:
    from collections.abc import Callable

FLOW = WorkflowDef.model_validate(
    {
        "initial_step": "plan",
        "steps": {
            "plan": {"role": "planner", "next": "implement"},
            "implement": {"role": "implementer", "next": "test"},
            "fan": {"role": "implementer", "for_each": "component", "next": "test"},
            "test": {"gate": "test", "next": "review", "on_fail": "implement"},
            "review": {"role": "reviewer", "next": "commit", "on_reject": "implement"},
            "commit": {"action": "commit"},
        },
    }
)


def commits(role: str) -> bool:
    return role == "implementer"


def after(step: str, context: dict[str, Any]) -> list[Expected]:
    return lookahead.after(FLOW, FLOW.steps[step], context, "tip", commits)


# -- what is prepared, from which commit ---------------------------------------------------------


def test_a_gate_prepares_both_of_its_successors_from_the_candidate_it_checks() -> None:
    assert after("test", {"candidate": "c1"}) == [
        Expected("review", "reviewer", "c1"),
        Expected("implement", "implementer", "c1", likely=False),
    ]


def test_a_reviewer_prepares_the_fix_up_its_rejection_would_send_back() -> None:
    assert after("review", {"candidate": "c1"}) == [
        Expected("implement", "implementer", "c1", likely=False)
    ]


def test_a_planner_prepares_the_implementer_from_the_locked_interfaces_else_the_tip() -> None:
    assert after("plan", {}) == [Expected("implement", "implementer", "tip")]
    assert after("plan", {"locked_sha": "l1"}) == [Expected("implement", "implementer", "l1")]


def test_a_planner_before_a_fan_out_prepares_an_implementer_for_each_component_it_starts() -> None:
    """The plan is not known yet: its first batch is expected to fill every slot, or as many as
    the analyzer recommended."""
    flow = WorkflowDef.model_validate(
        {
            "initial_step": "plan",
            "steps": {
                "plan": {"role": "planner", "next": "fan"},
                "fan": {"role": "implementer", "for_each": "component", "next": "commit"},
                "commit": {"action": "commit"},
            },
        }
    )

    def made(context: dict[str, Any], slots: int = 3) -> list[Expected]:
        width = lookahead.fan_out_width(context, slots)
        return lookahead.after(flow, flow.steps["plan"], context, "tip", commits, 0.0, width)

    assert made({}) == [Expected("fan", "implementer", "tip")] * 3
    assert made({}, slots=1) == [Expected("fan", "implementer", "tip")]
    analysis = {"recommended_components": 2, "path": "planned"}
    assert made({"analysis": analysis}) == [Expected("fan", "implementer", "tip")] * 2
    # A plan already in: the fan-out runs a fix-up, or the components that are left.
    assert made({"plan": {"phases": []}, "candidate": "c1"}) == [
        Expected("fan", "implementer", "c1")
    ]
    # A fan-out that is not the likely successor (a gate's way back) is made once.
    gate = StepDef.model_validate({"gate": "test", "next": "commit", "on_fail": "fan"})
    assert lookahead.after(flow, gate, {"candidate": "c1"}, "tip", commits, 0.0, 3) == [
        Expected("fan", "implementer", "c1", likely=False)
    ]
    # Of these, `prepare_ahead` are made, the likely ones with their containers started.
    assert [e.container for e in lookahead.plan(made({}), 2, 2)] == [True, True]


def test_a_step_that_commits_prepares_nothing_its_successor_starts_from_its_result() -> None:
    assert after("implement", {"candidate": "c1"}) == []
    assert after("fan", {"candidate": "c1"}) == []
    assert after("commit", {"candidate": "c1"}) == []


def beyond(step: str, context: dict[str, Any], odds: float = 0.0) -> list[Expected]:
    return lookahead.beyond(FLOW, FLOW.steps[step], context, "tip", commits, lambda gate: odds)


def test_a_step_that_commits_prepares_the_step_after_its_gate_from_where_it_starts() -> None:
    """Its result is not known yet: the step after the gate is made from the commit the step
    starts from, to be brought to the result while the gate runs."""
    assert beyond("implement", {"candidate": "c1"}) == [
        Expected("review", "reviewer", "c1", advance=True)
    ]
    assert beyond("fan", {}) == [Expected("review", "reviewer", "tip", advance=True)]
    # A gate that fails more often than not at this attempt: its way back, the fix-up.
    assert beyond("implement", {"candidate": "c1"}, odds=0.75) == [
        Expected("implement", "implementer", "c1", advance=True)
    ]
    # It has a whole step to start up in: never at the running step's CPU weight.
    assert not lookahead.plan(beyond("implement", {}), 2, 1)[0].foreground


def test_steps_that_do_not_commit_make_nothing_for_the_step_after_next() -> None:
    for step in ("plan", "test", "review", "commit"):
        assert beyond(step, {"candidate": "c1"}) == []


# -- which of them get a container started: the likeliest, more only on idle cores --------------


def test_only_the_successor_of_the_pass_gets_its_container_on_a_busy_machine() -> None:
    assert lookahead.containers(2, None, cpus=2, load=1.2, likely=True) == 1
    assert lookahead.containers(2, None, cpus=2, load=7.5, likely=True) == 1
    assert lookahead.containers(2, None, cpus=4, load=2.5, likely=True) == 1


def test_the_way_back_alone_gets_its_container_at_once_only_on_an_idle_core() -> None:
    """A reviewer's pass leads to no worker: its rejection's fix-up is the only, unlikely one."""
    assert lookahead.containers(2, None, cpus=2, load=1.2, likely=False) == 0
    assert lookahead.containers(2, None, cpus=4, load=2.5, likely=False) == 1


def test_a_second_container_is_started_at_once_only_for_a_core_idle_beside_the_first() -> None:
    assert lookahead.containers(2, None, cpus=4, load=1.9, likely=True) == 2
    assert lookahead.containers(2, None, cpus=16, load=1.0, likely=True) == 2  # prepare_ahead
    assert lookahead.containers(3, None, cpus=16, load=1.0, likely=True) == 3


def test_the_configured_number_of_containers_wins_within_prepare_ahead() -> None:
    assert lookahead.containers(2, 2, cpus=2, load=9.0, likely=False) == 2
    assert lookahead.containers(2, 0, cpus=16, load=0.0, likely=True) == 0
    assert lookahead.containers(1, 2, cpus=16, load=0.0, likely=True) == 1
    assert lookahead.containers(0, None, cpus=16, load=0.0, likely=True) == 0


def test_idle_cores_are_read_from_two_readings_of_the_machines_cpu_time() -> None:
    assert lookahead.idle_cores((100.0, 400.0), (150.0, 500.0), cpus=2) == 1.0
    assert lookahead.idle_cores((100.0, 400.0), (100.0, 500.0), cpus=2) == 0.0
    assert lookahead.idle_cores((100.0, 400.0), (100.0, 400.0), cpus=2) == 0.0  # no time passed


def test_after_a_gate_the_pass_branch_gets_the_container_the_way_back_only_its_worktree() -> None:
    """A gate that rarely fails: its pass's CLI starts up in the foreground, the way back gets
    no container."""
    planned = lookahead.plan(after("test", {"candidate": "c1"}), 2, 1)
    assert planned == [
        Expected("review", "reviewer", "c1", container=True, foreground=True),
        Expected("implement", "implementer", "c1", likely=False, container=False),
    ]
    assert lookahead.plan(after("test", {"candidate": "c1"}), 1, 1) == planned[:1]


def test_a_gate_that_fails_more_often_than_not_gets_its_fix_ups_container_instead() -> None:
    """With no history (even odds) the pass is the likelier; where the gate has failed more
    often than not at this attempt, its fix-up is, and only its container starts at once."""
    even = lookahead.after(FLOW, FLOW.steps["test"], {"candidate": "c1"}, "tip", commits, 0.5)
    assert [(e.step, e.likely) for e in even] == [("review", True), ("implement", False)]
    often = lookahead.after(FLOW, FLOW.steps["test"], {"candidate": "c1"}, "tip", commits, 0.75)
    assert [(e.step, e.likely) for e in often] == [("implement", True), ("review", False)]
    started = lookahead.containers(2, None, cpus=2, load=7.5, likely=1)
    assert lookahead.plan(often, 2, started) == [
        Expected("implement", "implementer", "c1", container=True, foreground=True),
        Expected("review", "reviewer", "c1", likely=False, container=False),
    ]


def test_a_second_container_started_on_an_idle_core_starts_up_in_the_background() -> None:
    expected = after("test", {"candidate": "c1"})
    assert lookahead.containers(2, None, cpus=4, load=1.9, likely=1) == 2
    assert lookahead.plan(expected, 2, 2) == [
        Expected("review", "reviewer", "c1", container=True, foreground=True),
        Expected("implement", "implementer", "c1", likely=False, container=True),
    ]


def test_the_odds_of_a_failure_move_only_a_gates_way_back() -> None:
    """A reviewer's rejection is no gate's failure: its fix-up stays unlikely."""
    review = lookahead.after(FLOW, FLOW.steps["review"], {"candidate": "c1"}, "tip", commits, 1.0)
    assert [e.likely for e in review] == [False]
    assert lookahead.leading_likely(review) == 0


def test_a_gates_odds_of_failing_are_its_history_with_one_failure_and_one_pass_beside_it() -> None:
    assert lookahead.fail_odds([]) == 0.5  # no history: the pass stays the likelier
    assert lookahead.fail_odds([True, True]) == 0.75
    assert lookahead.fail_odds([True]) > 0.5  # failed once at this attempt: the fix-up first
    assert lookahead.fail_odds([False, False]) == 0.25


# -- a prepared container is used only for the very container the step would make ---------------


def spec(**changes: Any) -> RunSpec:
    made = RunSpec(
        argv=["claude", "-p", "--model", "m"],
        worktree=Path("/w/one"),
        env={"ANTHROPIC_BASE_URL": "http://proxy:1"},
        home_files={".claude.json": b"{}"},
        run_files={"output_schema.json": "{}"},
        network="egress",
    )
    for name, value in changes.items():
        setattr(made, name, value)
    return made


def test_the_fingerprint_ignores_the_prompt_labels_folders_and_the_worktrees_path() -> None:
    same = spec(
        stdin_text="a prompt known only now",
        labels={"supervisor.step_id": "7"},
        worktree=Path("/w/other"),
        record_dir=Path("/tmp/record"),
        # Given late like the prompt (warm.run writes the step's own): another role's output
        # schema makes the same container.
        run_files={"output_schema.json": '{"review": true}'},
    )
    assert fingerprint(same, "base1") == fingerprint(spec(), "base1")


@pytest.mark.parametrize(
    "changed",
    [
        {"argv": ["claude", "-p", "--model", "other"]},
        {"env": {"ANTHROPIC_BASE_URL": "http://proxy:2"}},
        {"home_files": {".claude.json": b"{ }"}},
        {"image": "project:abc"},
        {"memory": "1g"},
        {"network": "none"},
        {"home_dir": Path("/kept/home")},
    ],
)
def test_any_difference_in_what_the_container_is_made_of_makes_the_preparation_stale(
    changed: dict[str, Any],
) -> None:
    assert fingerprint(spec(**changed), "base1") != fingerprint(spec(), "base1")


def test_a_run_file_the_command_line_names_is_part_of_the_container() -> None:
    """It may be read at start (codex's --output-schema): not given late like the others."""
    named = ["claude", "-p", "--schema", "/run/supervisor/output_schema.json"]
    one = spec(argv=named, run_files={"output_schema.json": "{}"})
    other = spec(argv=named, run_files={"output_schema.json": '{"review": true}'})
    assert fingerprint(one, "base1") != fingerprint(other, "base1")


def test_another_base_commit_makes_the_preparation_stale() -> None:
    assert fingerprint(spec(), "base2") != fingerprint(spec(), "base1")


# -- the pipeline: taken when it matches, discarded otherwise, nothing left ----------------------


class Made:
    """A maker for the pipeline that makes a real worktree (and no container)."""

    def __init__(self) -> None:
        self.calls: list[Expected] = []
        self.lock = threading.Lock()

    def __call__(self, c: StepContext, wf: Any, expected: Expected) -> Prepared:
        with self.lock:
            self.calls.append(expected)
            n = len(self.calls)
        tree = c.ws.add_worktree(f"wf{wf.id}-prep-{expected.role}-{n}", expected.base)
        record = tree.parent / f"record-{n}"
        record.mkdir()
        route = Route(url="http://127.0.0.1:9", alias="api", gateway="127.0.0.1")
        creds = Credentials(injection=Injection(header="x-api-key", value="k1"))
        cli = expected.cli or "claude"
        return Prepared(wf.id, expected.role, cli, expected.base, tree, creds, route, record, None)


@pytest.fixture
def context(tmp_path: Path) -> tuple[StepContext, Any]:
    repo = make_demo_repo(tmp_path / "repo")
    ws = Workspace(repo)
    store = Store(tmp_path / "state.db")
    head = ws.head_commit()
    wf = store.create_workflow(
        description="t",
        cli="claude",
        base_branch="main",
        base_sha=head,
        branch_for_id=lambda i: f"ai/{i}-t",
        definition={},
        first_step="test",
    )
    settings = load_settings(repo)
    c = StepContext(
        repo, settings, store, ws, StandinSandbox(lambda call: ""), Reporter(), lambda *a: None
    )
    return c, wf


def key(value: str = "k1") -> Credentials:
    return Credentials(injection=Injection(header="x-api-key", value=value))


def prepared_trees(c: StepContext) -> list[str]:
    found = c.ws.worktrees_dir.iterdir() if c.ws.worktrees_dir.exists() else []
    return sorted(p.name for p in found if "-prep-" in p.name)


def test_the_next_step_takes_a_preparation_of_its_role_cli_base_and_key(
    context: tuple[StepContext, Any],
) -> None:
    c, wf = context
    head = c.ws.head_commit()
    pipeline = Pipeline(c, 2, make=Made())
    pipeline.ahead(wf, [Expected("review", "reviewer", head), Expected("fix", "implementer", head)])
    pipeline.ahead(wf, [])  # the next step starts

    assert pipeline.take(wf.id, "reviewer", "claude", head, key("another key")) is None
    assert pipeline.take(wf.id, "reviewer", "codex", head, key()) is None
    assert pipeline.take(wf.id, "reviewer", "claude", "0" * 40, key()) is None
    taken = pipeline.take(wf.id, "reviewer", "claude", head, key())
    assert taken is not None and taken.worktree.is_dir() and taken.base == head
    assert pipeline.take(wf.id, "reviewer", "claude", head, key()) is None  # used once only

    pipeline.settle()  # the step ran: the fix-up's preparation was not needed
    pipeline.settled()  # discarded behind the engine
    events = [e for e in c.store.events(wf.id) if e.type == "prepared_run_discarded"]
    assert [e.role for e in events] == ["implementer"]
    assert prepared_trees(c) == [taken.worktree.name]  # the taken one is the step's to remove
    pipeline.close()


def test_a_preparation_for_the_step_after_next_is_not_taken_by_the_next_step(
    context: tuple[StepContext, Any],
) -> None:
    c, wf = context
    head = c.ws.head_commit()
    pipeline = Pipeline(c, 2, make=Made())
    pipeline.ahead(wf, [Expected("review", "reviewer", head)])  # made while the current step runs
    assert pipeline.take(wf.id, "reviewer", "claude", head, key()) is None  # the current step
    pipeline.close()
    assert prepared_trees(c) == []


def test_a_fan_outs_copies_beyond_its_plans_first_batch_go_once_the_plan_is_in(
    context: tuple[StepContext, Any],
) -> None:
    """Made while the planner ran, one for each slot; the plan starts two components at once
    (its first phase's): the third is not taken, and goes once the fan-out's first worker has
    its prompt, not after the whole fan-out."""
    c, wf = context
    head = c.ws.head_commit()
    pipeline = Pipeline(c, 3, make=Made())
    fan = Expected("implement", "implementer", head)
    pipeline.ahead(wf, [fan, fan, fan])
    plan = {
        "phases": [
            {"id": "p1", "components": [{"id": "one"}, {"id": "two"}]},
            {"id": "p2", "components": [{"id": "three"}, {"id": "four"}, {"id": "five"}]},
        ]
    }
    pipeline.answered(wf, {"plan": plan})
    pipeline.ahead(wf, [])  # the fan-out starts
    taken = [pipeline.take(wf.id, "implementer", "claude", head, key()) for _ in range(3)]
    assert [t is not None for t in taken] == [True, True, False]

    def discarded() -> list[str]:
        found = [e for e in c.store.events(wf.id) if e.type == "prepared_run_discarded"]
        return [e.payload["reason"] for e in found]

    time.sleep(0.2)
    assert discarded() == []  # not beside the move to the fan-out's first worker
    pipeline.prompted()  # which has its prompt now
    pipeline.settled()
    assert discarded() == ["its plan starts fewer components"]
    pipeline.close()


def test_a_plans_first_batch_is_its_first_phase_up_to_every_slot() -> None:
    one = {"id": "x"}
    assert lookahead.first_batch({"phases": [{"components": [one] * 5}]}, 3) == 3
    assert (
        lookahead.first_batch({"phases": [{"components": [one]}, {"components": [one] * 4}]}, 3)
        == 1
    )
    assert lookahead.first_batch({"phases": []}, 3) == 1
    fan, review = Expected("fan", "implementer", "b"), Expected("review", "reviewer", "b")
    assert lookahead.surplus([fan, review, fan, fan], 2) == {3}
    assert lookahead.surplus([fan, review, fan], 1) == {2}


def test_closing_the_pipeline_discards_every_preparation_and_leaves_no_worktree(
    context: tuple[StepContext, Any],
) -> None:
    c, wf = context
    head = c.ws.head_commit()
    made = Made()
    pipeline = Pipeline(c, 2, make=made)
    pipeline.ahead(wf, [Expected("review", "reviewer", head), Expected("fix", "implementer", head)])
    pipeline.ahead(wf, [Expected("fix", "implementer", head)])
    pipeline.close()  # the second guess may not be made by then: then nothing is made for it

    assert prepared_trees(c) == []
    discarded = [e for e in c.store.events(wf.id) if e.type == "prepared_run_discarded"]
    assert len(made.calls) >= 2 and len(discarded) == len(made.calls)
    assert {e.payload["reason"] for e in discarded} == {"the task stopped"}


def test_the_guess_is_made_off_the_starting_steps_set_up_and_waited_for_by_the_next_step(
    context: tuple[StepContext, Any],
) -> None:
    """The engine's guess (git, routing, the gate's history) runs in the background; the step
    after still finds what it made."""
    c, wf = context
    head = c.ws.head_commit()
    release, guessed = threading.Event(), threading.Event()
    guessed_in: list[str] = []

    def slow_guess() -> list[Expected]:
        guessed_in.append(threading.current_thread().name)
        release.wait(5)
        guessed.set()
        return [Expected("review", "reviewer", head)]

    pipeline = Pipeline(c, 2, make=Made())
    pipeline.ahead(wf, slow_guess)
    assert not guessed.is_set()  # returned at once, the guess still being made
    release.set()
    pipeline.ahead(wf, [])  # the next step starts
    assert pipeline.take(wf.id, "reviewer", "claude", head, key()) is not None
    assert guessed_in and guessed_in[0].startswith("guess")
    pipeline.close()


def test_the_graph_library_is_imported_while_the_step_before_runs_not_after_its_answer(
    context: tuple[StepContext, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planner's answer becomes a graph before the next step starts; networkx's first import
    (~0.25 s) happens in the preparing thread, which waits on the running worker anyway."""
    c, wf = context
    head = c.ws.head_commit()
    imported: list[str] = []
    real = dag._networkx

    def recorded() -> Any:
        imported.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(dag, "_networkx", recorded)
    pipeline = Pipeline(c, 2, make=Made())
    pipeline.ahead(wf, [Expected("implement", "implementer", head)])
    pipeline.ahead(wf, [])  # the next step starts, and waits for what is being made for it
    assert pipeline.take(wf.id, "implementer", "claude", head, key()) is not None
    pipeline.close()

    assert imported and all(name.startswith("prepare") for name in imported)


def test_the_step_after_next_is_made_early_only_where_it_can_be_brought_to_its_commit(
    context: tuple[StepContext, Any],
) -> None:
    """It is made for its container's start-up and advanced through a copy-on-write view's
    mount: with fully written worktrees it would be a start-up thrown away every time."""
    c, wf = context
    head = c.ws.head_commit()
    c.sandbox.finish_prepared = lambda *args: None  # type: ignore[attr-defined]  # containers
    early = Expected("review", "reviewer", head, advance=True)
    for copy_on_write in (False, True):
        if copy_on_write:
            c.ws.use_overlay()
        made = Made()
        pipeline = Pipeline(c, 2, make=made)
        pipeline.ahead(wf, [early])
        pipeline.prompted()  # the running step's worker has its prompt
        deadline = time.monotonic() + 10
        while copy_on_write and not made.calls and time.monotonic() < deadline:
            time.sleep(0.01)  # made while the step runs (once it ends, no longer)
        pipeline.ahead(wf, [])  # the next step starts: what was made is there to take
        taken = pipeline.take(wf.id, "reviewer", "claude", head, key())
        pipeline.close()
        assert [e.step for e in made.calls] == (["review"] if copy_on_write else [])
        assert (taken is not None) == copy_on_write


class Started:
    """Stands for a started container in the pipeline's bookkeeping (no engine call is made
    on it but its removal)."""

    id = "started"

    def remove(self, force: bool = False) -> None:
        pass


def test_a_step_without_a_started_container_of_its_own_takes_another_roles_started_one(
    context: tuple[StepContext, Any], tmp_path: Path
) -> None:
    """After a failed gate the review's container is of no use; the fix-up takes it when it
    has none of its own started (whether it is the same container, its fingerprint decides
    when the step runs), and prefers its own when it has one."""
    from supervisor.sandbox.warm import Warm

    c, wf = context
    head = c.ws.head_commit()
    base_made = Made()

    def made_with(started: set[str]) -> Callable[..., Prepared]:
        def make(c: StepContext, wf: Any, expected: Expected) -> Prepared:
            made = base_made(c, wf, expected)
            if expected.role in started:
                folder = tmp_path / f"run-{expected.role}-{len(base_made.calls)}"
                folder.mkdir()
                made.warm = Warm(Started(), None, folder, "f", ())
            return made

        return make

    for started, taken in (
        ({"reviewer"}, "reviewer"),
        ({"reviewer", "implementer"}, "implementer"),
    ):
        pipeline = Pipeline(c, 2, make=made_with(started))
        pipeline.ahead(
            wf, [Expected("review", "reviewer", head), Expected("fix", "implementer", head)]
        )
        pipeline.ahead(wf, [])  # the gate failed: the fix-up starts
        got = pipeline.take(wf.id, "implementer", "claude", head, key())
        assert got is not None and got.warm is not None and got.role == "implementer"
        assert got.worktree.name.startswith(f"wf{wf.id}-prep-{taken}-")
        got.warm = None
        pipeline.close()


def test_a_preparation_for_the_commit_the_step_left_unchanged_is_kept_as_it_is(
    context: tuple[StepContext, Any],
) -> None:
    """A step that commits may change nothing (a test engineer satisfied with the tests): what
    was made from its start is already made for its result, and nothing is sent or recorded."""
    from supervisor.workflow.steps import advance

    c, wf = context
    head = c.ws.head_commit()
    made = Made()(c, wf, Expected("review", "reviewer", head, advance=True))

    assert advance.advance(c, made, head)
    assert made.base == head
    assert [e for e in c.store.events(wf.id) if e.type == "prepared_run_advanced"] == []
    c.ws.remove_worktree(made.worktree)


def test_a_preparation_that_fails_is_no_preparation_and_fails_no_step(
    context: tuple[StepContext, Any],
) -> None:
    c, wf = context
    head = c.ws.head_commit()

    def broken(c: StepContext, wf: Any, expected: Expected) -> Prepared:
        raise OSError("disk full")

    pipeline = Pipeline(c, 2, make=broken)
    pipeline.ahead(wf, [Expected("review", "reviewer", head)])
    pipeline.ahead(wf, [])
    assert pipeline.take(wf.id, "reviewer", "claude", head, key()) is None
    pipeline.close()


# -- the real engine: the fix-up and the review run in what was prepared during the gate ---------


class Script:
    """Each worker run takes the first reply whose text is in its prompt, once."""

    def __init__(self, *replies: tuple[str, Callable[[WorkerCall], str]]) -> None:
        self.replies = list(replies)
        self.lock = threading.Lock()

    def __call__(self, call: WorkerCall) -> str:
        with self.lock:
            found = next(i for i, (when, _) in enumerate(self.replies) if when in call.prompt)
            _, do = self.replies.pop(found)
        return do(call)


def writes(text: str) -> Callable[[WorkerCall], str]:
    def do(call: WorkerCall) -> str:
        call.write("answer.txt", text)
        data = {
            "status": "SUCCESS",
            "summary": "wrote answer.txt",
            "files_created": [],
            "files_modified": ["answer.txt"],
            "tests_written": [],
            "blockers": [],
        }
        return answer(data)

    return do


def writes_file(path: str) -> Callable[[WorkerCall], str]:
    def do(call: WorkerCall) -> str:
        call.write(path, "right = True\n")
        return answer(
            {
                "status": "SUCCESS",
                "summary": f"wrote {path}",
                "files_created": [],
                "files_modified": [path],
                "tests_written": [],
                "blockers": [],
            }
        )

    return do


def approves(call: WorkerCall) -> str:
    return answer({"status": "APPROVED", "issues": [], "summary": "review: APPROVED"})


def gated_repo(tmp_path: Path) -> Path:
    """The demo repository with implement -> test gate -> review -> commit; the gate fails
    until answer.txt says right."""
    root = make_demo_repo(tmp_path / "repo")
    config = root / ".supervisor" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "clis:\n  claude:\n    base_url: http://127.0.0.1:9\n"
        "gates:\n  test: 'grep -q right answer.txt || { echo answer.txt is wrong; exit 3; }'\n"
    )
    (root / ".supervisor" / "workflow.yaml").write_text(
        "workflow:\n  initial_step: implement\n  steps:\n"
        "    implement: {role: implementer, next: test, max_retries: 3}\n"
        "    test: {gate: test, next: review, on_fail: implement}\n"
        "    review: {role: reviewer, next: commit, on_reject: implement}\n"
        "    commit: {action: commit}\n"
    )
    trust(root)
    return root


def test_the_steps_after_a_gate_run_in_the_worktrees_prepared_while_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> None:
    root = gated_repo(tmp_path)
    script = Script(
        ("ROLE: implementer", writes("wrong\n")),
        ("answer.txt is wrong", writes("right\n")),
        ("ROLE: reviewer", approves),
    )
    sandbox = StandinSandbox(script)
    monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: sandbox)

    wf = tasks.start_task("Write the answer file", root)

    assert wf.status == "completed"
    with tasks.reading(root) as store:
        steps = store.steps(wf.id)
        events = store.events(wf.id)
    trees = {(s["name"], s["attempt"]): Path(s["worktree"]).name for s in steps if s["role"]}
    assert "-prep-" not in trees[("implement", 1)]  # the first step: nothing ran before it
    assert "-prep-implementer-" in trees[("implement", 2)]  # prepared during the failing gate
    assert "-prep-reviewer-" in trees[("review", 1)]  # prepared during the passing gate
    used = [(e.step, e.role) for e in events if e.type == "prepared_run_used"]
    assert used == [("implement", "implementer"), ("review", "reviewer")]
    discarded = [e.role for e in events if e.type == "prepared_run_discarded"]
    assert discarded == ["reviewer", "implementer", "implementer"]  # the ways not taken
    # Their context packs were gathered during the gate too (the fix-up's before its feedback
    # was known: only what the prompt leaves of the budget follows from that).
    ahead = [(e.step, e.payload["ahead"]) for e in events if e.type == "context_packed"]
    assert ahead == [("implement", False), ("implement", True), ("review", True)]
    worktrees = Workspace(root).worktrees_dir
    assert not [p for p in worktrees.iterdir() if "-prep-" in p.name]


def test_a_gate_that_failed_its_first_run_before_prepares_its_fix_up_first_the_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> None:
    """The repository's history of the gate at the same attempt: the second task's first test
    run expects the fix-up (its container started at once, in the foreground); its second run,
    which passed last time, the review."""
    root = gated_repo(tmp_path)
    task = (
        ("ROLE: implementer", writes("wrong\n")),
        ("answer.txt is wrong", writes("right\n")),
        ("ROLE: reviewer", approves),
    )
    sandbox = StandinSandbox(Script(*task, *task))
    monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: sandbox)
    asked: list[list[str]] = []
    ahead = Pipeline.ahead

    def recording(self: Pipeline, wf: Any, expected: Any, worker: bool = False) -> None:
        listed = expected() if callable(expected) else expected  # the engine's guess, made now
        if wf.current_step == "test":
            asked.append([e.step for e in listed if e.likely])
        ahead(self, wf, listed, worker)

    monkeypatch.setattr(Pipeline, "ahead", recording)

    first = tasks.start_task("Write the answer file", root)
    second = tasks.start_task("Write the answer file again", root)

    assert first.status == second.status == "completed"
    assert asked == [
        ["review"],  # no history: even odds, the pass is the likelier
        ["review"],
        ["implement"],  # failed at this attempt before: the fix-up is
        ["review"],  # passed at this attempt before
    ]


def test_a_fan_outs_workers_find_their_packs_gathered_while_the_plan_was_being_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> None:
    """Before the plan, the planner's successor's targets were unknown: what was gathered then
    is not theirs. Once the planner answered, each component's pack is gathered at once."""
    root = make_demo_repo(tmp_path / "repo")
    config = root / ".supervisor" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("clis:\n  claude:\n    base_url: http://127.0.0.1:9\n")
    (root / ".supervisor" / "workflow.yaml").write_text(
        "workflow:\n  initial_step: plan\n  steps:\n"
        "    plan: {role: planner, next: implement}\n"
        "    implement: {role: implementer, for_each: component, next: commit}\n"
        "    commit: {action: commit}\n"
    )
    trust(root)
    plan = {
        "status": "COMPLETE",
        "summary": "the plan",
        "phases": [
            {
                "id": "p1",
                "description": "all",
                "components": [
                    {"id": "one", "description": "the answer", "files": ["answer.txt"]},
                    {"id": "two", "description": "the calc", "files": ["calc.py"]},
                ],
            }
        ],
        "dependencies": [],
        "estimated_components": 2,
    }
    script = Script(
        ("ROLE: planner", lambda call: answer(plan)),
        ("of the plan: 'one'", writes("right\n")),
        ("of the plan: 'two'", writes_file("calc.py")),
    )
    sandbox = StandinSandbox(script)
    monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: sandbox)

    wf = tasks.start_task("Write the answer file", root)

    assert wf.status == "completed", wf
    with tasks.reading(root) as store:
        events = store.events(wf.id)
    ahead = sorted((e.step, e.payload["ahead"]) for e in events if e.type == "context_packed")
    assert ahead == [("implement/one", True), ("implement/two", True), ("plan", False)]


def test_a_plans_components_are_listed_with_their_files_but_a_projects_are_not() -> None:
    from supervisor.workflow.steps.pack_ahead import component_files

    plan = {
        "phases": [
            {"components": [{"id": "a", "files": ["a.py"]}, {"id": "b", "files": []}]},
            {"components": [{"id": "c", "files": ["c.ts"], "project": "web"}]},
        ]
    }
    assert component_files(plan) == [["a.py"], []]
    assert component_files(None) == []


# -- a crash while a step runs in its prepared container: resume adopts it by its step's row ----


def prepared_container_labels(token: str = "0123456789ab") -> dict[str, str]:
    from supervisor.sandbox import adopt
    from supervisor.sandbox.docker import LABEL_REPO, LABEL_STEP, LABEL_WORKFLOW
    from supervisor.sandbox.warm import LABEL_PREPARED

    route = Route(url="http://model-api:41234/v1", alias="a", gateway="g", placeholder="")
    made = adopt.prepared_labels(
        {LABEL_REPO: "r" * 16, LABEL_WORKFLOW: "3", LABEL_STEP: "implement"}, "b" * 40, route
    )
    return {**made, LABEL_PREPARED: token}


def row(**changes: Any) -> dict[str, Any]:
    made = {
        "id": 17,
        "workflow_id": 3,
        "name": "implement/square",
        "role": "implementer",
        "attempt": 1,
        "status": "running",
        "container_id": "c" * 64,
        "worktree": "/repo/.supervisor/worktrees/wf3-prep-implementer-0123456789ab",
    }
    return {**made, **changes}


def test_a_prepared_container_its_steps_row_names_is_adopted_with_its_record_folder() -> None:
    from supervisor.sandbox import adopt

    found = adopt.match("c" * 64, prepared_container_labels(), "running", "r" * 16, 3, [row()])

    assert found is not None
    assert (found.step_id, found.step, found.role, found.port) == (
        17,
        "implement/square",
        "implementer",
        41234,
    )
    assert found.record_dir is not None and found.record_dir.name.endswith("0123456789ab")


@pytest.mark.parametrize(
    ("token", "rows"),
    [
        ("0123456789ab", []),  # no step took it: the clean-up removes it
        ("0123456789ab", [row(container_id="d" * 64)]),  # a row names another container
        ("0123456789ab", [row(status="succeeded")]),
        ("0123456789ab", [row(role=None)]),  # a gate's row
        ("../../etc/x", [row()]),  # not a token of ours
    ],
)
def test_a_prepared_container_no_running_step_names_is_not_adopted(
    token: str, rows: list[dict[str, Any]]
) -> None:
    from supervisor.sandbox import adopt

    labels = prepared_container_labels(token)
    assert adopt.match("c" * 64, labels, "running", "r" * 16, 3, rows) is None
