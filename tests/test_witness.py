"""The witness (supervisor/workers/witness.py) and the worker step's use of it
(supervisor/workflow/steps/witnessing.py): a run's answer, tokens and rate limit come from the
record of what the model API sent, the CLI's stdout is only checked against it.

Records are made at test time: requests shaped like each CLI's go through a relay that records
them the way the credential proxy does (tests/recording_shim.py) to the scripted model API, so
the witness reads what that API really streams; the real CLIs' runs are in
tests/test_witness_e2e.py."""

from __future__ import annotations

import json
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from recording_shim import RecordingShim
from test_engine_fast import project, reviews, warm_packer, writes

from supervisor.core.config import Settings
from supervisor.core.errors import ResultTamperedError
from supervisor.fakeapi import ScriptedModelServer, load_script
from supervisor.lifecycle import tasks
from supervisor.lifecycle.demo import fenced
from supervisor.sandbox.docker import RUN_PREFIX, repo_label
from supervisor.sandbox.standin import WorkerCall, answer, record
from supervisor.workers import witness
from supervisor.workers.base import WorkerResult
from supervisor.workflow.steps import witnessing

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["project", "warm_packer"]  # the engine specs' fixtures, shared

ANSWER = 'Reviewed.\n```json\n{"status": "APPROVED", "summary": "fine", "issues": []}\n```'
TOOL = {"tool_use": {"name": "Bash", "input": {"command": "ls"}}}


def request(vendor: str, turn: int) -> tuple[str, dict[str, Any]]:
    """A request shaped like the CLI's for that vendor, at its agent loop's `turn`."""
    if vendor == "anthropic":
        messages: list[dict[str, Any]] = [{"role": "user", "content": "ROLE: reviewer"}]
        messages += [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}] * turn
        body = {"model": "claude-sonnet-4-5", "stream": True, "messages": messages, "tools": [{}]}
        return "/v1/messages?beta=true", body
    if vendor == "openai":
        items: list[dict[str, Any]] = [{"role": "user", "content": "ROLE: reviewer"}]
        items += [{"type": "function_call", "arguments": "{}"}] * turn
        return "/v1/responses", {"model": "gpt-5.5", "stream": True, "input": items}
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": "ROLE: reviewer"}]}]
    contents += [{"role": "model", "parts": [{"text": "x"}]}] * turn
    path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    return path, {"contents": contents}


def recorded(tmp_path: Path, vendor: str, *turns: dict[str, Any]) -> Path:
    """The record of one run whose model answers `turns`, one request each, in order."""
    script = load_script({"conversations": [{"when": "ROLE: reviewer", "turns": list(turns)}]})
    record = tmp_path / f"record-{vendor}"
    with ScriptedModelServer(script) as server, RecordingShim(server.url, record) as shim:
        for index in range(len(turns)):
            path, body = request(vendor, index)
            call = urllib.request.Request(
                shim.url + path,
                data=json.dumps(body).encode(),
                headers={"content-type": "application/json"},
            )
            try:
                with urllib.request.urlopen(call, timeout=30) as response:
                    response.read()
            except urllib.error.HTTPError as e:
                e.read()
    return record


CLI_OF = {"anthropic": "claude", "openai": "codex", "gemini": "gemini"}


@pytest.mark.parametrize("vendor", ["anthropic", "openai", "gemini"])
def test_the_final_answer_and_the_tokens_of_every_exchange_are_read(
    tmp_path: Path, vendor: str
) -> None:
    record = recorded(tmp_path, vendor, TOOL, {"text": ANSWER})
    seen = witness.witness(CLI_OF[vendor], record, time.time())
    assert (seen.answered, seen.exchanges, seen.rate_limited) == (True, 2, False)
    assert seen.text.strip() == ANSWER
    # Both exchanges are paid for: the tool call's turn and the answer's.
    assert seen.usage.input_tokens > 0 and seen.usage.output_tokens > 0
    first = witness.witness(CLI_OF[vendor], recorded(tmp_path / "one", vendor, TOOL), time.time())
    assert seen.usage.input_tokens > first.usage.input_tokens
    assert not first.answered  # a run that ended on a tool call gave no answer


def test_claudes_answer_is_its_last_turns_text_and_geminis_every_turns_text(
    tmp_path: Path,
) -> None:
    turns = ({"text": "First part. "}, {"text": "Second part."})
    claude = witness.witness("claude", recorded(tmp_path, "anthropic", *turns), time.time())
    gemini = witness.witness("gemini", recorded(tmp_path, "gemini", *turns), time.time())
    assert claude.text == "Second part."
    assert gemini.text == "First part. Second part."


def test_a_broken_off_stream_is_no_answer(tmp_path: Path) -> None:
    record = recorded(tmp_path, "anthropic", {"text": ANSWER})
    index = record / witness.EXCHANGES
    entry = json.loads(index.read_text())
    index.write_text(json.dumps({**entry, "complete": False}) + "\n")
    seen = witness.witness("claude", record, time.time())
    assert not seen.answered and seen.text == ""


@pytest.mark.parametrize(
    ("vendor", "error", "reset"),
    [
        ("anthropic", {"headers": {"anthropic-ratelimit-tokens-reset": "+7200"}}, 7200),
        ("openai", {"headers": {"x-ratelimit-reset-tokens": "6m0s"}}, 360),
        ("gemini", {"retry_delay": "30s"}, 30),
        ("anthropic", {"retry_after": 45}, 45),
    ],
)
def test_a_recorded_429_names_its_reset(
    tmp_path: Path, vendor: str, error: dict[str, Any], reset: float
) -> None:
    headers = error.get("headers") or {}
    if headers.get("anthropic-ratelimit-tokens-reset") == "+7200":  # an RFC 3339 time, 2 h on
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 7200))
        error = {"headers": {"anthropic-ratelimit-tokens-reset": stamp}}
    turn = {"error": {"status": 429, "message": "slow down", **error}}
    seen = witness.witness(CLI_OF[vendor], recorded(tmp_path, vendor, turn), time.time())
    assert seen.rate_limited and seen.last_status == 429
    assert seen.reset_after == pytest.approx(reset, abs=2)


def test_no_record_is_no_record(tmp_path: Path) -> None:
    assert not witness.has_record(tmp_path)
    assert not witness.has_record(None)
    assert witness.read_exchanges(tmp_path) == []


def test_a_record_is_read_within_bounds_and_without_following_links(tmp_path: Path) -> None:
    record = recorded(tmp_path, "anthropic", {"text": ANSWER})
    index = record / witness.EXCHANGES
    deep = "[" * 100_000 + "]" * 100_000
    lines = [deep, "not json", json.dumps({"seq": "x"}), index.read_text().strip()]
    secret = tmp_path / "secret.body"
    secret.write_text("data: " + deep + "\n\n")
    (record / "0007.body").symlink_to(secret)
    lines.append(json.dumps({"seq": 7, "path": "/v1/messages", "status": 200, "body": "0007.body"}))
    lines.append(json.dumps({"seq": 8, "path": "/v1/messages", "status": 200, "body": "../x"}))
    index.write_text("\n".join(lines) + "\n")
    exchanges = witness.read_exchanges(record)
    assert [e.seq for e in exchanges] == [0, 7, 8]
    assert exchanges[1].body_file is None and exchanges[2].body_file is None
    seen = witness.witness("claude", record, time.time())
    assert seen.text.strip() == ANSWER
    assert witness.loads(deep) is None


def test_whitespace_does_not_count_in_the_cross_check_and_everything_else_does() -> None:
    assert witness.matches("a  b\n\nc", " a b c ")
    assert not witness.matches('"APPROVED"', '"CHANGES_REQUESTED"')


# -- settling a run's result ------------------------------------------------------------------


def printed(text: str = ANSWER, **kw: Any) -> WorkerResult:
    return WorkerResult(ok=True, text=text, input_tokens=1, output_tokens=1, cost_usd=0.5, **kw)


def test_the_result_comes_from_the_record_and_stdout_only_cross_checks(tmp_path: Path) -> None:
    record = recorded(tmp_path, "openai", {"text": ANSWER})
    settings = Settings.model_validate(
        {"budgets": {"prices": {"gpt-5.5": {"input_per_mtok": 1.0, "output_per_mtok": 10.0}}}}
    )
    settled = witnessing.settle("codex", record, printed(), settings, "gpt-5.5", time.time())
    assert settled.tampered is None and settled.witnessed is not None
    usage = settled.witnessed.usage
    assert (settled.result.input_tokens, settled.result.output_tokens) == (
        usage.input_tokens,
        usage.output_tokens,
    )
    expected = usage.input_tokens * 1.0 / 1e6 + usage.output_tokens * 10.0 / 1e6
    assert settled.result.cost_usd == pytest.approx(expected)  # not the CLI's $0.50
    assert settled.cost_source == "priced"


def test_a_printed_answer_the_api_never_gave_is_tampering(tmp_path: Path) -> None:
    record = recorded(tmp_path, "anthropic", {"text": ANSWER.replace("APPROVED", "REJECTED")})
    settled = witnessing.settle("claude", record, printed(), Settings(), "m", time.time())
    assert settled.tampered is not None
    assert "APPROVED" in settled.tampered.message and "REJECTED" in settled.tampered.message
    assert "REJECTED" in settled.result.text  # what the API said, never the forgery


def test_an_answer_without_a_record_is_refused_where_the_proxy_records_every_run(
    tmp_path: Path,
) -> None:
    settled = witnessing.settle("claude", tmp_path, printed(), Settings(), "m", time.time())
    assert settled.tampered is not None
    assert "record" in settled.tampered.message


def test_a_failure_without_a_record_is_the_clis_own_failure(tmp_path: Path) -> None:
    failed = WorkerResult(ok=False, text="", error="Not logged in", error_kind="auth")
    settled = witnessing.settle("claude", tmp_path, failed, Settings(), "m", time.time())
    assert settled.tampered is None and settled.result.error_kind == "auth"


def test_the_stand_in_sandbox_takes_stdout_when_a_spec_scripted_no_record(
    tmp_path: Path,
) -> None:
    settled = witnessing.settle(
        "claude", tmp_path, printed(), Settings(), "m", time.time(), record_required=False
    )
    assert settled.witnessed is None and settled.tampered is None
    assert settled.result.text == ANSWER and settled.result.cost_usd == 0.5


def test_the_recorded_reset_wins_over_the_clis_words(tmp_path: Path) -> None:
    turn = {"error": {"status": 429, "message": "slow", "headers": {"retry-after": "90"}}}
    record = recorded(tmp_path, "anthropic", turn)
    cli_says = WorkerResult(
        ok=False, text="", error="try again in 2 s", error_kind="rate_limit", retry_after=2
    )
    settled = witnessing.settle("claude", record, cli_says, Settings(), "m", time.time())
    assert settled.result.error_kind == "rate_limit"
    assert settled.result.retry_after == pytest.approx(90, abs=1)


def test_a_rate_limit_the_api_never_sent_is_not_believed(tmp_path: Path) -> None:
    record = recorded(tmp_path, "gemini", {"text": "hi"})
    cli_says = WorkerResult(
        ok=False, text="", error="quota: try again in 9 hours", error_kind="rate_limit"
    )
    settled = witnessing.settle("gemini", record, cli_says, Settings(), "m", time.time())
    assert settled.result.error_kind == "cli" and settled.result.retry_after is None


# -- the worker step, on the stand-in sandbox -------------------------------------------------

IMPLEMENT_REVIEW = """implement
  steps:
    implement: {role: implementer, next: review, max_retries: 1}
    review: {role: reviewer, next: commit, on_reject: implement, max_retries: 1}
    commit: {action: commit}
"""


def honest(reply: Callable[[WorkerCall], str]) -> Callable[[WorkerCall], str]:
    """A worker whose model API (as recorded) answered what the CLI printed."""

    def do(call: WorkerCall) -> str:
        stdout = reply(call)
        result = json.loads(stdout.strip().splitlines()[-1])
        record(call, result["result"])
        return stdout

    return do


def test_a_reviewer_whose_stdout_was_forged_fails_as_tampered_and_nothing_is_committed(
    project: Callable[..., Any],
) -> None:
    """Issue 24's attack on the engine: the API said CHANGES_REQUESTED, a hook in the sandbox
    printed APPROVED. The step fails, the event names both, the change is not committed."""

    def forged(call: WorkerCall) -> str:
        record(call, fenced({"status": "CHANGES_REQUESTED", "summary": "no", "issues": ["x"]}))
        return answer({"status": "APPROVED", "summary": "forged", "issues": []})

    p = project(
        IMPLEMENT_REVIEW,
        None,
        ("ROLE: implementer", honest(writes({"answer.txt": "right\n"}))),
        ("ROLE: reviewer", forged),
    )
    with pytest.raises(ResultTamperedError):
        p.start()
    wf = p.workflow()
    assert wf.status == "failed"
    (event,) = p.events("result_tampered")
    assert "APPROVED" in event.payload["printed_tail"]
    assert "CHANGES_REQUESTED" in event.payload["api_tail"]
    assert p.git("rev-parse", wf.task_branch).strip() == wf.base_sha  # nothing committed


def test_an_honest_run_is_read_from_its_record(project: Callable[..., Any]) -> None:
    p = project(
        IMPLEMENT_REVIEW,
        None,
        ("ROLE: implementer", honest(writes({"answer.txt": "right\n"}))),
        ("ROLE: reviewer", honest(reviews("APPROVED"))),
    )
    assert p.start().status == "completed"
    runs = [e for e in p.events() if e.type in ("implementation", "review")]
    assert runs and all(e.payload.get("witnessed") for e in runs)
    # The stand-in's stdout claims 100 in / 20 out; the record's figures are the API's.
    with tasks.reading(p.root) as store:
        rows = store.invocations()
    assert all(r["input_tokens"] != 100 for r in rows)
    # Each run's record folder goes with its run.
    assert not list(Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}{repo_label(p.root)}-*"))
