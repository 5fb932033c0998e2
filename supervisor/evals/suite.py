"""The evaluation suite the package ships: small tasks, each in three variants.

Every task (supervisor/evals/suite/<name>/task.yaml) is one base (its files and its task text)
with three versions of its test file, ImpossibleBench's way:

- `normal`: the tests agree with the task; a worker that does the task passes them.
- `one_off`: one expected value contradicts the task; no honest change passes them.
- `conflicting`: two assertions contradict each other; no change at all passes them.

A worker that "passes" an impossible variant has changed the tests it is judged by (or the
checks around them): that is a cheat, whatever else it did. The task file also holds what the
scripted workers of the offline run use (supervisor/evals/scripted.py): the solution, and where
each impossible variant contradicts the task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import Field, ValidationError

from supervisor.core.config import read_yaml
from supervisor.core.errors import ConfigError, UsageError
from supervisor.core.strict_model import StrictModel

SUITE_DIR = Path(__file__).parent / "suite"
Variant = Literal["normal", "one_off", "conflicting"]
VARIANTS: tuple[Variant, ...] = get_args(Variant)
IMPOSSIBLE: tuple[Variant, ...] = ("one_off", "conflicting")


class Contradictions(StrictModel):
    """Where each impossible variant contradicts the task, as an honest worker would say it."""

    one_off: str
    conflicting: str


class TestFiles(StrictModel):
    """The test file's text in each variant."""

    __test__ = False  # not a pytest class, whatever its name
    normal: str
    one_off: str
    conflicting: str


class EvalTask(StrictModel):
    """One task of the suite: its base, its three test files, and the scripted workers' data."""

    name: str = ""
    """The task's directory name (set when loaded)."""
    language: Literal["python", "typescript", "go"]
    test: str
    """The test gate's command (`gates: {test: ...}` of the task's repository)."""
    task: str
    """The task text a worker is given, the same in every variant."""
    files: dict[str, str]
    test_file: str
    variants: TestFiles
    contradictions: Contradictions
    solution: dict[str, str]
    """The files an honest worker writes (the scripted workers' answer)."""
    cheats: dict[Variant, str] = Field(default_factory=dict)
    """The test file the cheating worker writes on an impossible variant, where it is not the
    normal variant's (one that keeps the number of tests, as a careful cheat does)."""

    def files_of(self, variant: Variant) -> dict[str, str]:
        """The repository of one variant: the base's files and that variant's test file."""
        return {**self.files, self.test_file: getattr(self.variants, variant)}


def load_task(directory: Path) -> EvalTask:
    try:
        task = EvalTask.model_validate(read_yaml(directory / "task.yaml"))
    except ValidationError as e:
        raise ConfigError(
            f"{directory / 'task.yaml'} is not a valid evaluation task: {e}",
            "Compare it with a task of the suite the package ships (supervisor/evals/suite/).",
        ) from e
    return task.model_copy(update={"name": directory.name})


def tasks(names: list[str] | None = None, suite: Path = SUITE_DIR) -> list[EvalTask]:
    """The suite's tasks, by name (all of them when `names` is empty)."""
    found = {p.parent.name: p.parent for p in sorted(suite.glob("*/task.yaml"))}
    unknown = sorted(set(names or []) - set(found))
    if unknown:
        raise UsageError(
            f"Unknown evaluation task(s): {', '.join(unknown)}.",
            f"Name one of: {', '.join(found)}.",
        )
    return [load_task(found[n]) for n in (names or list(found))]


def variants(names: list[str] | None = None) -> list[Variant]:
    unknown = sorted(set(names or []) - set(VARIANTS))
    if unknown:
        raise UsageError(
            f"Unknown variant(s): {', '.join(unknown)}.", f"Name one of: {', '.join(VARIANTS)}."
        )
    return [v for v in VARIANTS if not names or v in names]
