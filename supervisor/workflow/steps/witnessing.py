"""A worker run's result, settled from what the model API said (the witness) over the CLI's stdout.

Why a module of its own: the worker step only acts on a `WorkerResult`; which source it comes
from is this module's one decision. With a record of the run (the credential proxy's, see
supervisor/workers/witness.py) the answer's text, the tokens, the cost and a rate limit's reset
come from the record, and the CLI's stdout is only checked against it: a difference means a
process in the sandbox changed the result, and the step fails as tampered. A rate limit the CLI
claims that the API never sent is not believed either.

A sandbox whose proxy records every run (`records_model_exchanges`: the Docker sandbox) must
have a record for a run that claims an answer: none means the answer never came from the model,
and the step fails as tampered. A failed run needs none (the CLI may fail before any request).
Unless the record's file system is full (the host reads it so): then the proxy could not write
what it relayed, and the step stops for the machine, its answer unused and bought again after
space is freed, since nothing vouches for it, and nobody is blamed for it.
Only the stand-in sandbox of the fast specs, which records only what a spec scripts, takes the
CLI's stdout alone when a run has no record.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor.core import host_faults
from supervisor.core.errors import DiskFullError, ResultTamperedError, SandboxError
from supervisor.sandbox.docker import record_dir_path
from supervisor.workers import witness

if TYPE_CHECKING:
    from supervisor.core.config import Settings
    from supervisor.workers.base import WorkerResult


@dataclass
class Settled:
    result: WorkerResult
    witnessed: witness.Witnessed | None = None
    """None: no record was read (the fallback)."""
    tampered: ResultTamperedError | None = None
    unrecorded: DiskFullError | None = None
    """The record is missing or short because its file system is full: the machine's fault."""
    cost_source: str = "cli"
    """Where the cost came from: `priced` (the record's tokens at the configured price) or
    `cli` (the CLI's own figure, when no price is configured for the models used)."""


def new_record_dir(run_label: str, step_id: int) -> Path:
    """A private folder (0700) for the proxy to record this run in. Named like a run folder of
    the task (sandbox/docker.py RUN_PREFIX), so the task's clean-up removes one a crash left
    behind, and named for its step, so a resumed supervisor that adopts the step's container
    finds what the proxy recorded before the crash (the clean-up keeps it for adoption)."""
    path = record_dir_path(run_label, step_id)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        info = path.lstat()
        if path.is_symlink() or not path.is_dir() or info.st_uid != os.getuid():
            raise SandboxError(
                f"The record folder {path} exists and is not this user's own folder.",
                f"Remove it (`rm -rf {path}`) and run again.",
            ) from None
        path.chmod(0o700)
    return path


def remove_record_dir(path: Path) -> None:
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)


def settle(
    cli: str,
    record_dir: Path | None,
    printed: WorkerResult,
    settings: Settings,
    model: str,
    now: float,
    *,
    record_required: bool = True,
) -> Settled:
    """The run's result: from the record when there is one, the CLI's stdout its cross-check."""
    if record_dir is None or not witness.has_record(record_dir):
        if not record_required or not printed.ok:
            return Settled(printed)
        if (full := _unrecorded(record_dir)) is not None:
            return Settled(printed, unrecorded=full)
        missing = ResultTamperedError(
            f"The {cli} worker printed an answer, but the model API's record of the run holds "
            "no exchange: the answer did not come from the model."
        )
        return Settled(printed, tampered=missing)
    seen = witness.witness(cli, record_dir, now)
    result = dataclasses.replace(
        printed,
        input_tokens=seen.usage.input_tokens,
        output_tokens=seen.usage.output_tokens,
    )
    cost = priced(settings, model, seen)
    settled = Settled(result, seen, cost_source="priced" if cost is not None else "cli")
    if cost is not None:
        result.cost_usd = cost
    if seen.rate_limited and not printed.ok:
        result.error_kind = "rate_limit"
        reset = seen.reset_after if seen.reset_after is not None else printed.retry_after
        result.retry_after = reset
        result.error = f"{printed.error or 'rate limited'} (API: HTTP 429" + (
            f", resets in {reset:.0f} s)" if reset is not None else ")"
        )
    elif printed.error_kind == "rate_limit" and seen.exchanges and not seen.rate_limited:
        # The API never said so: a claimed limit is not a reason to wait or to fail over.
        result.error_kind = "cli"
        result.retry_after = None
        result.error = f"{printed.error} (the model API sent no rate limit)"
    if printed.ok:
        vouched = seen.answered and witness.matches(seen.text, printed.text)
        if not vouched:
            settled.unrecorded = _unrecorded(record_dir)
        if not vouched and settled.unrecorded is None:
            settled.tampered = ResultTamperedError(
                f"The {cli} worker's printed answer is not what the model API answered. "
                f"Printed: {_clip(printed.text)!r}; API: {_clip(seen.text)!r}"
                + ("" if seen.answered else " (the API gave no final answer)")
            )
        result.text = seen.text
    return settled


def _unrecorded(record_dir: Path | None) -> DiskFullError | None:
    """The record's file system full, as the host reads it: why a record is missing or short."""
    if record_dir is None or not host_faults.out_of_space(record_dir):
        return None
    return host_faults.disk_full_error(record_dir, None)


def priced(settings: Settings, model: str, seen: witness.Witnessed) -> float | None:
    """The record's tokens at the configured prices (each exchange's own model, else the
    run's), or None when no price applies (the CLI's own figure is kept then, as budgets.py
    does for claude)."""
    prices = settings.budgets.prices
    total, found = 0.0, False
    for name, usage in (seen.by_model or {"": seen.usage}).items():
        price = prices.get(name) or prices.get(model)
        if price is None:
            continue
        found = True
        total += usage.input_tokens * price.input_per_mtok / 1e6
        total += usage.output_tokens * price.output_per_mtok / 1e6
    return round(total, 6) if found else None


def _clip(text: str, size: int = 300) -> str:
    return text if len(text) <= size else text[: size // 2] + " … " + text[-size // 2 :]
