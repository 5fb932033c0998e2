"""Images already found to hold the CLIs, remembered across supervisor processes.

Every `start-task`, `resume` and `supervisor worker` used to start a probe container (is each
CLI the workflow uses in the sandbox image?) before anything else: a container start is ~0.3 s
of the engine's CPU and about as long on the way to the first step, in every command. An image
ID is the hash of the image's content, so what one probe found stays true for that ID: the
answer is kept in the user's directory (`~/.supervisor/probed`, never in a repository or a
sandbox), one small file per image, runtime and set of CLIs, and only a probe that found every
CLI writes one. A rebuilt image has another ID and is probed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import TYPE_CHECKING

from supervisor.core.config import user_dir

if TYPE_CHECKING:
    from pathlib import Path

FOLDER = "probed"


def marker(image_id: str, runtime: str | None, binaries: tuple[str, ...]) -> Path:
    key = "\0".join([image_id, runtime or "", *sorted(binaries)])
    return user_dir() / FOLDER / hashlib.sha256(key.encode()).hexdigest()[:40]


def known(image_id: str, runtime: str | None, binaries: tuple[str, ...]) -> bool:
    return bool(image_id) and marker(image_id, runtime, binaries).is_file()


def remember(image_id: str, runtime: str | None, binaries: tuple[str, ...]) -> None:
    """Written whole or not at all; a cache that cannot be written only means the next command
    probes again."""
    if not image_id:
        return
    path = marker(image_id, runtime, binaries)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(f"{image_id} {runtime or ''} {' '.join(sorted(binaries))}\n")
        partial.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def forget_all() -> None:
    """For the specs of the probe itself (and a user who wants every image probed again)."""
    folder = user_dir() / FOLDER
    for path in folder.glob("*") if folder.is_dir() else ():
        with contextlib.suppress(OSError):
            path.unlink()
