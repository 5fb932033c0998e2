"""Redaction: how many rules, and how many false positives on this repository's own source.

    .venv/bin/python benchmarks/redaction_fp.py [--show]

Runs the redaction over every tracked file of this repository's own (SCANNED, OTHERS: the package,
the specs with the two real fixture projects under tests/fixtures/, benchmarks, scripts, config,
prompts, docs, README): our own code holds no secrets, so every value redacted there is a false
positive, except in the files that hold fake secrets on purpose (FIXTURES). Prints the rule
count per layer, the files and lines scanned, the values redacted per kind (target 0) and the
time taken; `--show` lists each redacted line.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from supervisor.core import process, redaction  # noqa: E402

SCANNED = ("supervisor", "tests", "benchmarks", "scripts", "config", "prompts", "sandbox", "docs")
OTHERS = ("README.md", "Makefile", "pyproject.toml", "setup.py", "requirements.txt")
# Written to hold real-format fake secrets: redacting them is the point, not a false positive.
FIXTURES = {
    "tests/test_redaction.py": "the redaction specs' planted secrets",
    "tests/secret_samples.py": "the generated real-format samples of every kind",
    "tests/test_context.py": "secrets planted in a repository to check the pack redacts them",
    "tests/test_credproxy.py": "a fake key the proxy must inject and never show the worker",
    "tests/test_keys_on_host.py": "fake keys the specs look for in every container",
    "tests/test_attacks_workspaces.py": "a secret planted outside the repository that a hostile"
    " manifest tries to pull into the context",
    "tests/test_startup_caches.py": "secrets the cached redaction rules must find as the fresh"
    " ones do",
    "tests/test_startup_imports.py": "a key in a task's description, redacted before it is stored",
    "tests/test_task_writer.py": "a key in a task's description, redacted in every row written",
}


def tracked_files() -> list[str]:
    out = process.run(["git", "-C", str(ROOT), "ls-files", "-z", "--", *SCANNED, *OTHERS]).stdout
    return sorted(f for f in out.split("\0") if f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print every redacted line")
    args = parser.parse_args()
    rules = redaction.rules()
    ours = len(redaction.PATTERNS) + len(redaction.EXTRA_PATTERNS)
    context_rules = 4  # private-key blocks, command-line passwords, URL passwords, assignments
    print(f"rules: {len(rules) + context_rules} in all")
    print(f"  detect-secrets vendor regexes: {len(redaction.detect_secrets_rules())}")
    print(
        f"  our token patterns: {ours} (PATTERNS {len(redaction.PATTERNS)}, "
        f"EXTRA_PATTERNS {len(redaction.EXTRA_PATTERNS)})"
    )
    print(f"  context rules: {context_rules} (private-key block, CLI/URL password, name=value)")
    counts: Counter[str] = Counter()
    files = lines = size = 0
    shown: list[str] = []
    started = time.perf_counter()
    for rel in tracked_files():
        if rel in FIXTURES:
            continue
        try:
            text = (ROOT / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        files += 1
        lines += text.count("\n") + 1
        size += len(text)
        _, found = redaction.redact(text)
        counts.update(found)
        if found and args.show:
            for number, line in enumerate(text.splitlines(), 1):
                if redaction.redact(line)[1]:
                    shown.append(f"{rel}:{number}: {line.strip()[:120]}")
    seconds = time.perf_counter() - started
    print(f"scanned: {files} files, {lines} lines, {size / 1e6:.2f} MB under {', '.join(SCANNED)}/")
    print(f"excluded fixtures: {', '.join(f'{k} ({v})' for k, v in FIXTURES.items())}")
    total = sum(counts.values())
    per_kind = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())) or "none"
    print(f"false positives: {total} values redacted (target 0): {per_kind}")
    print(f"time: {seconds:.2f} s ({size / 1e6 / seconds:.2f} MB/s)")
    for line in shown:
        print(f"  {line}")


if __name__ == "__main__":
    main()
