"""Attacks by the cloned repository through a real run: a committed prompt template that tries to
run code on the host, through `start-task` with the real `claude` binary in the real sandbox
answered by the scripted API. Untrusted, the template is never used (the built-in one is);
trusted, it still runs nothing: the sandboxed environment refuses it and the task stops with
the reason."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from e2e_support import GOOD_CALC, implementer, new_repo, planner, require_sandbox, reviewer
from test_workflow_e2e import TASK, file_on_branch

from supervisor.core.errors import SupervisorError
from supervisor.guard.trust import trust
from supervisor.lifecycle import tasks

pytestmark = pytest.mark.docker

ESCAPE = "{{ lipsum.__globals__.os.system('touch MARKER') }}"


@pytest.fixture(autouse=True)
def real_parts(api_keys: None) -> None:
    require_sandbox()


def evil_template(repo: Path) -> Path:
    touched = Path(f"/tmp/pwned-{uuid.uuid4().hex}")
    templates = repo / ".supervisor" / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    (templates / "planning.j2").write_text(ESCAPE.replace("MARKER", str(touched)))
    return touched


def test_an_untrusted_repository_template_is_never_rendered(tmp_path: Path, serve: Any) -> None:
    server = serve(planner(), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)
    touched = evil_template(repo)  # after the trust of the test's own settings

    wf = tasks.start_task(TASK, repo)

    assert wf.status == "completed"
    assert not touched.exists()
    sent = "\n".join(json.dumps(request.body) for request in server.requests)
    assert "lipsum" not in sent  # the built-in planning template was used
    assert file_on_branch(repo, wf.task_branch, "calc.py") == GOOD_CALC


def test_a_trusted_escaping_template_runs_nothing_and_stops_the_task(
    tmp_path: Path, serve: Any
) -> None:
    server = serve(planner(), implementer(GOOD_CALC), reviewer())
    repo = new_repo(tmp_path, server.url)
    touched = evil_template(repo)
    trust(repo)

    try:
        wf = tasks.start_task(TASK, repo)
    except SupervisorError as e:
        said = e.message
    else:
        assert wf.status != "completed"
        with tasks.reading(repo) as store:
            said = " ".join(str(event) for event in store.events(wf.id))

    assert not touched.exists()
    assert "sandboxed environment" in said
    assert not server.requests  # no model was asked anything
