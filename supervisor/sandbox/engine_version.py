"""Docker engine versions that leak DNS out of `internal` networks (for `supervisor doctor`).

CVE-2024-29018 (GHSA-mq39-4gv4-mvpx; fixed by moby/moby#47538 "libnet: Don't forward to upstream
resolvers on internal nw"): the embedded resolver of a container on an internal network forwards
queries to the host's upstream servers; when the host's resolver is on a loopback address
(systemd-resolved, dnsmasq) dockerd sends them from the host's own network namespace, so they
leave the machine and a worker can exfiltrate data in query names (<secret>.attacker.example).
Fixed in 26.0.0, 25.0.5 and 23.0.11 (advisory; Flatcar's tracking issue flatcar/Flatcar#1405
quotes the same ranges). With a resolver that is not on loopback the queries go from the
container's own namespace, which has no route, so an affected engine leaks only under that
condition; `tests/test_egress.py` proves the closed case on the engine at hand.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

FIXED = ((23, 0, 11), (25, 0, 5), (26, 0, 0))
ADVISORY = "CVE-2024-29018"


@dataclass(frozen=True)
class DnsVerdict:
    ok: bool
    detail: str
    hint: str = ""
    warning: bool = False
    """Not a leak here, but a finding: doctor shows it as a warning, never with a ✓."""


def parse(version: str) -> tuple[int, int, int] | None:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def affected(version: str) -> bool:
    """True for engine versions before the fix of their line (24.x never got one)."""
    parsed = parse(version)
    if parsed is None:
        return False
    if parsed >= FIXED[-1]:
        return False
    if parsed[0] == 25:
        return parsed < FIXED[1]
    if parsed[0] == 23:
        return parsed < FIXED[0]
    return True  # 24.x and everything before 23


def loopback_resolvers(resolv_conf: str) -> list[str]:
    found = []
    for line in resolv_conf.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                if ipaddress.ip_address(parts[1].split("%")[0]).is_loopback:
                    found.append(parts[1])
            except ValueError:
                continue
    return found


def dns_verdict(version: str, resolv_conf_path: Path = Path("/etc/resolv.conf")) -> DnsVerdict:
    if not affected(version):
        return DnsVerdict(True, f"engine {version} does not forward DNS from internal networks")
    try:
        loopback = loopback_resolvers(resolv_conf_path.read_text())
    except OSError:
        loopback = ["(unreadable resolv.conf)"]
    upgrade = "Upgrade the Docker engine to 26.0.0 or later (or 25.0.5 / 23.0.11)."
    if loopback:
        return DnsVerdict(
            False,
            f"engine {version} is affected by {ADVISORY} and the host resolver is on loopback "
            f"({', '.join(loopback)}): workers can send data out in DNS queries",
            upgrade,
        )
    return DnsVerdict(
        True,
        f"engine {version} is affected by {ADVISORY}, but the host resolver is not on loopback, "
        "so queries from internal networks have no route (upgrade before changing the resolver)",
        upgrade,
        warning=True,
    )
