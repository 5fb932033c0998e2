"""What a process derives from an installed library once and keeps in the user's cache: the
detect-secrets rule set (supervisor/core/redaction.py) and the decoded tiktoken encoding
(supervisor/context/tokens.py). A cache gives exactly what the library gives; a damaged or
edited one, or one written for another version, is not used, and is written again."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import TYPE_CHECKING

import pytest

from supervisor.context import tokens
from supervisor.core import redaction, resources

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(resources, "cache_dir", lambda: tmp_path)
    return tmp_path


def table(rules: list[tuple[str, object]]) -> list[tuple[str, str, int]]:
    return [(kind, p.pattern, p.flags) for kind, p in rules]  # type: ignore[attr-defined]


def rules_file(cache: Path) -> Path:
    (found,) = (cache / "redaction").glob("detect-secrets-*.json")
    return found


def test_the_cached_rule_set_is_detect_secrets_own(cache: Path) -> None:
    first = redaction.detect_secrets_rules()  # read from the package, then kept
    again = redaction.detect_secrets_rules()  # read from the cache
    assert table(again) == table(first) == table(redaction._package_rules())
    assert len(first) > 30


def test_a_rule_cache_edited_without_its_hash_is_not_used_and_is_written_again(
    cache: Path,
) -> None:
    redaction.detect_secrets_rules()
    path = rules_file(cache)
    data = json.loads(path.read_text())
    data["rules"] = [[kind, "(?!)", 0] for kind, _, _ in data["rules"]]  # matches nothing
    path.write_text(json.dumps(data))
    assert table(redaction.detect_secrets_rules()) == table(redaction._package_rules())
    assert json.loads(path.read_text())["rules"][0][1] != "(?!)"


@pytest.mark.parametrize(
    "damage",
    ["truncated", "another key", "bad kind", "not json"],
)
def test_a_damaged_or_foreign_rule_cache_is_not_used(cache: Path, damage: str) -> None:
    redaction.detect_secrets_rules()
    path = rules_file(cache)
    data = json.loads(path.read_text())
    if damage == "truncated":
        data["rules"] = data["rules"][:3]  # the hash no longer matches
    elif damage == "another key":
        data["key"] = "0" * 64
    elif damage == "bad kind":
        data["rules"][0][0] = "Kind With Spaces"
        data["sha256"] = hashlib.sha256(json.dumps(data["rules"]).encode()).hexdigest()
    text = json.dumps(data) if damage != "not json" else "{"
    path.write_text(text)
    key = redaction._package_hash()
    assert key is not None
    assert redaction._cached_rules(key) is None
    assert table(redaction.detect_secrets_rules()) == table(redaction._package_rules())


def test_redaction_finds_the_same_secrets_with_the_cached_rules(cache: Path) -> None:
    text = "token glpat-abcdefghijklmnopqrst, mail SG.abcdefghijklmnopqrstuv." + "w0" * 21 + "x"
    redaction.rules.cache_clear()
    try:
        fresh = redaction.redact(text)
        redaction.rules.cache_clear()
        cached = redaction.redact(text)  # the cache was written by the first
    finally:
        redaction.rules.cache_clear()
    assert cached == fresh
    assert "glpat-" not in cached[0]


SAMPLE = "def add(a, b):\n    return a + b  # über naïve 東京 <|endoftext|> 🎉\n" * 20


def test_the_decoded_encoding_counts_as_tiktoken_does_and_a_damaged_one_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    build = tokens._build.__wrapped__  # not the process's memoised one
    first = build(tokens.ENCODING)  # tiktoken's own constructor decodes the file; kept
    (kept,) = tmp_path.glob(f"{tokens.ENCODING}-*.marshal")
    cached = build(tokens.ENCODING)
    expected = first.encode(SAMPLE, disallowed_special=())
    assert cached.encode(SAMPLE, disallowed_special=()) == expected
    assert cached.n_vocab == first.n_vocab
    assert cached.special_tokens_set == first.special_tokens_set

    data = bytearray(kept.read_bytes())
    data[-100] ^= 0xFF  # a changed rank: its hash no longer matches
    kept.write_bytes(bytes(data))
    key = tokens._key(tokens.ENCODING, next(p for p in tmp_path.iterdir() if "." not in p.name))
    assert key is not None
    assert tokens._read(kept, key) is None
    assert build(tokens.ENCODING).encode(SAMPLE, disallowed_special=()) == expected
    assert tokens._read(kept, key) is not None  # written again
    assert tokens._read(kept, "f" * 64) is None  # another file's or version's


def test_threads_asking_for_the_encoding_at_once_share_one_build() -> None:
    """The engine's first count comes at once from its own thread and from the threads that
    prepare the next step: each built the encoding (~0.4 CPU-s) before it was kept."""
    tokens._build.cache_clear()
    start = threading.Barrier(4)
    found: list[object] = []

    def ask() -> None:
        start.wait()
        found.append(tokens.encoding())

    askers = [threading.Thread(target=ask) for _ in range(4)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    assert len(found) == 4
    assert all(e is found[0] for e in found)
    assert tokens._build.cache_info().misses == 1
