"""Scripted GitHub and GitLab APIs on 127.0.0.1, for the forge specs: the real client libraries
(PyGithub, python-gitlab) are pointed at them, as the real CLIs are pointed at the scripted
model API (supervisor/fakeapi/).

Each answers from the state a spec gives it (repositories, issues, who may write) and refuses
what the real one refuses: no or a wrong token is 401, an unknown repository or issue 404, a
second open pull request for the same head 422 ("A pull request already exists"), a second open
merge request for the same source branch 409. Every request is recorded (its token only as
whether it was the right one) so a spec can say what the forge was asked.
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
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = _serve


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
            author = next(
                (i["author"] for i in repo.issues.values() if str(i["author"]["id"]) == member[1]),
                None,
            )
            if author is None or author["username"] not in repo.writers:
                return 404, {"message": "404 Not found"}
            return 200, {"id": author["id"], "username": author["username"], "access_level": 30}
        return 404, {"message": "404 Not found"}

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
