"""The dashboard is safe by default: nothing is read without signing in, a foreign Host is a
rebinding attack and is refused, a change needs this origin and the session's CSRF token, the
cookie is HttpOnly and SameSite=Strict, and no page carries inline script (the Content-Security-
Policy would refuse it anyway). The real browser's side of these is tests/test_web_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from web_support import ORIGIN, served

from supervisor.state.store import Store
from supervisor.web.guard import POLICY
from supervisor.web.serve import Options, WebOptionError, check


def test_nothing_is_shown_before_signing_in(tmp_path: Path) -> None:
    s = served(tmp_path)
    assert s.client.get("/", follow_redirects=False).headers["location"] == "/login"
    page = s.client.get(f"/r/{s.key}/w/{s.waiting}", follow_redirects=False)
    assert page.status_code == 303
    assert s.client.get(f"/r/{s.key}/w/{s.waiting}/stream").status_code == 403
    assert s.client.get("/stream/board").status_code == 403
    assert "check passwords" not in s.client.get("/login").text


def test_the_printed_token_signs_in_once_and_becomes_a_strict_httponly_cookie(
    tmp_path: Path,
) -> None:
    s = served(tmp_path)
    token = s.dashboard.sessions.login_token
    first = s.client.get(f"/?token={token}", follow_redirects=False)
    assert first.status_code == 303
    assert first.headers["location"] == "/"  # the token leaves the address bar
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback: a Secure cookie would never return
    assert "check passwords in login" in s.client.get("/").text

    s.client.cookies.clear()
    again = s.client.get(f"/?token={token}", follow_redirects=False)
    assert again.headers["location"] == "/login"
    assert (
        s.client.post("/login", data={"token": token}, headers={"origin": ORIGIN}).status_code
        == 403
    )


def test_over_tls_the_cookie_is_secure(tmp_path: Path) -> None:
    s = served(tmp_path, tls=True)
    answer = s.client.get(f"/?token={s.dashboard.sessions.login_token}", follow_redirects=False)
    assert "Secure" in answer.headers["set-cookie"]


@pytest.mark.parametrize("host", ["evil.example:8765", "127.0.0.1:9999", "attacker.test", ""])
def test_a_request_naming_another_host_is_refused_as_dns_rebinding(
    tmp_path: Path, host: str
) -> None:
    s = served(tmp_path)
    s.sign_in()
    answer = s.client.get("/", headers={"host": host})
    assert answer.status_code == 403
    assert "answers only as 127.0.0.1:8765" in answer.text
    assert "check passwords" not in answer.text
    assert answer.headers["content-security-policy"] == POLICY


def test_localhost_names_the_same_loopback_server(tmp_path: Path) -> None:
    s = served(tmp_path)
    s.sign_in()
    assert s.client.get("/", headers={"host": "localhost:8765"}).status_code == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:9999", "null", None])
def test_a_change_from_another_origin_or_none_is_refused(
    tmp_path: Path, origin: str | None
) -> None:
    s = served(tmp_path)
    csrf = s.sign_in()
    answer = s.post(f"/r/{s.key}/w/{s.waiting}/decide", {"csrf": csrf, "action": "approve"}, origin)
    assert answer.status_code == 403  # type: ignore[attr-defined]
    assert _approval(s.root, s.waiting) == "pending"


@pytest.mark.parametrize("csrf", ["", "guessed", None])
def test_a_change_without_the_sessions_csrf_token_is_refused(
    tmp_path: Path, csrf: str | None
) -> None:
    s = served(tmp_path)
    s.sign_in()
    data = {"action": "approve"} | ({"csrf": csrf} if csrf is not None else {})
    answer = s.post(f"/r/{s.key}/w/{s.waiting}/decide", data)
    assert answer.status_code == 403  # type: ignore[attr-defined]
    assert "CSRF" in answer.text  # type: ignore[attr-defined]
    assert _approval(s.root, s.waiting) == "pending"


def test_a_change_without_a_session_is_refused_even_with_a_token_from_elsewhere(
    tmp_path: Path,
) -> None:
    s = served(tmp_path)
    csrf = s.sign_in()
    s.client.cookies.clear()
    answer = s.post(f"/r/{s.key}/w/{s.waiting}/decide", {"csrf": csrf, "action": "approve"})
    assert answer.status_code == 403  # type: ignore[attr-defined]
    assert _approval(s.root, s.waiting) == "pending"


def test_every_page_has_the_strict_policy_and_no_inline_script(tmp_path: Path) -> None:
    s = served(tmp_path)
    s.sign_in()
    for path in ("/", f"/r/{s.key}/w/{s.waiting}", "/login", "/static/app.js"):
        answer = s.client.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["content-security-policy"] == POLICY
        assert answer.headers["x-frame-options"] == "DENY"
        assert "'unsafe-inline'" not in POLICY
        for tag in re.findall(r"<script[^>]*>", answer.text):
            assert 'src="/static/' in tag, tag  # script only from the server's own files
        assert " style=" not in answer.text and "<style" not in answer.text


def test_a_worker_s_markup_is_shown_as_text_everywhere_it_appears(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\x1b[31m\u202e"

    def spoil(root: Path, wf_id: int) -> None:
        from supervisor.state.store import EventSpec

        with Store(root / ".supervisor" / "state.db") as store:
            review = {"output": {"summary": hostile, "issues": [{"description": hostile}]}}
            store.add_event(
                wf_id,
                EventSpec("review", step="review", role=hostile, status="APPROVED", payload=review),
            )
            store.add_event(
                wf_id,
                EventSpec(
                    "gate",
                    step="test",
                    status="failed",
                    payload={"command": hostile, "output_tail": hostile},
                ),
            )

    s = served(tmp_path, change=spoil)
    s.sign_in()
    for path in ("/", f"/r/{s.key}/w/{s.waiting}"):
        text = s.client.get(path).text
        assert "<script>alert" not in text
        assert "<img src=x" not in text
        assert "\x1b" not in text and "\u202e" not in text
    page = s.client.get(f"/r/{s.key}/w/{s.waiting}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\\x1b[31m" in page and "\\u202e" in page  # shown, not obeyed


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (Options(repo=Path(), host="192.0.2.7"), "clear text"),
        (Options(repo=Path(), host="0.0.0.0"), "every address"),
        (Options(repo=Path(), host="::"), "every address"),
        (Options(repo=Path(), host="192.0.2.7", tls_cert=Path("cert.pem")), "both"),
    ],
)
def test_it_listens_beyond_loopback_only_over_tls_or_when_told_plainly(
    options: Options, said: str
) -> None:
    with pytest.raises(WebOptionError, match=said):
        check(options)


def test_plain_http_beyond_loopback_is_allowed_when_asked_for_by_name() -> None:
    check(Options(repo=Path(), host="192.0.2.7", insecure_http=True))
    check(Options(repo=Path(), host="localhost"))
    check(Options(repo=Path(), host="::1"))


def _approval(root: Path, wf_id: int) -> str:
    with Store(root / ".supervisor" / "state.db") as store:
        approval = store.latest_approval(wf_id)
    assert approval is not None
    return approval.status
