"""The witness: a worker run's answer, tokens and rate limits as the model API sent them.

Why: everything a process in the sandbox writes is the worker's to forge (a hook of the CLI's
project config, a tool call that writes to the container's stdout, a planted `CLAUDE.md`). The
credential proxy relays every model exchange of a run and records it outside the sandbox
(`<record_dir>/exchanges.jsonl` and one raw body per exchange, see the proxy contract), so the
step's result is read from there: the final answer the CLI itself would report, the tokens summed
over every exchange of the run, and a rate limit's status and reset headers. The CLI's stdout is
only the cross-check (`matches`): a worker that changed what the CLI printed fails as tampering.

Reading is bounded (the record is written by our proxy, but its bodies are the network's): a
capped number of exchanges and bytes, and JSON nested deeper than `MAX_DEPTH` is skipped.
"""

from __future__ import annotations

import contextlib
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from supervisor.workers import ratelimit, sse
from supervisor.workers.sse import MAX_DEPTH, Usage, loads

EXCHANGES = "exchanges.jsonl"
ACTIVITY = "activity"
MAX_EXCHANGES = 5000
MAX_INDEX_BYTES = 32 * 1024 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
VENDOR_OF_CLI = {"claude": "anthropic", "codex": "openai", "gemini": "gemini"}
_BODY_NAME = re.compile(r"\d{4,9}\.body")


@dataclass(frozen=True)
class Exchange:
    """One request and its response, as the proxy recorded it (the contract's fields)."""

    seq: int
    method: str
    path: str
    status: int | None
    complete: bool
    headers: dict[str, str]
    body_file: Path | None
    started: float = 0.0
    ended: float = 0.0
    error: str | None = None
    refused: str | None = None
    truncated: bool = False

    def body(self) -> bytes:
        """The response body as relayed, decoded if the upstream compressed it anyway."""
        if self.body_file is None:
            return b""
        try:
            with self.body_file.open("rb") as f:
                raw = f.read(MAX_BODY_BYTES)
        except OSError:
            return b""
        encoding = self.headers.get("content-encoding", "identity").lower().strip()
        if encoding in ("gzip", "deflate"):
            try:
                wbits = 47 if encoding == "gzip" else 15
                return zlib.decompressobj(wbits).decompress(raw, MAX_BODY_BYTES)
            except zlib.error:
                return b""
        return raw


@dataclass
class Witnessed:
    """What the API said during one run."""

    vendor: str
    text: str
    """The run's final answer as the CLI reports it: claude's last turn's text, codex's last
    message, gemini's text of all turns (its stream-json prints every turn's text)."""
    answered: bool
    """A complete final model turn was seen (not only tool calls, errors or broken streams)."""
    usage: Usage
    by_model: dict[str, Usage] = field(default_factory=dict)
    exchanges: int = 0
    rate_limited: bool = False
    """The run's last model exchange was answered 429."""
    reset_after: float | None = None
    """Seconds until that rate limit resets, from its headers or body; None: not said."""
    last_status: int | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Each model request as relayed (numbers and names only, at most `MAX_REQUESTS_KEPT`): its
    status, times, model, tokens and a rate limit's reset, for the telemetry's spans
    (supervisor/telemetry/) to show every request the proxy saw, retries included."""


MAX_REQUESTS_KEPT = 200


def read_exchanges(record_dir: Path) -> list[Exchange]:
    """The record's exchanges in order; [] when there is no record (or nothing readable)."""
    index = record_dir / EXCHANGES
    try:
        with index.open("rb") as f:
            raw = f.read(MAX_INDEX_BYTES)
    except OSError:
        return []
    exchanges: list[Exchange] = []
    for line in raw.splitlines()[:MAX_EXCHANGES]:
        entry = loads(line)
        if isinstance(entry, dict):
            exchange = _exchange(record_dir, entry)
            if exchange is not None:
                exchanges.append(exchange)
    return sorted(exchanges, key=lambda e: e.seq)


def has_record(record_dir: Path | None) -> bool:
    """Whether the proxy recorded this run (its index exists): without one, nothing to witness."""
    return record_dir is not None and (record_dir / EXCHANGES).is_file()


def witness(cli: str, record_dir: Path, now: float) -> Witnessed:
    """The run's answer, usage and rate limit, read from its record."""
    vendor = VENDOR_OF_CLI.get(cli, cli)
    decoder = sse.DECODERS[vendor]
    usage, by_model, turns = Usage(), dict[str, Usage](), list[sse.Turn]()
    found = Witnessed(vendor, "", False, usage, by_model)
    model_exchanges = [e for e in read_exchanges(record_dir) if decoder.is_model_path(e.path)]
    found.exchanges = len(model_exchanges)
    for exchange in model_exchanges:
        found.last_status = exchange.status
        found.rate_limited = exchange.status == 429
        kept = _request(exchange) if len(found.requests) < MAX_REQUESTS_KEPT else {}
        if kept:
            found.requests.append(kept)
        if exchange.status == 429:
            body = exchange.body()
            found.reset_after = ratelimit.from_headers(exchange.headers, now)
            if found.reset_after is None:
                found.reset_after = ratelimit.from_body(body)
            kept["reset_after_s"] = found.reset_after
            continue
        if exchange.status != 200:
            continue
        turn = decoder.decode(exchange.body(), exchange.headers.get("content-type", ""))
        usage.add(turn.usage)
        by_model.setdefault(turn.model, Usage()).add(turn.usage)
        kept.update(model=turn.model, input_tokens=turn.usage.input_tokens)
        kept.update(output_tokens=turn.usage.output_tokens)
        if exchange.complete:
            turns.append(turn)
    found.text, found.answered = decoder.answer(turns)
    return found


def _request(exchange: Exchange) -> dict[str, Any]:
    """One request's facts for the record of the run: never a header's or a body's text."""
    return {
        "seq": exchange.seq,
        "status": exchange.status,
        "started": exchange.started,
        "ended": exchange.ended,
        "complete": exchange.complete,
        **({"refused": True} if exchange.refused else {}),
        **({"error": True} if exchange.error else {}),
    }


def matches(witnessed: str, printed: str) -> bool:
    """Whether the CLI's stdout says what the API said; whitespace does not count (the CLIs
    join blocks and trim lines their own ways), every other character does."""
    return _squeeze(witnessed) == _squeeze(printed)


def _squeeze(text: str) -> str:
    return "".join(text.split())


def _exchange(record_dir: Path, entry: dict[str, Any]) -> Exchange | None:
    seq = entry.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        return None
    headers = entry.get("headers")
    body_name = entry.get("body")
    body_file = None
    if isinstance(body_name, str) and _BODY_NAME.fullmatch(body_name):
        candidate = record_dir / body_name
        # Not a link: the record is ours, a link in it is not (nothing follows one out of it).
        with contextlib.suppress(OSError):
            if not candidate.is_symlink() and candidate.is_file():
                body_file = candidate
    status = entry.get("status")
    return Exchange(
        seq=seq,
        method=str(entry.get("method") or ""),
        path=str(entry.get("path") or ""),
        status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        complete=entry.get("complete") is True,
        headers={str(k).lower(): str(v) for k, v in _items(headers)},
        body_file=body_file,
        started=_number(entry.get("started")),
        ended=_number(entry.get("ended")),
        error=str(entry["error"]) if entry.get("error") else None,
        refused=str(entry["refused"]) if entry.get("refused") else None,
        truncated=entry.get("truncated") is True,
    )


def _items(value: Any) -> list[tuple[Any, Any]]:
    return list(value.items()) if isinstance(value, dict) else []


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


__all__ = ["MAX_DEPTH", "Exchange", "Usage", "Witnessed", "loads", "read_exchanges", "witness"]
