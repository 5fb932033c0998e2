"""Rendering a role's prompt from Jinja2 templates.

StrictUndefined turns a missing variable into an error instead of a silently empty prompt, and a
project's `.supervisor/templates/` shadows the package's templates file by file.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import jinja2

from supervisor.config import PROMPTS_DIR
from supervisor.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic import BaseModel

    from supervisor.context import Pack, Source
    from supervisor.roles import Role


def environment(repo: Path | None) -> jinja2.Environment:
    paths = [str(PROMPTS_DIR)]
    if repo is not None:
        paths.insert(0, str(repo / ".supervisor" / "templates"))
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(paths),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # prompts are plain text, not HTML
    )


def schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), indent=2)


def render(template: str, repo: Path | None, schema: type[BaseModel], **variables: Any) -> str:
    env = environment(repo)
    try:
        return env.get_template(template).render(
            schema_name=schema.__name__, schema_json=schema_text(schema), **variables
        )
    except jinja2.TemplateNotFound as e:
        raise ConfigError(
            f"Prompt template '{e.name}' not found in {', '.join(env.loader.searchpath)}.",  # type: ignore[union-attr]
            "Check the role's `template:` name, or add the file to .supervisor/templates/.",
        ) from e
    except jinja2.UndefinedError as e:
        raise ConfigError(
            f"Prompt template '{template}' uses an undefined variable: {e.message}.",
            "Fix the template, or pass that variable; templates render with StrictUndefined.",
        ) from e
    except jinja2.TemplateSyntaxError as e:
        raise ConfigError(
            f"Prompt template {e.filename or e.name} has a syntax error at line {e.lineno}: "
            f"{e.message}.",
            "Fix the Jinja2 syntax there.",
        ) from e


def compose(
    role: Role,
    repo: Path | None,
    worktree: Path | Source,
    *,
    task: str,
    feedback: list[str],
    plan: str,
    targets: list[str],
    diff: str,
    run_id: str = "dry-run",
) -> tuple[str, Pack]:
    """The role's prompt with its context pack; the pack gets what the bare prompt leaves over."""
    from supervisor import tokens
    from supervisor.context import build_pack

    variables: dict[str, Any] = {
        "role": role,
        "task": task,
        "feedback": feedback,
        "plan": plan,
        "run_id": run_id,
    }
    bare = render(role.template, repo, role.schema, context_pack="", **variables)
    pack = build_pack(
        worktree,
        role,
        repo=repo,
        prompt_tokens=tokens.count(bare),
        targets=targets,
        diff=diff,
    )
    return render(role.template, repo, role.schema, context_pack=pack.text, **variables), pack
