"""`doctor`'s verdict on Docker engines that leak DNS out of internal networks (CVE-2024-29018)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from supervisor.sandbox.engine_version import affected, dns_verdict

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("version", "leaks"),
    [
        ("20.10.24+dfsg1", True),
        ("23.0.10", True),
        ("23.0.11", False),
        ("24.0.9", True),
        ("25.0.4", True),
        ("25.0.5", False),
        ("26.0.0", False),
        ("28.3.1", False),
    ],
)
def test_engine_versions_before_the_fix_of_their_line_are_affected(
    version: str, leaks: bool
) -> None:
    assert affected(version) is leaks


def test_an_affected_engine_with_a_loopback_resolver_fails_with_the_upgrade(
    tmp_path: Path,
) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("# systemd-resolved\nnameserver 127.0.0.53\noptions edns0\n")
    verdict = dns_verdict("24.0.7", resolv)
    assert not verdict.ok
    assert "CVE-2024-29018" in verdict.detail and "127.0.0.53" in verdict.detail
    assert "26.0.0" in verdict.hint


def test_an_affected_engine_without_a_loopback_resolver_passes_and_says_why(
    tmp_path: Path,
) -> None:
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 10.255.255.53\n")
    verdict = dns_verdict("20.10.24", resolv)
    assert verdict.ok and "not on loopback" in verdict.detail
    assert dns_verdict("27.1.0", resolv).ok
