"""Secret redaction: every kind of secret is removed and counted, ordinary code is left alone."""

from __future__ import annotations

import pytest
from secret_samples import SAMPLES

from supervisor.core.redaction import (
    EXTRA_PATTERNS,
    PATTERNS,
    detect_secrets_rules,
    entropy,
    is_secret_file,
    redact,
    redact_value,
    rules,
)

# kind -> (line as it would appear in a file, the secret that must not survive).
PLANTED: dict[str, tuple[str, str]] = {
    "private_key/openssh": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    ),
    "private_key/rsa": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzq8r2LmX9vT4kP7wYb3N\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAzq8r2LmX9vT4kP7wYb3N",
    ),
    "private_key/ec": (
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBn\n"
        "-----END EC PRIVATE KEY-----",
        "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBn",
    ),
    "private_key/pgp": (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0vQ3kBCADq8Zr2LmX9vT4kP7w\n"
        "-----END PGP PRIVATE KEY BLOCK-----",
        "lQOYBF0vQ3kBCADq8Zr2LmX9vT4kP7w",
    ),
    "private_key/json-escaped": (
        '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEF\\n'
        '-----END PRIVATE KEY-----\\n",',
        "MIIEvQIBADANBgkqhkiG9w0BAQEF",
    ),
    "aws_access_key_id/akia": ("AWS_KEY_ID = 'AKIAIOSFODNN7EXAMPLE'", "AKIAIOSFODNN7EXAMPLE"),
    "aws_access_key_id/asia": ("key: ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    "aws_secret_access_key/python": (
        'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "aws_secret_access_key/env": (
        "AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    ),
    "openai_key/project": (
        "OPENAI = 'sk-proj-Zq8r2LmX9vT4kP7wYb3NcD5e'",
        "Zq8r2LmX9vT4kP7wYb3NcD5e",
    ),
    "openai_key/legacy": (
        "client = OpenAI(api_key='sk-T3BlbkFJq8r2LmX9vT4kP7wYb3N')",
        "sk-T3BlbkFJq8r2LmX9vT4kP7wYb3N",
    ),
    "anthropic_key": (
        "ANTHROPIC = 'sk-ant-api03-Zq8r2LmX9vT4kP7wYb3NcD5e'",
        "Zq8r2LmX9vT4kP7wYb3NcD5e",
    ),
    "github_token/classic": (
        "GH = 'ghp_Zq8r2LmX9vT4kP7wYb3NcD5eFg6HjK1LmN0p'",
        "ghp_Zq8r2LmX9vT4kP7wYb3NcD5eFg6HjK1LmN0p",
    ),
    "github_token/app": (
        "installation: ghs_16C7e42F292c6912E7710c838347Ae178B4a",
        "ghs_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    "github_token/fine-grained": (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789AB",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789AB",
    ),
    "slack_token": ("SLACK = 'xoxb-2741236540-Zq8r2LmX9vT4'", "xoxb-2741236540-Zq8r2LmX9vT4"),
    "slack_webhook": (
        "notify: https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    ),
    "google_api_key": (
        "maps_key = 'AIzaSyDq8Zr2LmX9vT4kP7wYb3NcD5eFg6HjK1L'",
        "AIzaSyDq8Zr2LmX9vT4kP7wYb3NcD5eFg6HjK1L",
    ),
    "stripe_key/secret": (
        "stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc'",
        "4eC39HqLyjWDarjtT1zdp7dc",
    ),
    "stripe_key/restricted": (
        "STRIPE = 'rk_live_51H8q2LmX9vT4kP7wYb3Nc'",
        "51H8q2LmX9vT4kP7wYb3Nc",
    ),
    "jwt": (
        "session = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n'",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n",
    ),
    "bearer_token": (
        "curl -H 'Authorization: Bearer q8Zr2LmX9vT4kP7wYb3NcD5e' https://api.example.com",
        "q8Zr2LmX9vT4kP7wYb3NcD5e",
    ),
    "url_password": ("DATABASE_URL=postgres://app:Sup3rS3cretPw@db:5432/app", "Sup3rS3cretPw"),
    "high_entropy_secret/python": (
        'API_TOKEN = "q8Zr2LmX9vT4kP7wYb3NcD5e"',
        "q8Zr2LmX9vT4kP7wYb3NcD5e",
    ),
    "high_entropy_secret/yaml": (
        "  client_secret: Zx8Kq2LmX9vT4kP7wYb3N5",
        "Zx8Kq2LmX9vT4kP7wYb3N5",
    ),
    "high_entropy_secret/env": ("export AUTH=Zx8Kq2LmX9vT4kP7wYb3N5", "Zx8Kq2LmX9vT4kP7wYb3N5"),
    "high_entropy_secret/json": (
        '{"user": "bob", "apiKey": "a8f5f167f44f4964e6c998dee827110c"}',
        "a8f5f167f44f4964e6c998dee827110c",
    ),
    "high_entropy_secret/header-name": (
        "headers = {'X-Api-Key': 'Zx8Kq2LmX9vT4kP7wYb3N5'}",
        "Zx8Kq2LmX9vT4kP7wYb3N5",
    ),
    "password/env": ("DB_PASSWORD=correct-horse-9", "correct-horse-9"),
    "password/yaml": ("  password: hunter2hunter2", "hunter2hunter2"),
    "password/quoted": ('db_password = "tr0ub4dor&3"', "tr0ub4dor"),
}


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_every_kind_of_secret_is_removed_and_counted(case: str) -> None:
    line, secret = PLANTED[case]
    kind = case.split("/")[0]
    redacted, counts = redact(f"config line before\n{line}\nconfig line after\n")
    assert secret not in redacted
    assert counts == {kind: 1}
    assert f"[REDACTED:{kind}]" in redacted
    assert redacted.startswith("config line before\n")
    assert redacted.endswith("\nconfig line after\n")


def test_the_counts_never_hold_a_secret() -> None:
    text = "\n".join(line for line, _ in PLANTED.values())
    redacted, counts = redact(text)
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in counts.items())
    assert sum(counts.values()) == len(PLANTED)
    for _, secret in PLANTED.values():
        assert secret not in redacted
        assert secret not in repr(counts)


def test_only_the_password_of_a_url_goes_user_and_host_stay() -> None:
    redacted, counts = redact("DATABASE_URL=postgres://app:Sup3rS3cretPw@db:5432/app")
    assert redacted == "DATABASE_URL=postgres://app:[REDACTED:url_password]@db:5432/app"
    assert counts == {"url_password": 1}


def test_the_surroundings_of_an_assigned_secret_are_kept() -> None:
    text = 'connect(host="db", token="q8Zr2LmX9vT4kP7wYb3NcD5e", retries=3)'
    assert redact(text) == (
        'connect(host="db", token="[REDACTED:high_entropy_secret]", retries=3)',
        {"high_entropy_secret": 1},
    )


def test_a_private_key_cut_short_is_still_removed() -> None:
    text = "KEY = '''-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzq8r2LmX9vT4kP7w\nYb3NcD5e"
    redacted, counts = redact(text)
    assert "MIIEowIBAAKCAQEA" not in redacted and "Yb3NcD5e" not in redacted
    assert counts == {"private_key": 1}


def test_a_secret_already_caught_by_its_prefix_is_counted_once() -> None:
    redacted, counts = redact("GITHUB_TOKEN=ghp_Zq8r2LmX9vT4kP7wYb3NcD5eFg6HjK1LmN0p")
    assert redacted == "GITHUB_TOKEN=[REDACTED:github_token]"
    assert counts == {"github_token": 1}


@pytest.mark.parametrize(
    "text",
    [
        "def get_token(self) -> str:\n    return self._token",
        'password = os.environ["PASSWORD"]',
        "password = os.getenv('DB_PASSWORD', '')",
        "token: ${TOKEN}",
        "api_key: ${{ secrets.API_KEY }}",
        'const token = process.env.GITHUB_TOKEN ?? "";',
        'password = "changeme"',
        "password: <your-password>",
        'api_key = "<your-api-key>"',
        "SECRET_KEY=xxxxxxxxxxxxxxxxxxxxxxxx",
        'password = "********"',
        "password = user_password",
        "    password: SecretStr",
        "password: Optional[str] = None",
        "token = tokens[0]",
        "api_key = generate_api_key(user)",
        'auth_error = "Authentication failed for this user"',
        'AUTH_BACKEND = "django.contrib.auth.backends.ModelBackend"',
        'token_url = "https://oauth2.googleapis.com/token"',
        'private_key_path = "/var/run/secrets/deploy_key_2024"',
        'auth_contact = "security-team-2024@example.com"',
        "max_tokens = 4096",
        'author = "Jane Doe"',
        'tokenizer = "cl100k_base_v2024"',
        "commit = 3f786850e387550fdab836ed7e6dc881de23001b",
        'id = "123e4567-e89b-12d3-a456-426614174000"',
        "see https://example.com/docs:intro for more",
        "git clone https://github.com/acme/widgets.git",
        "DATABASE_URL=postgres://app:${DB_PASSWORD}@db:5432/app",
        '"input_tokens": result.input_tokens,',
        "auth_header = build_header(user)",
        "Use a Bearer token in the Authorization header.",
        "task-description-for-the-whole-project-2024",
        # This repository's own former false positives (benchmarks/redaction_fp.py):
        "`state.url: postgresql+psycopg://user:pass@host/db` (the user's own",
        'return f"postgresql+psycopg://{USER}:{self.password}@127.0.0.1:{self.port}/{db}"',
        "(`ANTHROPIC_API_KEY=sk-supervisor-<32 hex>`) and a plain-HTTP base URL",
        "SUPERVISOR_STATE_URL=postgresql+psycopg://supervisor:supervisor@127.0.0.1:5432/pg",
    ],
)
def test_ordinary_code_and_placeholders_are_left_alone(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://supervisor:s3cr3t-Pa55@db/app",
        "https://deploy:passw0rd!@example.com/x",
        "https://ci:{hunter2@example.com/x",  # a brace, but no template field
    ],
)
def test_a_url_password_that_is_no_placeholder_or_default_is_still_redacted(url: str) -> None:
    redacted, counts = redact(url)
    assert counts == {"url_password": 1}, redacted
    assert "@" in redacted and redacted.split("://")[0] == url.split("://")[0]


def test_base64_image_data_in_a_data_uri_is_left_alone() -> None:
    """It is neither a known prefix nor assigned to a secret's name: redacting it would only
    waste the reader's attention."""
    image = (
        '<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4'
        '2mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==">'
    )
    assert redact(image) == (image, {})


def test_entropy_separates_keys_from_words() -> None:
    assert entropy("q8Zr2LmX9vT4kP7wYb3NcD5e") >= 3.5
    assert entropy("changeme") < 3.5
    assert entropy("aaaaaaaaaaaaaaaa") == 0


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        (".env", True),
        ("services/api/.env.production", True),
        (".env.local", True),
        (".env.example", False),
        (".env.sample", False),
        (".env.template", False),
        ("certs/server.pem", True),
        ("tls/server.key", True),
        ("signing/cert.p12", True),
        ("signing/cert.pfx", True),
        ("android/release.keystore", True),
        ("deploy/id_rsa", True),
        ("deploy/id_ed25519", True),
        ("home/.npmrc", True),
        (".pypirc", True),
        (".netrc", True),
        ("gcp/credentials.json", True),
        ("src/env.py", False),
        ("docs/keys.md", False),
        ("src/keyboard.ts", False),
        ("environment.yml", False),
    ],
)
def test_secret_files_are_recognised_by_name(path: str, secret: bool) -> None:
    assert is_secret_file(path) is secret


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_kind_the_issue_names_is_removed_and_counted(name: str) -> None:
    kind, line, secret = SAMPLES[name]
    redacted, counts = redact(f"before\n{line}\nafter\n")
    assert secret not in redacted
    assert counts == {kind: 1}
    assert redacted.startswith("before\n") and redacted.endswith("\nafter\n")


def test_the_rule_set_is_detect_secrets_plus_ours() -> None:
    kinds = {kind for kind, _ in detect_secrets_rules()}
    assert {"gitlab_token", "sendgrid_api_key", "telegram_bot_token"} <= kinds
    assert len(rules()) == len(PATTERNS) + len(detect_secrets_rules()) + len(EXTRA_PATTERNS)


def test_redact_value_cleans_every_string_of_a_payload() -> None:
    _, line, secret = SAMPLES["gitlab"]
    payload = {"output_tail": f"FAILED\n{line}", "nested": [{"error": line}], "n": 3, "ok": None}
    clean, counts = redact_value(payload)
    assert secret not in repr(clean)
    assert clean["n"] == 3 and clean["ok"] is None
    assert counts == {"gitlab_token": 2}


def test_a_value_stored_again_is_redacted_and_counted_again() -> None:
    """A workflow's context is stored at every transition: the same strings, every time."""
    _, line, secret = SAMPLES["gitlab"]
    long_line = line + "\n" + "x" * 5000  # past the strings redacted once per process
    payload = {"plan": line, "log": long_line, "same": [line, line]}
    for _ in range(3):
        clean, counts = redact_value(payload)
        assert secret not in repr(clean)
        assert clean["plan"] == redact(line)[0] and clean["log"] == redact(long_line)[0]
        assert counts == {"gitlab_token": 4}


@pytest.mark.parametrize(
    "text",
    [
        "from huggingface_hub import hf_hub_download",
        "Create a GitLab token (it starts with glpat-) and paste it here.",
        "mysql -u root -p shop",
        "mysql -h db -P 3306 -u app shop",
        "mysqldump --password=$DB_PASSWORD shop",
        'mysql --password="${MYSQL_PWD}" shop',
        'cache_key = "user_profile_settings_v2"',
        "primary_key = Column(Integer, primary_key=True)",
        'public_key = "ssh-ed25519-placeholder"',
        "ENCRYPTION_KEY = os.environ['ENCRYPTION_KEY']",
        "    client-key-data: ${CLIENT_KEY_DATA}",
        "def whsec_header(): ...",
        "release notes for do_v1_migration",
    ],
)
def test_new_kinds_leave_look_alikes_alone(text: str) -> None:
    assert redact(text) == (text, {})


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        (".envrc", True),
        ("infra/prod.tfvars", True),
        ("infra/prod.auto.tfvars.json", True),
        ("certs/server.pem", True),
        ("certs/client.p12", True),
        ("home/.ssh/id_ed25519_sk", True),
        ("home/.ssh/id_rsa.pub", False),
        ("src/id_utils.py", False),
        (".npmrc", True),
        (".pypirc", True),
        (".netrc", True),
        ("home/.docker/config.json", True),
        ("config.json", False),
        ("credentials", True),
        ("deploy/credentials.yaml", True),
        ("supervisor/guard/credentials.py", False),
        ("home/.kube/config", True),
        ("clusters/staging.kubeconfig", True),
        ("kubeconfig", True),
    ],
)
def test_secret_bearing_files_are_recognised(path: str, secret: bool) -> None:
    assert is_secret_file(path) is secret
