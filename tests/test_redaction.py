"""Secret redaction: every kind is caught and counted, ordinary code is left alone."""

from __future__ import annotations

import pytest

from supervisor.redaction import is_secret_file, redact

PLANTED = {
    "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----",
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key": 'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    "openai_key": "sk-proj-Zq8r2LmX9vT4kP7wYb3NcD5e",
    "anthropic_key": "sk-ant-api03-Zq8r2LmX9vT4kP7wYb3NcD5e",
    "github_token": "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789AB",
    "slack_token": "xoxp-2741236540-Zq8r2LmX9vT4",
    "slack_webhook": "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXX",
    "google_api_key": "AIzaSyDq8Zr2LmX9vT4kP7wYb3NcD5eFg6HjK1L",
    "stripe_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n",
    "high_entropy_secret": 'client_secret: "Zx8Kq2LmX9vT4kP7wYb3N5"',
    "password": 'DB_PASSWORD="correct horse"'.replace(" ", "-"),
}
SECRET_VALUES = {
    "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "high_entropy_secret": "Zx8Kq2LmX9vT4kP7wYb3N5",
    "password": "correct-horse",
    "private_key": "b3BlbnNzaC1rZXktdjEAAAAA",
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_each_kind_of_secret_is_removed_and_counted(kind: str) -> None:
    text = f"config line before\n{PLANTED[kind]}\nconfig line after\n"
    redacted, counts = redact(text)
    secret = SECRET_VALUES.get(kind, PLANTED[kind])
    assert secret not in redacted
    assert counts.get(kind) == 1, counts
    assert f"[REDACTED:{kind}]" in redacted
    assert "config line before" in redacted and "config line after" in redacted
    assert secret not in str(counts)


def test_only_the_password_of_a_url_goes() -> None:
    redacted, counts = redact("DATABASE_URL=postgres://app:Sup3rS3cretPw@db:5432/app")
    assert redacted == "DATABASE_URL=postgres://app:[REDACTED:url_password]@db:5432/app"
    assert counts == {"url_password": 1}


@pytest.mark.parametrize(
    "text",
    [
        "def get_token(self):\n    return self._token",
        'password = os.environ["PASSWORD"]',
        "token: ${TOKEN}",
        'password = "changeme"',
        'api_key = "<your-api-key>"',
        "commit = 3f786850e387550fdab836ed7e6dc881de23001b",
        'id = "123e4567-e89b-12d3-a456-426614174000"',
        "see https://example.com/docs:intro for more",
        '"input_tokens": result.input_tokens,',
        "auth_header = build_header(user)",
    ],
)
def test_ordinary_code_is_left_alone(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        (".env", True),
        ("services/api/.env.production", True),
        (".env.example", False),
        ("certs/server.pem", True),
        ("deploy/id_ed25519", True),
        ("home/.npmrc", True),
        ("src/env.py", False),
        ("docs/keys.md", False),
    ],
)
def test_secret_files_are_recognised_by_name(path: str, secret: bool) -> None:
    assert is_secret_file(path) is secret
