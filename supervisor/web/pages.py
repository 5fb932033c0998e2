"""The board, a workflow's page, and the approval panel's decisions.

A decision is the command line's (supervisor.lifecycle.task_state.decide) with the signed-in
person as approver, so a policy that needs two approvers counts each person once; then the
workflow's `resume` starts detached, as the TUI starts it (supervisor/lifecycle/detached.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from supervisor.core.errors import SupervisorError
from supervisor.views import listings
from supervisor.web.dashboard import dashboard_of, repository_of, signed_in, with_session
from supervisor.web.render import page
from supervisor.web.sessions import Session, csrf_matches
from supervisor.web.stream import board_tag

if TYPE_CHECKING:
    from starlette.requests import Request

    from supervisor.web.board import Repository

STATUSES = (
    "running",
    "awaiting_approval",
    "budget_exceeded",
    "rate_limited",
    "interrupted",
    "failed",
    "completed",
    "abandoned",
)
REASON = 2_000
"""Characters of a rejection's reason kept: it reaches the next worker's prompt."""


def _signed_in(request: Request) -> Session | Response:
    token = request.query_params.get("token")
    if token is not None and request.method == "GET":
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        to = RedirectResponse(request.url.path + (f"?{urlencode(rest)}" if rest else ""), 303)
        if signed_in(request) is not None:  # the address opened again: already signed in
            return to
        session = dashboard_of(request).sessions.sign_in(token)
        if session is None:
            return RedirectResponse("/login", status_code=303)
        return with_session(to, request, session)
    return signed_in(request) or RedirectResponse("/login", status_code=303)


async def board(request: Request) -> Response:
    session = _signed_in(request)
    if isinstance(session, Response):
        return session
    shown = dashboard_of(request).board
    repo = request.query_params.get("repo") or None
    status = request.query_params.get("status") or None
    needs = request.query_params.get("needs") == "me"
    rows = await run_in_threadpool(shown.rows, repo, status, needs)
    given = {k: v for k, v in request.query_params.items() if k not in ("token", "seen")}
    query = urlencode({**given, "seen": board_tag(rows)})
    return HTMLResponse(
        page(
            "board.html",
            session=session,
            rows=rows,
            repositories=await run_in_threadpool(shown.repositories),
            statuses=STATUSES,
            repo=repo,
            status=status,
            needs=needs,
            query=query,
        )
    )


async def workflow(request: Request) -> Response:
    from supervisor.web.workflow_view import work_tree, workflow_page

    session = _signed_in(request)
    if isinstance(session, Response):
        return session
    repo = await run_in_threadpool(repository_of, request)
    if repo is None:
        return PlainTextResponse("No such repository on this dashboard.", status_code=404)
    try:
        shown = await run_in_threadpool(workflow_page, repo, request.path_params["wf_id"])
    except SupervisorError as e:
        return PlainTextResponse(f"{e.message}\n{e.hint}", status_code=404)
    return HTMLResponse(
        page(
            "workflow.html",
            session=session,
            page=shown,
            tree=work_tree(shown),
            steps=listings.steps(shown.shown.steps),
            events=listings.events(shown.events),
            said=request.query_params.get("said"),
        )
    )


async def decide(request: Request) -> Response:
    """Approve, reject with a reason, or raise the budget; then resume, detached."""
    from supervisor.lifecycle.task_state import decide as decided

    found = await _checked(request)
    if isinstance(found, Response):
        return found
    session, repo, form = found
    wf_id = int(request.path_params["wf_id"])
    action = form.get("action")
    usd: float | None = None
    if action == "extend":
        try:
            usd = float(form.get("usd") or "")
        except ValueError:
            usd = None
        if usd is None or not 0 < usd <= 10_000:
            return PlainTextResponse("Give the budget's raise in dollars, above 0.", 400)
    elif action not in ("approve", "reject"):
        return PlainTextResponse("Unknown decision: approve, reject or extend.", 400)
    reason = (form.get("reason") or "").strip()[:REASON] or None
    if action == "reject" and reason is None:
        return PlainTextResponse("A rejection needs a reason: the next attempt reads it.", 400)
    try:
        await run_in_threadpool(
            lambda: decided(
                wf_id,
                repo.root,
                approve=action != "reject",
                reason=reason,
                approver=session.who,
                extend_usd=usd,
            )
        )
    except SupervisorError as e:
        return _back(repo, wf_id, f"{e.message} {e.hint}")
    if action == "approve" and await run_in_threadpool(_still_pending, repo, wf_id):
        said = "Your approval is recorded; the policy needs more approvers before it goes on."
        return _back(repo, wf_id, said)
    done = {"approve": "Approved", "reject": "Rejected"}.get(str(action), "Budget raised")
    return await _resumed(request, repo, wf_id, done)


def _still_pending(repo: Repository, wf_id: int) -> bool:
    """Whether an approval that needs several people still waits for others: then there is
    nothing for a resume to do yet."""
    from supervisor.lifecycle.task_state import reading

    with reading(repo.root) as state:
        approval = state.latest_approval(wf_id)
    return approval is not None and approval.status == "pending"


async def resume(request: Request) -> Response:
    found = await _checked(request)
    if isinstance(found, Response):
        return found
    _, repo, _ = found
    return await _resumed(request, repo, int(request.path_params["wf_id"]), "Resuming")


async def sync(request: Request) -> Response:
    """`supervisor pr sync <id>`, detached: the pull request's new comments and failing checks
    as the task's next round (supervisor/lifecycle/pr_sync.py)."""
    found = await _checked(request)
    if isinstance(found, Response):
        return found
    _, repo, _ = found
    wf_id = int(request.path_params["wf_id"])
    try:
        run = await run_in_threadpool(dashboard_of(request).sync, wf_id, repo.root)
    except SupervisorError as e:
        return _back(repo, wf_id, f"The sync did not start: {e.message} {e.hint}")
    return _back(repo, wf_id, f"`supervisor pr sync {wf_id}` runs (log: {run.log.name}).")


async def _resumed(request: Request, repo: Repository, wf_id: int, done: str) -> Response:
    try:
        run = await run_in_threadpool(dashboard_of(request).resume, wf_id, repo.root)
    except SupervisorError as e:
        return _back(repo, wf_id, f"{done}; the resume did not start: {e.message} {e.hint}")
    return _back(repo, wf_id, f"{done}; `supervisor resume {wf_id}` runs (log: {run.log.name}).")


def _back(repo: Repository, wf_id: int, said: str) -> Response:
    return RedirectResponse(
        f"/r/{repo.key}/w/{wf_id}?{urlencode({'said': said[:600]})}", status_code=303
    )


async def _checked(request: Request) -> tuple[Session, Repository, dict[str, str]] | Response:
    """The signed-in session, the repository and the form of a state-changing request whose
    CSRF token matches (its Origin was checked by the guard)."""
    session = signed_in(request)
    if session is None:
        return PlainTextResponse("Refused: sign in first.", status_code=403)
    form = await request.form(max_files=0, max_fields=8, max_part_size=8192)
    if not csrf_matches(session, str(form.get("csrf") or "")):
        return PlainTextResponse("Refused: the form's CSRF token is missing or wrong.", 403)
    repo = await run_in_threadpool(repository_of, request)
    if repo is None:
        return PlainTextResponse("No such repository on this dashboard.", status_code=404)
    return session, repo, {k: str(v) for k, v in form.items()}
