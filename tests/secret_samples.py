"""One real-format example of every kind of secret issue 10 names, made at import time.

The values are generated (seeded, so a failure is reproducible) rather than written out, so that
no scanner takes this file for a leak; each has exactly the shape of the real thing. Every sample
is (kind it is redacted as, the line as it appears in a file or a log, the secret value).
"""

from __future__ import annotations

import base64
import random
import string

_rng = random.Random(20261123)
ALNUM = string.ascii_letters + string.digits


def _pick(alphabet: str, n: int) -> str:
    """Random characters; with a digit and a letter when the alphabet has both (as real keys)."""
    mixed = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(n))
        if not mixed or (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
            return value


_hex = string.digits + "abcdef"
_b64 = ALNUM + "+/"
_kube_key = base64.b64encode(
    b"-----BEGIN RSA PRIVATE KEY-----\n" + _pick(_b64, 64).encode() + b"\n"
).decode()

GITLAB = "glpat-" + _pick(ALNUM + "_-", 20)
HUGGING_FACE = "hf_" + _pick(string.ascii_letters, 34)
AZURE = _pick(_b64, 86) + "=="
SENDGRID = f"SG.{_pick(ALNUM + '_-', 22)}.{_pick(ALNUM + '_-', 43)}"
STRIPE_WEBHOOK = "whsec_" + _pick(ALNUM, 32)
TELEGRAM = f"{_rng.randint(100000000, 999999999)}:AA{_pick(ALNUM + '_-', 33)}"
DIGITALOCEAN = "dop_v1_" + _pick(_hex, 64)
MYSQL_PASSWORD = "Tr0ub4dor" + _pick(ALNUM, 6)
ENCRYPTION_KEY = _pick(_hex, 32)
GITHUB = "ghp_" + _pick(ALNUM, 36)
AWS_KEY_ID = "AKIA" + _pick(string.ascii_uppercase + string.digits, 16)
ANTHROPIC = "sk-ant-api03-" + _pick(ALNUM, 40)

SAMPLES: dict[str, tuple[str, str, str]] = {
    "gitlab": ("gitlab_token", f"GITLAB_CI_TOKEN={GITLAB}", GITLAB),
    "hugging_face": ("huggingface_token", f"hub = login(token='{HUGGING_FACE}')", HUGGING_FACE),
    "azure": (
        "azure_storage_account_access_key",
        "AZURE_STORAGE=DefaultEndpointsProtocol=https;AccountName=acme;"
        f"AccountKey={AZURE};EndpointSuffix=core.windows.net",
        AZURE,
    ),
    "sendgrid": ("sendgrid_api_key", f'sg = SendGridAPIClient("{SENDGRID}")', SENDGRID),
    "stripe_webhook": (
        "stripe_webhook_secret",
        f"endpoint_secret = '{STRIPE_WEBHOOK}'",
        STRIPE_WEBHOOK,
    ),
    "telegram": (
        "telegram_bot_token",
        f"curl https://api.telegram.org/bot{TELEGRAM}/getMe",
        TELEGRAM,
    ),
    "digitalocean": ("digitalocean_token", f"doctl auth init -t {DIGITALOCEAN}", DIGITALOCEAN),
    "kubeconfig": ("kubeconfig_client_key", f"    client-key-data: {_kube_key}", _kube_key),
    "mysql": ("password", f"mysql -h db -u root -p{MYSQL_PASSWORD} shop", MYSQL_PASSWORD),
    "encryption_key": ("high_entropy_secret", f"ENCRYPTION_KEY={ENCRYPTION_KEY}", ENCRYPTION_KEY),
    "github": ("github_token", f"GH_TOKEN={GITHUB}", GITHUB),
    "aws": ("aws_access_key_id", f"aws_access_key_id = {AWS_KEY_ID}", AWS_KEY_ID),
    "anthropic": ("anthropic_key", f"export CLAUDE={ANTHROPIC}", ANTHROPIC),
}
