"""Every engine branch in well under a second: the real engine, real SQLite, real git and the real
claude adapter's parsing, with the container replaced by the stand-in sandbox (scripted workers
that write into their worktree, gates run as subprocesses). The end-to-end specs cover the same
ground on the real parts; these pin the engine's decisions down one by one."""

from __future__ import annotations

import ast
import json
import sqlite3
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from source_trees import parsed

from supervisor.core.errors import ApprovalRequired, StepFailedError
from supervisor.core.process import run as run_process
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import make_demo_repo
from supervisor.sandbox.standin import StandinSandbox, WorkerCall, answer, envelope
from supervisor.workflow import engine
from supervisor.workflow.engine import Reporter

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

TASK = "Write the answer file"


# -- scripted workers ----------------------------------------------------------------------------


class Script:
    """Replies in order: each worker run takes the first unused reply whose `when` text is in its
    prompt (a reply with repeat=True is never used up). Thread-safe: components run at once."""

    def __init__(self, *replies: tuple[str, Callable[[WorkerCall], str]] | Any) -> None:
        self.replies: list[dict[str, Any]] = [
            r if isinstance(r, dict) else {"when": r[0], "do": r[1]} for r in replies
        ]
        self.lock = threading.Lock()
        self.calls: list[tuple[float, WorkerCall]] = []

    def add(self, when: str, do: Callable[[WorkerCall], str], repeat: bool = False) -> None:
        with self.lock:
            self.replies.append({"when": when, "do": do, "repeat": repeat})

    def __call__(self, call: WorkerCall) -> str:
        with self.lock:
            self.calls.append((time.monotonic(), call))
            for reply in self.replies:
                if reply["when"] in call.prompt and not reply.get("used"):
                    reply["used"] = not reply.get("repeat", False)
                    break
            else:
                raise AssertionError(f"no scripted reply for step {call.step}: {call.prompt[:300]}")
        return reply["do"](call)  # type: ignore[no-any-return]

    def prompts(self, role: str) -> list[str]:
        return [c.prompt for _, c in self.calls if c.role == role]


def writes(files: dict[str, str], claimed: list[str] | None = None) -> Callable[[WorkerCall], str]:
    """An implementer that writes `files` and reports them."""

    def do(call: WorkerCall) -> str:
        for path, text in files.items():
            call.write(path, text)
        return answer(
            {
                "status": "SUCCESS",
                "summary": "wrote " + ", ".join(files),
                "files_created": [],
                "files_modified": claimed if claimed is not None else sorted(files),
                "tests_written": [],
                "blockers": [],
            }
        )

    return do


def reviews(status: str, issue: str = "") -> Callable[[WorkerCall], str]:
    issues = [{"severity": "major", "file": "answer.txt", "description": issue}] if issue else []
    return lambda call: answer({"status": status, "summary": f"review: {status}", "issues": issues})


def plans(
    *components: dict[str, Any], depends: tuple[tuple[str, str], ...] = ()
) -> Callable[[WorkerCall], str]:
    plan = {
        "status": "COMPLETE",
        "summary": "the plan",
        "phases": [{"id": "p1", "description": "all", "components": list(components)}],
        "dependencies": [{"source": s, "target": t} for s, t in depends],
        "estimated_components": len(components),
    }
    return lambda call: answer(plan)


def component(cid: str, *files: str) -> dict[str, Any]:
    return {"id": cid, "description": f"the {cid} part", "files": list(files)}


def api_error(text: str, status: int) -> Callable[[WorkerCall], str]:
    return lambda call: envelope(f"API Error: {text}", is_error=True, api_error_status=status)


# -- the project ---------------------------------------------------------------------------------


class Project:
    """A demo repository with a workflow, driven through `tasks` with the stand-in sandbox."""

    def __init__(self, root: Path, script: Script) -> None:
        self.root = root
        self.script = script
        self.sandbox = StandinSandbox(script)

    def start(self, reporter: Reporter | None = None) -> Any:
        return tasks.start_task(TASK, self.root, reporter=reporter)

    def resume(self, wf_id: int = 1) -> Any:
        return tasks.resume(wf_id, self.root)

    def workflow(self, wf_id: int = 1) -> Any:
        with tasks.reading(self.root) as store:
            return store.workflow(wf_id)

    def events(self, kind: str | None = None, wf_id: int = 1) -> list[Any]:
        with tasks.reading(self.root) as store:
            return [e for e in store.events(wf_id) if kind is None or e.type == kind]

    def steps(self, wf_id: int = 1) -> list[dict[str, Any]]:
        with tasks.reading(self.root) as store:
            return list(store.steps(wf_id))

    def git(self, *args: str) -> str:
        return run_process(["git", "-C", str(self.root), *args]).stdout  # type: ignore[no-any-return]

    def on_branch(self, path: str) -> str:
        return self.git("show", f"{self.workflow().task_branch}:{path}")


@pytest.fixture(scope="module", autouse=True)
def warm_packer() -> None:
    """Repomix's node process and the tokenizer start once per process (2-4 s); pay that here
    rather than in whichever spec runs first."""
    from supervisor.context.assemble import build_pack  # noqa: F401
    from supervisor.context.packer import pack
    from supervisor.context.tokens import count

    count("warm")
    pack(Path(__file__).parent, ["conftest.py"])


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_keys: None
) -> Iterator[Callable[..., Project]]:
    def make(workflow: str, gates: dict[str, str] | None = None, *replies: Any) -> Project:
        root = make_demo_repo(tmp_path / "repo")
        config = root / ".supervisor" / "config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        gate_lines = "".join(f"  {k}: {v!r}\n" for k, v in (gates or {}).items())
        config.write_text(
            "clis:\n  claude:\n    base_url: http://127.0.0.1:9\n"
            + (f"gates:\n{gate_lines}" if gate_lines else "")
        )
        (root / ".supervisor" / "workflow.yaml").write_text(
            "workflow:\n  initial_step: " + workflow.lstrip()
        )
        trust(root)  # the base URL is this test's own (nothing listens there: no container)
        made = Project(root, Script(*replies))
        monkeypatch.setattr(tasks, "open_sandbox", lambda project, clis, **_: made.sandbox)
        return made

    yield make


IMPLEMENT_TEST_COMMIT = """implement
  steps:
    implement: {role: implementer, next: test, max_retries: 3}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""
GATE = {"test": "grep -q right answer.txt"}


# -- retries with feedback -----------------------------------------------------------------------


def test_a_failing_gate_sends_its_output_back_to_the_implementer_who_fixes_it(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_TEST_COMMIT,
        {"test": "grep -q right answer.txt || { echo 'answer.txt is wrong'; exit 3; }"},
        ("ROLE: implementer", writes({"answer.txt": "wrong\n"})),
        ("answer.txt is wrong", writes({"answer.txt": "right\n"})),
    )
    wf = p.start()

    assert wf.status == "completed"
    assert p.on_branch("answer.txt") == "right\n"
    second = p.script.prompts("implementer")[1]
    assert "FEEDBACK FROM THE PREVIOUS ATTEMPT" in second
    assert "exit code 3" in second
    gates = [e.status for e in p.events("gate")]
    assert gates == ["failed", "passed"]
    (retry,) = p.events("retry")
    assert retry.step == "implement" and retry.payload["from_step"] == "test"
    # Only the tree that passed reaches the branch, as one commit.
    assert p.git("rev-list", "--count", f"{wf.base_sha}..{wf.task_branch}").strip() == "1"


def test_the_step_fails_after_its_retry_limit_and_the_branch_keeps_its_last_good_state(
    project: Callable[..., Project],
) -> None:
    counter = iter(range(100))
    p = project(
        IMPLEMENT_TEST_COMMIT.replace("max_retries: 3", "max_retries: 1"),
        GATE,
        {
            "when": "ROLE: implementer",
            "repeat": True,
            "do": lambda c: writes({"answer.txt": f"wrong {next(counter)}\n"})(c),
        },
    )
    with pytest.raises(StepFailedError, match=r"'implement' of workflow 1 failed 2 times"):
        p.start()

    wf = p.workflow()
    assert wf.status == "failed" and wf.current_step == "test"  # resume re-checks the gate
    assert len(p.script.calls) == 2
    assert p.git("rev-parse", wf.task_branch) == p.git("rev-parse", wf.base_sha)


# -- circuit breaker -----------------------------------------------------------------------------


def test_the_circuit_breaker_stops_a_step_that_keeps_failing_before_its_retries_run_out(
    project: Callable[..., Project],
) -> None:
    counter = iter(range(100))
    p = project(
        IMPLEMENT_TEST_COMMIT.replace("max_retries: 3", "max_retries: 20"),
        GATE,
        {
            "when": "ROLE: implementer",
            "repeat": True,
            "do": lambda c: writes({"answer.txt": f"wrong {next(counter)}\n"})(c),
        },
    )
    with pytest.raises(StepFailedError, match=r"Circuit breaker open for step 'test': 6 "):
        p.start()

    assert len(p.script.calls) == 6  # the threshold in config/retry_policies.yaml, not 21
    assert p.workflow().status == "failed"
    assert [e.status for e in p.events("gate")] == ["failed"] * 6


# -- loop detection ------------------------------------------------------------------------------


def test_an_attempt_that_reproduces_an_earlier_tree_is_a_loop_and_stops_the_task(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_TEST_COMMIT,
        GATE,
        ("ROLE: implementer", writes({"answer.txt": "wrong A\n"})),
        ("FEEDBACK", writes({"answer.txt": "wrong B\n"})),
        ("FEEDBACK", writes({"answer.txt": "wrong A\n"})),
        ("FEEDBACK", writes({"answer.txt": "right\n"})),  # never reached
    )
    with pytest.raises(StepFailedError, match="exactly the same content as its attempt 1"):
        p.start()

    assert len(p.script.calls) == 3
    (loop,) = p.events("loop_detected")
    assert loop.payload["same_as_attempt"] == 1
    assert p.workflow().status == "failed"


# -- rate limits and transient errors ------------------------------------------------------------


class Watcher(Reporter):
    """Notes the workflow's stored status whenever the engine says something."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: list[tuple[str, str]] = []

    def info(self, text: str) -> None:
        with tasks.reading(self.root) as store:
            self.seen.append((text, store.workflow(1).status))


def test_a_rate_limit_is_a_waiting_state_until_its_reset_then_the_step_runs_again(
    project: Callable[..., Project],
) -> None:
    p = project(
        IMPLEMENT_TEST_COMMIT,
        GATE,
        ("ROLE: implementer", api_error("429 rate limit exceeded, retry after 0.3 seconds", 429)),
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
    )
    watcher = Watcher(p.root)
    wf = p.start(watcher)

    assert wf.status == "completed"
    # While it waits, the stored state says so (`status` shows it), not failed, not running.
    assert [s for t, s in watcher.seen if t.startswith("rate limited")] == ["rate_limited"]
    (first, _), (second, _) = p.script.calls
    assert second - first >= 0.3
    (scheduled,) = p.events("retry_scheduled")
    assert scheduled.status == "wait" and scheduled.payload["delay_s"] == 0.3
    assert len(p.events("rate_limit_over")) == 1
    assert not p.events("retry")  # no feedback retry was spent on it


def no_waiting(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The engine's sleeps, recorded instead of slept (only the engine's: the rest keeps time)."""
    slept: list[float] = []
    clock = SimpleNamespace(time=time.time, monotonic=time.monotonic, sleep=slept.append)
    monkeypatch.setattr(engine, "time", clock)
    return slept


def test_a_transient_api_error_is_retried_with_growing_backoff_then_gives_up(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    slept = no_waiting(monkeypatch)  # the delays are asserted, not waited
    p = project(
        IMPLEMENT_TEST_COMMIT,
        GATE,
        {"when": "ROLE: implementer", "repeat": True, "do": api_error("503 overloaded", 503)},
    )
    with pytest.raises(StepFailedError, match=r"'implement' failed 3 times in a row \(network\)"):
        p.start()

    # config/retry_policies.yaml, default: 3 attempts, 2 s then 4 s, 10 % jitter.
    assert len(p.script.calls) == 3
    delays = [e.payload["delay_s"] for e in p.events("retry_scheduled")]
    assert len(delays) == 2
    assert 1.8 <= delays[0] <= 2.2 and 3.6 <= delays[1] <= 4.4
    assert slept == pytest.approx(delays, abs=0.01)


def test_a_transient_error_then_success_completes_without_using_a_feedback_retry(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    no_waiting(monkeypatch)
    p = project(
        IMPLEMENT_TEST_COMMIT,
        GATE,
        ("ROLE: implementer", api_error("connection reset (ECONNRESET)", 500)),
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
    )
    assert p.start().status == "completed"
    assert "FEEDBACK" not in p.script.prompts("implementer")[1]
    assert not p.events("retry")


# -- feedback routing ----------------------------------------------------------------------------


def test_a_review_rejection_goes_back_to_implement_with_the_reviewers_issues(
    project: Callable[..., Project],
) -> None:
    p = project(
        """implement
  steps:
    implement: {role: implementer, next: test, max_retries: 3}
    test: {gate: test, next: review, on_fail: implement}
    review: {role: reviewer, next: commit, on_reject: implement}
    commit: {action: commit}
""",
        {"test": "test -f answer.txt"},
        ("ROLE: implementer", writes({"answer.txt": "42\n"})),
        ("ROLE: reviewer", reviews("CHANGES_REQUESTED", "explain the answer")),
        ("explain the answer", writes({"answer.txt": "42, because\n"})),
        ("ROLE: reviewer", reviews("APPROVED")),
    )
    wf = p.start()

    assert wf.status == "completed"
    assert p.on_branch("answer.txt") == "42, because\n"
    assert [c.role for _, c in p.script.calls] == [
        "implementer",
        "reviewer",
        "implementer",
        "reviewer",
    ]
    (retry,) = p.events("retry")
    assert (retry.step, retry.status, retry.payload["from_step"]) == (
        "implement",
        "rejected",
        "review",
    )
    # The second review judged the fixed tree, which the gate had passed again first.
    assert [e.status for e in p.events("gate")] == ["passed", "passed"]
    assert "Reviewed by: reviewer" in p.git("log", "-1", "--format=%B", wf.task_branch)


# -- human approval ------------------------------------------------------------------------------


def test_a_step_with_human_approval_waits_and_the_task_goes_on_after_approve_and_resume(
    project: Callable[..., Project],
) -> None:
    p = project(
        """plan
  steps:
    plan: {role: planner, next: implement, human_approval: true}
    implement: {role: implementer, next: test}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
""",
        GATE,
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
    )
    with pytest.raises(ApprovalRequired, match="waits for approval of step 'plan'"):
        p.start()
    assert p.workflow().status == "awaiting_approval"
    assert [c.role for _, c in p.script.calls] == ["planner"]
    with pytest.raises(ApprovalRequired):  # resume alone does not approve
        p.resume()

    tasks.decide(1, p.root, approve=True)
    wf = p.resume()

    assert wf.status == "completed"
    assert [c.role for _, c in p.script.calls] == ["planner", "implementer"]
    assert p.on_branch("answer.txt") == "right\n"


def test_a_rejected_approval_reruns_the_step_with_the_humans_reason(
    project: Callable[..., Project],
) -> None:
    p = project(
        """plan
  steps:
    plan: {role: planner, next: implement, human_approval: true}
    implement: {role: implementer, next: commit}
    commit: {action: commit}
""",
        None,
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
        ("too vague", plans(component("answer", "answer.txt", "why.txt"))),
    )
    with pytest.raises(ApprovalRequired):
        p.start()
    tasks.decide(1, p.root, approve=False, reason="too vague")
    with pytest.raises(ApprovalRequired):
        p.resume()

    assert len(p.script.prompts("planner")) == 2
    assert "too vague" in p.script.prompts("planner")[1]


# -- components ----------------------------------------------------------------------------------

FAN_OUT = """plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, for_each: component, next: test, max_retries: 1}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""


def test_components_fan_out_and_merge_in_dependency_order_into_one_commit(
    project: Callable[..., Project],
) -> None:
    seen_by_ui: list[bool] = []

    def ui(call: WorkerCall) -> str:
        seen_by_ui.append((call.worktree / "core.txt").is_file())
        return writes({"ui.txt": "ui\n"})(call)

    p = project(
        FAN_OUT,
        {"test": "test -f core.txt && test -f ui.txt && test -f docs.txt"},
        # ui comes first in the plan but depends on core.
        (
            "ROLE: planner",
            plans(
                component("ui", "ui.txt"),
                component("core", "core.txt"),
                component("docs", "docs.txt"),
                depends=(("ui", "core"),),
            ),
        ),
        ("'ui'", ui),
        ("'core'", writes({"core.txt": "core\n"})),
        ("'docs'", writes({"docs.txt": "docs\n"})),
    )
    wf = p.start()

    assert wf.status == "completed"
    merged = [e.payload["component"] for e in p.events("component_merged")]
    assert sorted(merged) == ["core", "docs", "ui"]
    assert merged.index("core") < merged.index("ui")
    assert seen_by_ui == [True]  # ui's worker started from the integration with core in it
    assert p.git("rev-list", "--count", f"{wf.base_sha}..{wf.task_branch}").strip() == "1"
    files = p.git("ls-tree", "--name-only", wf.task_branch).split()
    assert {"core.txt", "ui.txt", "docs.txt"} <= set(files)
    # A merged component's branch is gone; its work lives in the commit.
    assert "--" not in p.git("branch", "--list", "ai/*")


def test_a_freed_slot_goes_to_an_independent_component_before_the_finished_ones_merge(
    project: Callable[..., Project],
) -> None:
    """One component at a time: the next independent one starts from the commit before the
    merge (nothing in it needs the merged work), while a dependant and a component planned on
    the same file wait until the merge is in."""
    saw_first: dict[str, bool] = {}

    def seeing(cid: str) -> Callable[[WorkerCall], str]:
        def do(call: WorkerCall) -> str:
            saw_first[cid] = (call.worktree / "first.txt").is_file()
            return writes({f"{cid}.txt": f"{cid}\n"})(call)

        return do

    p = project(
        FAN_OUT,
        {"test": "true"},
        (
            "ROLE: planner",
            plans(
                component("first", "first.txt"),
                component("second", "second.txt"),
                component("after", "after.txt"),
                component("same", "first.txt", "same.txt"),
                depends=(("after", "first"),),
            ),
        ),
        ("'first'", writes({"first.txt": "first\n"})),
        ("'second'", seeing("second")),
        ("'after'", seeing("after")),
        ("'same'", seeing("same")),
    )
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write("limits:\n  max_parallel_components: 1\n")
    wf = p.start()

    assert wf.status == "completed"
    assert saw_first == {"second": False, "after": True, "same": True}
    merged = [e.payload["component"] for e in p.events("component_merged")]
    assert merged[:2] == ["first", "second"]
    files = set(p.git("ls-tree", "--name-only", wf.task_branch).split())
    assert {"first.txt", "second.txt", "after.txt", "same.txt"} <= files


def test_two_components_that_write_the_same_file_conflict_and_the_loser_keeps_its_branch(
    project: Callable[..., Project],
) -> None:
    p = project(
        FAN_OUT,
        {"test": "true"},
        ("ROLE: planner", plans(component("left", "left.txt"), component("right", "right.txt"))),
        ("'left'", writes({"left.txt": "l\n", "shared.txt": "from left\n"})),
        ("'right'", writes({"right.txt": "r\n", "shared.txt": "from right\n"})),
    )
    # Without the ownership check, which would send the second writer of shared.txt back first.
    with (p.root / ".supervisor" / "config.yaml").open("a") as config:
        config.write("limits:\n  component_scope: allow\n")
    trust(p.root)  # widening what a component may change needs trust
    with pytest.raises(StepFailedError, match="1 of 2 components could not be finished"):
        p.start()

    (merged,) = p.events("component_merged")
    (conflict,) = p.events("component_conflict")
    assert {merged.payload["component"], conflict.payload["component"]} == {"left", "right"}
    assert conflict.payload["files"] == ["shared.txt"]
    assert conflict.payload["branch"] in p.git("branch", "--list", "ai/*")
    wf = p.workflow()
    assert wf.status == "failed"
    assert p.git("rev-parse", wf.task_branch) == p.git("rev-parse", wf.base_sha)


def test_a_rate_limited_component_waits_while_the_other_merges_then_runs_once_more(
    project: Callable[..., Project],
) -> None:
    p = project(
        FAN_OUT,
        {"test": "test -f slow.txt && test -f quick.txt"},
        ("ROLE: planner", plans(component("slow", "slow.txt"), component("quick", "quick.txt"))),
        ("'slow'", api_error("429 rate limit exceeded, retry after 0.2 seconds", 429)),
        ("'quick'", writes({"quick.txt": "q\n"})),
        ("'slow'", writes({"slow.txt": "s\n"})),
    )
    wf = p.start()

    assert wf.status == "completed"
    (waiting,) = p.events("component_waiting")
    assert waiting.payload["component"] == "slow"
    assert [e.payload["component"] for e in p.events("component_merged")] == ["quick", "slow"]
    components = [c.step for _, c in p.script.calls if c.role == "implementer"]
    assert sorted(components) == ["implement/quick", "implement/slow", "implement/slow"]
    assert {"slow.txt", "quick.txt"} <= set(p.git("ls-tree", "--name-only", wf.task_branch).split())


def test_a_fix_up_after_a_later_gate_keeps_its_components_name_and_attempt_count(
    project: Callable[..., Project],
) -> None:
    p = project(
        FAN_OUT,
        {"test": "grep -q right b.txt || { echo 'b.txt is wrong'; exit 1; }"},
        ("ROLE: planner", plans(component("a", "a.txt"), component("b", "b.txt"))),
        ("'a'", writes({"a.txt": "a\n"})),
        ("'b'", writes({"b.txt": "wrong\n"})),
        ("b.txt is wrong", writes({"b.txt": "right\n"})),
    )
    wf = p.start()

    assert wf.status == "completed"
    assert p.on_branch("b.txt") == "right\n" and p.on_branch("a.txt") == "a\n"
    runs = [(s["name"], s["attempt"]) for s in p.steps() if s["role"] == "implementer"]
    # The gate's output names b.txt: the fix-up is b's second attempt, not a new `implement` #1.
    assert sorted(runs) == [("implement/a", 1), ("implement/b", 1), ("implement/b", 2)]
    (retry,) = p.events("retry")
    assert retry.payload["attempt"] == 2


def test_a_fix_up_that_concerns_every_component_counts_on_from_their_attempts(
    project: Callable[..., Project],
) -> None:
    p = project(
        FAN_OUT,
        {"test": "test -f fixed.txt || { echo 'the whole thing is wrong'; exit 1; }"},
        ("ROLE: planner", plans(component("a", "a.txt"), component("b", "b.txt"))),
        ("'a'", writes({"a.txt": "a\n"})),
        ("'b'", writes({"b.txt": "b\n"})),
        ("the whole thing is wrong", writes({"fixed.txt": "yes\n"})),
    )
    assert p.start().status == "completed"

    runs = [(s["name"], s["attempt"]) for s in p.steps() if s["role"] == "implementer"]
    assert sorted(runs) == [("implement/a", 1), ("implement/a+b", 2), ("implement/b", 1)]


# -- resume after a failure ----------------------------------------------------------------------


def test_resume_after_a_failure_reruns_only_the_failed_part_and_completes(
    project: Callable[..., Project],
) -> None:
    answer_now = {"text": "wrong"}
    counter = iter(range(100))

    def implementer(call: WorkerCall) -> str:
        return writes({"answer.txt": f"{answer_now['text']} {next(counter)}\n"})(call)

    p = project(
        """plan
  steps:
    plan: {role: planner, next: implement}
    implement: {role: implementer, next: test, max_retries: 1}
    test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
""",
        GATE,
        ("ROLE: planner", plans(component("answer", "answer.txt"))),
        {"when": "ROLE: implementer", "repeat": True, "do": implementer},
    )
    with pytest.raises(StepFailedError):
        p.start()
    wf = p.workflow()
    assert (wf.status, wf.current_step) == ("failed", "test")

    answer_now["text"] = "right"  # the cause is fixed; the user resumes
    wf = p.resume()

    assert wf.status == "completed"
    # The planner, which had succeeded, is not run again; the gate re-checks first.
    assert [c.role for _, c in p.script.calls] == ["planner"] + ["implementer"] * 3
    assert [e.status for e in p.events("gate")] == ["failed", "failed", "failed", "passed"]
    assert p.on_branch("answer.txt") == "right 2\n"
    assert len(p.events("resumed")) == 1


def test_resuming_a_completed_task_removes_what_a_kill_after_its_completion_left(
    project: Callable[..., Project],
) -> None:
    # A supervisor SIGKILLed right after it recorded the completion, before its clean-up, left a
    # worktree it had prepared for a step that never came; the next `resume` removes it.
    p = project(
        IMPLEMENT_TEST_COMMIT, GATE, ("ROLE: implementer", writes({"answer.txt": "right\n"}))
    )
    assert p.start().status == "completed"
    trees = p.root / ".supervisor" / "worktrees"
    p.git("worktree", "add", "-q", "--detach", str(trees / "wf1-review-prep-0a1b"), "HEAD")
    other = trees / "wf2-implement-prep-0a1b"  # another task's: not this one's to remove
    p.git("worktree", "add", "-q", "--detach", str(other), "HEAD")

    assert p.resume().status == "completed"

    assert sorted(t.name for t in trees.iterdir()) == [other.name]
    assert str(trees / "wf1-review-prep-0a1b") not in p.git("worktree", "list")


def test_a_workflow_stored_by_the_previous_version_resumes_and_is_stored_typed_after(
    project: Callable[..., Project],
) -> None:
    answer_now = {"text": "wrong"}
    counter = iter(range(100))

    def implementer(call: WorkerCall) -> str:
        return writes({"answer.txt": f"{answer_now['text']} {next(counter)}\n"})(call)

    p = project(
        IMPLEMENT_TEST_COMMIT.replace("max_retries: 3", "max_retries: 1"),
        GATE,
        {"when": "ROLE: implementer", "repeat": True, "do": implementer},
    )
    with pytest.raises(StepFailedError):
        p.start()
    # Rewrite the row as the supervisor before the typed state wrote it: the same keys, no
    # version, a reset candidate stored as null.
    database = p.root / ".supervisor" / "state.db"
    with sqlite3.connect(database) as conn:
        (stored,) = conn.execute("SELECT context FROM workflows WHERE id = 1").fetchone()
        old = {k: v for k, v in json.loads(stored).items() if k != "version"}
        old.setdefault("integrated", None)
        conn.execute("UPDATE workflows SET context = ? WHERE id = 1", (json.dumps(old),))
    assert "version" not in p.workflow().context

    answer_now["text"] = "right"
    wf = p.resume()

    assert wf.status == "completed"
    assert p.on_branch("answer.txt") == "right 2\n"
    assert wf.context["version"] == 1
    assert wf.context["pinned"] == old["pinned"]  # carried over as it was


# -- a reviewer that may fix: nothing to change is a result, a claimed change is not -------------

FIXING_REVIEWER = """extends: reviewer
description: Reviews the candidate and fixes what it finds; a clean candidate needs no change.
output: implementation
may_change_nothing: true
"""
REVIEW_AND_FIX = """implement
  steps:
    implement: {role: implementer, next: test}
    test: {gate: test, next: fix_review, on_fail: implement}
    fix_review: {role: fixing_reviewer, next: fixed_test, max_retries: 0}
    fixed_test: {gate: test, next: commit, on_fail: implement}
    commit: {action: commit}
"""


@pytest.mark.parametrize(
    ("fixer", "outcome"),
    [
        (writes({}, claimed=[]), "unchanged"),
        (writes({"answer.txt": "right, reviewed\n"}), "fixed"),
        (writes({}, claimed=["answer.txt"]), "failed"),
    ],
    ids=["nothing-to-fix", "fixes", "claims-a-fix-it-did-not-make"],
)
def test_a_reviewer_that_may_fix_may_change_nothing_but_not_claim_a_change_it_did_not_make(
    project: Callable[..., Project], fixer: Callable[[WorkerCall], str], outcome: str
) -> None:
    p = project(
        REVIEW_AND_FIX,
        GATE,
        ("ROLE: implementer", writes({"answer.txt": "right\n"})),
        ("ROLE: fixing_reviewer", fixer),
    )
    roles = p.root / ".supervisor" / "roles"
    roles.mkdir()
    (roles / "fixing_reviewer.yaml").write_text(FIXING_REVIEWER)

    if outcome == "failed":
        with pytest.raises(StepFailedError, match=r"claimed to have written answer\.txt"):
            p.start()
        assert p.workflow().status == "failed"
    else:
        wf = p.start()
        assert wf.status == "completed"
        expected = "right, reviewed\n" if outcome == "fixed" else "right\n"
        assert p.on_branch("answer.txt") == expected
        assert [e.status for e in p.events("gate")] == ["passed", "passed"]  # its tree is gated
    recorded = [(e.type, e.status) for e in p.events() if e.step == "fix_review"]
    assert (("implementation", "unchanged") in recorded) is (outcome == "unchanged")
    assert [c.role for _, c in p.script.calls] == ["implementer", "fixing_reviewer"]


# -- the stand-in stays a test double ------------------------------------------------------------


def test_no_module_of_the_supervisor_package_imports_the_stand_in_sandbox() -> None:
    package = Path(__file__).parent.parent / "supervisor"
    importers = []
    for path in package.rglob("*.py"):
        if path.name == "standin.py":
            continue
        for node in ast.walk(parsed(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if any("standin" in n for n in names):
                importers.append(str(path))
    assert importers == []
    for text in (package.parent / "config").rglob("*.yaml"):
        assert "standin" not in text.read_text()
