"""Which images were found to hold the CLIs, kept across commands (supervisor/sandbox/probed.py):
an image ID names its content, so a probe's answer holds for that ID only, that runtime and that
set of CLIs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from supervisor.sandbox import probed

if TYPE_CHECKING:
    from pathlib import Path

IMAGE = "sha256:" + "a" * 64


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SUPERVISOR_USER_DIR", str(tmp_path / "user"))
    return tmp_path / "user" / probed.FOLDER


def test_an_image_is_known_only_after_a_probe_found_its_clis() -> None:
    assert not probed.known(IMAGE, None, ("claude",))

    probed.remember(IMAGE, None, ("claude",))

    assert probed.known(IMAGE, None, ("claude",))


def test_another_image_runtime_or_set_of_clis_is_probed_again() -> None:
    probed.remember(IMAGE, None, ("claude", "codex"))

    assert probed.known(IMAGE, None, ("codex", "claude"))  # the same set, in any order
    assert not probed.known("sha256:" + "b" * 64, None, ("claude", "codex"))
    assert not probed.known(IMAGE, "runsc", ("claude", "codex"))
    assert not probed.known(IMAGE, None, ("claude", "codex", "gemini"))


def test_an_image_without_an_id_is_never_remembered() -> None:
    probed.remember("", None, ("claude",))

    assert not probed.known("", None, ("claude",))


def test_a_cache_that_cannot_be_written_only_means_probing_again(cache: Path) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("a file where the folder should be")

    probed.remember(IMAGE, None, ("claude",))  # no error

    assert not probed.known(IMAGE, None, ("claude",))


def test_forgetting_makes_every_image_probed_again() -> None:
    probed.remember(IMAGE, None, ("claude",))

    probed.forget_all()

    assert not probed.known(IMAGE, None, ("claude",))
