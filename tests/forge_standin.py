"""Scripted GitHub and GitLab APIs on 127.0.0.1, for the forge specs: the real client libraries
(PyGithub, python-gitlab) are pointed at them, as the real CLIs are pointed at the scripted
model API (supervisor/fakeapi/).

Each answers from the state a spec gives it (repositories, issues, who may write) and refuses
what the real one refuses: no or a wrong token is 401, an unknown repository or issue 404, a
second open pull request for the same head 422 ("A pull request already exists"), a second open
merge request for the same source branch 409. Pull requests carry review comments, comments on
the conversation and failing checks (GitHub's check runs; GitLab's discussions, pipelines, jobs
and job traces), and a reply is added where the real forge adds it. Every request is recorded
(its token only as whether it was the right one) so a spec can say what the forge was asked.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    body: dict[str, Any]
    headers: dict[str, str]
    authorized: bool


@dataclass
class Repo:
    path: str
    writers: set[str] = field(default_factory=set)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    review_comments: list[dict[str, Any]] = field(default_factory=list)
    """GitHub: comments on a pull request's diff (`pull` names the pull request's number)."""
    issue_comments: list[dict[str, Any]] = field(default_factory=list)
    """GitHub: comments on a pull request's conversation (`pull`)."""
    check_runs: list[dict[str, Any]] = field(default_factory=list)
    """GitHub: check runs (`head_sha` names the commit)."""
    discussions: list[dict[str, Any]] = field(default_factory=list)
    """GitLab: a merge request's discussions (`mr` names its iid), each with its notes."""
    pipelines: list[dict[str, Any]] = field(default_factory=list)
    """GitLab: pipelines (`mr`, `sha`), each with its `jobs` (`trace`: the job's log)."""


class _Standin:
    """The HTTP server and recording both forges share; a subclass routes."""

    def __init__(self, token: str, *repos: Repo) -> None:
        self.token = token
        self.repos = {r.path: r for r in repos}
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"standin": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def authorized(self, headers: dict[str, str]) -> bool:
        raise NotImplementedError

    def route(self, seen: Seen) -> tuple[int, Any]:
        raise NotImplementedError

    def requests(self, method: str | None = None) -> list[Seen]:
        return [s for s in self.seen if method is None or s.method == method]


class _Handler(BaseHTTPRequestHandler):
    standin: _Standin

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        s = self.standin
        seen = Seen(
            self.command, parts.path, parse_qs(parts.query), body, headers, s.authorized(headers)
        )
        with s.lock:
            s.seen.append(seen)
            status, answer = (
                (401, {"message": "Bad credentials"}) if not seen.authorized else s.route(seen)
            )
        text = isinstance(answer, bytes)  # a job's trace: plain text, as GitLab sends it
        data = answer if text else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = _serve


REPLIER = "token-owner"
"""Who the token is: the author of every comment the supervisor writes (a writer)."""


class GitHubStandin(_Standin):
    """GitHub's REST API as GitHub Enterprise serves it, at `api_url` (`.../api/v3`)."""

    @property
    def api_url(self) -> str:
        return f"{self.origin}/api/v3"

    def authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("authorization") in (f"token {self.token}", f"Bearer {self.token}")

    def route(self, seen: Seen) -> tuple[int, Any]:
        found = re.fullmatch(r"/api/v3/repos/([^/]+/[^/]+)(/.*)?", seen.path)
        repo = self.repos.get(found[1]) if found else None
        if found is None or repo is None:
            return 404, {"message": "Not Found"}
        rest, base = found[2] or "", f"{self.api_url}/repos/{repo.path}"
        if rest == "" and seen.method == "GET":
            owner, name = repo.path.split("/")
            return 200, {
                "full_name": repo.path,
                "name": name,
                "url": base,
                "owner": {"login": owner},
            }
        if rest == "/pulls" and seen.method == "GET":
            head = (seen.query.get("head") or [""])[0].split(":", 1)[-1]
            state = (seen.query.get("state") or ["open"])[0]
            return 200, [p for p in repo.pulls if p["head"]["ref"] == head and p["state"] == state]
        if rest == "/pulls" and seen.method == "POST":
            return self._create(repo, base, seen.body)
        edit = re.fullmatch(r"/pulls/(\d+)", rest)
        if edit and seen.method == "PATCH":
            pr = next((p for p in repo.pulls if p["number"] == int(edit[1])), None)
            if pr is None:
                return 404, {"message": "Not Found"}
            pr.update({k: v for k, v in seen.body.items() if k in ("title", "body")})
            return 200, pr
        pulled = self._pull_request(repo, base, rest, seen)
        if pulled is not None:
            return pulled
        issue = re.fullmatch(r"/issues/(\d+)", rest)
        if issue and seen.method == "GET":
            item = repo.issues.get(int(issue[1]))
            return (
                (200, {**item, "url": f"{base}/issues/{issue[1]}"})
                if item
                else (404, {"message": "Not Found"})
            )
        permission = re.fullmatch(r"/collaborators/([^/]+)/permission", rest)
        if permission and seen.method == "GET":
            login = unquote(permission[1])
            return 200, {
                "permission": "write" if login in repo.writers else "read",
                "user": {"login": login},
            }
        return 404, {"message": "Not Found"}

    def _pull_request(self, repo: Repo, base: str, rest: str, seen: Seen) -> tuple[int, Any] | None:
        """A pull request, its comments and replies, and a commit's check runs."""
        one = re.fullmatch(r"/pulls/(\d+)", rest)
        if one and seen.method == "GET":
            pr = next((p for p in repo.pulls if p["number"] == int(one[1])), None)
            return (200, pr) if pr else (404, {"message": "Not Found"})
        review = re.fullmatch(r"/pulls/(\d+)/comments", rest)
        if review and seen.method == "GET":
            return 200, [c for c in repo.review_comments if c["pull"] == int(review[1])]
        reply = re.fullmatch(r"/pulls/(\d+)/comments/(\d+)/replies", rest)
        if reply and seen.method == "POST":
            to = next((c for c in repo.review_comments if c["id"] == int(reply[2])), None)
            if to is None:
                return 404, {"message": "Not Found"}
            made = github_comment(
                9000 + len(repo.review_comments), int(reply[1]), REPLIER, seen.body["body"],
                path=to["path"], in_reply_to=to["id"],
            )  # fmt: skip
            repo.review_comments.append(made)
            return 201, made
        conversation = re.fullmatch(r"/issues/(\d+)/comments", rest)
        if conversation and seen.method == "GET":
            return 200, [c for c in repo.issue_comments if c["pull"] == int(conversation[1])]
        if conversation and seen.method == "POST":
            made = github_comment(
                8000 + len(repo.issue_comments), int(conversation[1]), REPLIER, seen.body["body"]
            )
            repo.issue_comments.append(made)
            return 201, made
        commit = re.fullmatch(r"/commits/([0-9a-f]{40})", rest)
        if commit and seen.method == "GET":
            return 200, {"sha": commit[1], "url": f"{base}/commits/{commit[1]}"}
        checks = re.fullmatch(r"/commits/([0-9a-f]{40})/check-runs", rest)
        if checks and seen.method == "GET":
            runs = [r for r in repo.check_runs if r["head_sha"] == checks[1]]
            return 200, {"total_count": len(runs), "check_runs": runs}
        return None

    def _create(self, repo: Repo, base: str, body: dict[str, Any]) -> tuple[int, Any]:
        if any(p["head"]["ref"] == body.get("head") and p["state"] == "open" for p in repo.pulls):
            return 422, {
                "message": "Validation Failed",
                "errors": [{"resource": "PullRequest", "code": "custom",
                            "message": f"A pull request already exists for {body.get('head')}."}],
            }  # fmt: skip
        number = len(repo.pulls) + 1
        pr = {
            "number": number, "state": "open", "title": body.get("title"), "body": body.get("body"),
            "draft": bool(body.get("draft")), "head": {"ref": body.get("head")},
            "base": {"ref": body.get("base")}, "url": f"{base}/pulls/{number}",
            "issue_url": f"{base}/issues/{number}",
            "html_url": f"https://github.example/{repo.path}/pull/{number}",
        }  # fmt: skip
        repo.pulls.append(pr)
        return 201, pr


class GitLabStandin(_Standin):
    """GitLab's REST API (v4) at `api_url`."""

    @property
    def api_url(self) -> str:
        return self.origin

    def authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("private-token") == self.token

    def route(self, seen: Seen) -> tuple[int, Any]:
        found = re.fullmatch(r"/api/v4/projects/([^/]+)(/.*)?", seen.path)
        key = unquote(found[1]) if found else ""
        ids = {str(i + 1): r for i, r in enumerate(self.repos.values())}
        repo = self.repos.get(key) or ids.get(key)
        if found is None or repo is None:
            return 404, {"message": "404 Project Not Found"}
        pid = next(i for i, r in ids.items() if r is repo)
        rest = found[2] or ""
        if rest == "" and seen.method == "GET":
            return 200, {"id": int(pid), "path_with_namespace": repo.path}
        if rest == "/merge_requests" and seen.method == "GET":
            q = {k: v[0] for k, v in seen.query.items()}
            source, state = q.get("source_branch"), q.get("state")
            return 200, [
                m for m in repo.pulls
                if m["source_branch"] == source and m["state"] == (state or m["state"])
            ]  # fmt: skip
        if rest == "/merge_requests" and seen.method == "POST":
            return self._create(repo, int(pid), seen.body)
        edit = re.fullmatch(r"/merge_requests/(\d+)", rest)
        if edit and seen.method == "PUT":
            mr = next((m for m in repo.pulls if m["iid"] == int(edit[1])), None)
            if mr is None:
                return 404, {"message": "404 Not found"}
            mr.update({k: v for k, v in seen.body.items() if k in ("title", "description")})
            return 200, mr
        issue = re.fullmatch(r"/issues/(\d+)", rest)
        if issue and seen.method == "GET":
            item = repo.issues.get(int(issue[1]))
            return (200, item) if item else (404, {"message": "404 Not found"})
        member = re.fullmatch(r"/members/all/(\d+)", rest)
        if member and seen.method == "GET":
            authors = [i["author"] for i in repo.issues.values()]
            authors += [n["author"] for d in repo.discussions for n in d["notes"]]
            author = next((a for a in authors if str(a["id"]) == member[1]), None)
            if author is None or author["username"] not in repo.writers:
                return 404, {"message": "404 Not found"}
            return 200, {"id": author["id"], "username": author["username"], "access_level": 30}
        merge_request = self._merge_request(repo, rest, seen)
        return merge_request or (404, {"message": "404 Not found"})

    def _merge_request(self, repo: Repo, rest: str, seen: Seen) -> tuple[int, Any] | None:
        """A merge request's discussions and notes, its pipelines, their jobs and traces."""
        listed = re.fullmatch(r"/merge_requests/(\d+)/discussions", rest)
        if listed and seen.method == "GET":
            return 200, [d for d in repo.discussions if d["mr"] == int(listed[1])]
        note = re.fullmatch(r"/merge_requests/(\d+)/discussions/([^/]+)/notes", rest)
        if note and seen.method == "POST":
            found = next((d for d in repo.discussions if d["id"] == note[2]), None)
            if found is None:
                return 404, {"message": "404 Not found"}
            made = gitlab_note(7000 + len(found["notes"]), REPLIER, 1, seen.body["body"])
            found["notes"].append(made)
            return 201, made
        top = re.fullmatch(r"/merge_requests/(\d+)/notes", rest)
        if top and seen.method == "POST":
            made = gitlab_note(6000 + len(repo.discussions), REPLIER, 1, seen.body["body"])
            repo.discussions.append(gitlab_discussion(f"d{made['id']}", int(top[1]), made))
            return 201, made
        pipelines = re.fullmatch(r"/merge_requests/(\d+)/pipelines", rest)
        if pipelines and seen.method == "GET":
            shown = [{k: v for k, v in p.items() if k != "jobs"} for p in repo.pipelines]
            return 200, [p for p in shown if p["mr"] == int(pipelines[1])]
        jobs = re.fullmatch(r"/pipelines/(\d+)/jobs", rest)
        if jobs and seen.method == "GET":
            found = next((p for p in repo.pipelines if p["id"] == int(jobs[1])), None)
            if found is None:
                return 404, {"message": "404 Not found"}
            scope = seen.query.get("scope") or seen.query.get("scope[]") or []
            listed_jobs = [
                {k: v for k, v in j.items() if k != "trace"}
                for j in found["jobs"]
                if not scope or j["status"] in scope
            ]
            return 200, listed_jobs
        trace = re.fullmatch(r"/jobs/(\d+)/trace", rest)
        if trace and seen.method == "GET":
            job = next(
                (j for p in repo.pipelines for j in p["jobs"] if j["id"] == int(trace[1])), None
            )
            return (200, job["trace"].encode()) if job else (404, {"message": "404 Not found"})
        return None

    def _create(self, repo: Repo, pid: int, body: dict[str, Any]) -> tuple[int, Any]:
        source = body.get("source_branch")
        if any(m["source_branch"] == source and m["state"] == "opened" for m in repo.pulls):
            return 409, {
                "message": ["Another open merge request already exists for this source branch: !1"]
            }
        iid = len(repo.pulls) + 1
        mr = {
            "id": 100 + iid, "iid": iid, "project_id": pid, "state": "opened",
            "title": body.get("title"), "description": body.get("description"),
            "source_branch": source, "target_branch": body.get("target_branch"),
            "web_url": f"https://gitlab.example/{repo.path}/-/merge_requests/{iid}",
        }  # fmt: skip
        repo.pulls.append(mr)
        return 201, mr


def github_issue(number: int, title: str, body: str, login: str) -> dict[str, Any]:
    return {
        "number": number, "title": title, "body": body, "user": {"login": login},
        "html_url": f"https://github.example/issues/{number}", "state": "open",
    }  # fmt: skip


def gitlab_issue(number: int, title: str, body: str, username: str, user_id: int) -> dict[str, Any]:
    return {
        "iid": number, "id": 500 + number, "title": title, "description": body,
        "author": {"id": user_id, "username": username},
        "web_url": f"https://gitlab.example/issues/{number}", "state": "opened",
    }  # fmt: skip


def github_comment(
    id: int, pull: int, login: str, body: str, *, path: str = "", in_reply_to: int | None = None
) -> dict[str, Any]:
    """A comment on pull request `pull`: on its diff when `path` is given, else on its
    conversation."""
    made: dict[str, Any] = {"id": id, "pull": pull, "user": {"login": login}, "body": body}
    if path:
        made.update({"path": path, "line": 1, "in_reply_to_id": in_reply_to})
    return made


def github_check(id: int, sha: str, name: str, conclusion: str, log: str) -> dict[str, Any]:
    return {
        "id": id, "head_sha": sha, "name": name, "status": "completed", "conclusion": conclusion,
        "output": {"title": f"{name}: {conclusion}", "summary": log, "text": None},
    }  # fmt: skip


def gitlab_note(id: int, username: str, user_id: int, body: str) -> dict[str, Any]:
    return {
        "id": id, "body": body, "system": False,
        "author": {"id": user_id, "username": username},
    }  # fmt: skip


def gitlab_discussion(id: str, mr: int, *notes: dict[str, Any]) -> dict[str, Any]:
    return {"id": id, "mr": mr, "individual_note": len(notes) == 1, "notes": list(notes)}
