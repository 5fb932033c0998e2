"""One long-lived Repomix per supervisor process.

A fresh `repomix` per pack spent ~0.75 s of its ~1 s loading Node modules and warming a tiktoken
worker whose counts we never use; the supervisor packs at least once per step, so that was most of
its own overhead. `packer.mjs` loads Repomix once and packs on request (one JSON line each way),
with the same options and the same output as `repomix --stdin --stdout --style xml
--no-file-summary --no-directory-structure`. Packs are serialised: parallel components share it.

The child reads requests from our pipe, so it ends on EOF when this process exits or is killed:
a SIGKILLed supervisor leaves no packer behind.

Repomix never reads a worktree: each pack is written into a fresh host directory as regular files
(from blobs, or from lstat-checked regular files), with the supervisor's options only, so a
worker's symlink, repomix.config.json or `.repomixignore` has no effect.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from supervisor.core import process
from supervisor.core.errors import CommandTimeoutError, ToolFailedError, ToolMissingError
from supervisor.core.plural import counted
from supervisor.core.resources import NODE_BIN
from supervisor.guard.reading import read_regular, readable

SCRIPT = Path(__file__).with_name("packer.mjs")
TIMEOUT_SECONDS = 300
# Repomix reads `.repomixignore` files among the packed ones whatever its options say.


class RepomixPacker:
    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: IO[bytes] | None = None  # a file, not a pipe: a full pipe would stall Node
        self._lock = threading.Lock()
        self._on_pinned = False  # the running packer is on the Node that setup installed
        self._answered = False  # and it has answered a request
        self._pinned_failed = False

    def pack(self, cwd: Path, paths: list[str], timeout: float = TIMEOUT_SECONDS) -> str:
        """Repomix's XML for the regular files among `paths` (relative to `cwd`; a symlink, or a
        path through one, is left out); files its secret scan drops are left out, as with the
        CLI."""
        return self.pack_contents(read_regular(cwd, paths), timeout)

    def pack_contents(self, files: dict[str, bytes], timeout: float = TIMEOUT_SECONDS) -> str:
        """Repomix's XML for `files` (relative path -> content), in the order given."""
        with self._lock, tempfile.TemporaryDirectory(prefix="supervisor-pack-") as tmp:
            root = Path(tmp, "files")
            paths = [p for p in files if readable(p)]
            for rel in paths:
                target = root / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(files[rel])
            root.mkdir(exist_ok=True)
            request = {"cwd": str(root), "paths": paths, "output": str(Path(tmp, "pack.xml"))}
            try:
                line = self._ask(request, timeout)
            except (BrokenPipeError, ToolFailedError):
                if not (self._on_pinned and not self._answered):
                    raise
                # The pinned Node never answered (a host it does not run on: an older C
                # library): the host's own Node packs from here on.
                self._pinned_failed = True
                line = self._ask(request, timeout)
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ToolFailedError(
                f"Repomix could not pack {counted(len(files), 'file')}: {reply.get('error')}",
                "Run `node_modules/.bin/repomix --stdin --stdout` in that directory to see the "
                "same error, and fix or exclude the file it names (context.exclude in the role).",
            )
        return str(reply["output"])

    def _ask(self, request: Mapping[str, object], timeout: float) -> str:
        proc = self._running()
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = self._read_line(proc, timeout, self._stderr)
        except (BrokenPipeError, CommandTimeoutError, ToolFailedError):
            self._stop()
            raise
        self._answered = True
        return line

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _running(self) -> subprocess.Popen[str]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        node = self._node()
        repomix = Path(process.find_program("repomix", [NODE_BIN])).resolve()
        library = repomix.parent.parent / "lib" / "index.js"
        if not library.is_file():
            raise ToolMissingError(
                f"Repomix at {repomix} has no library at {library}.",
                "Run `supervisor setup` (or scripts/setup.sh): it installs the pinned Repomix.",
            )
        self._on_pinned, self._answered = node == str(NODE_BIN / "node"), False
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the child)
        self._proc = subprocess.Popen(
            [node, str(SCRIPT), str(library)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        return self._proc

    def _node(self) -> str:
        """The Node that setup installed from the lock file beside the CLIs (node_modules/.bin,
        the one the sandbox image's gemini runs on), where there is one: it loads Repomix on
        about two thirds of the CPU of Node 20 (~0.75 against ~1.1 CPU-s a packer, once per
        supervisor process). Else, or once it failed to start here, the host's own."""
        pinned = NODE_BIN / "node"
        if not self._pinned_failed and pinned.is_file() and os.access(pinned, os.X_OK):
            return str(pinned)
        return process.find_program("node")

    @staticmethod
    def _read_line(proc: subprocess.Popen[str], timeout: float, stderr: IO[bytes] | None) -> str:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                raise CommandTimeoutError(
                    f"Repomix did not finish packing within {timeout:.0f} s.",
                    "Exclude large or generated files from the role's context (context.exclude).",
                )
        line = proc.stdout.readline()
        if not line:
            code = proc.wait()
            detail = b""
            if stderr is not None:
                stderr.seek(0)
                detail = stderr.read()
            text = detail.decode(errors="replace").strip()[-2000:]
            raise ToolFailedError(
                f"The Repomix packer exited ({code}): {text}",
                "Run `supervisor setup` (or scripts/setup.sh) to reinstall the pinned Repomix.",
            )
        return line

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin:
                proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, self._stderr):
            if stream:
                stream.close()
        self._stderr = None


_PACKER = RepomixPacker()
atexit.register(_PACKER.close)


def pack(cwd: Path, paths: list[str]) -> str:
    return _PACKER.pack(cwd, paths)


def pack_contents(files: dict[str, bytes]) -> str:
    return _PACKER.pack_contents(files)
