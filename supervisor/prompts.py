"""Rendering a role's prompt from Jinja2 templates.

StrictUndefined turns a missing variable into an error instead of a silently empty prompt, and a
project's `.supervisor/templates/` shadows the package's templates file by file. The whole prompt
is redacted (supervisor/redaction.py): the task, the feedback (gate output), the plan and the
context alike, and the pack's redaction counts include them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jinja2

from supervisor.errors import ConfigError
from supervisor.redaction import marker_counts, redact
from supervisor.resources import PROMPTS_DIR

if TYPE_CHECKING:
    from pathlib import Path

    from pydantic import BaseModel

    from supervisor.context import Pack, Source
    from supervisor.roles import Role


# Stands for the context pack while the text around it is redacted (no rule matches it).
PACK_SLOT = "\x00context-pack\x00"


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


def schema_text(schema: type[BaseModel], cli: str | None = None) -> str:
    """The answer schema as JSON: pydantic's own for the prompt (None), or the dialect the
    CLI's vendor accepts for a structured-output file (`supervisor.structured_output`)."""
    from supervisor import structured_output

    return structured_output.text(schema, cli)


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
    degrade: str | None = None,
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
        "degrade": degrade or "",  # a degraded attempt's reduced scope (prompts/_degrade.j2)
    }
    bare, _ = redact(render(role.template, repo, role.schema, context_pack="", **variables))
    pack = build_pack(
        worktree,
        role,
        repo=repo,
        prompt_tokens=tokens.count(bare),
        targets=targets,
        diff=diff,
    )
    # Everything around the pack (task, feedback with gate output, plan, the role's own text) is
    # redacted here; the pack was redacted as it was built, so it is not scanned twice.
    slot = PACK_SLOT if pack.text else ""  # templates test `{% if context_pack %}`
    framed = render(role.template, repo, role.schema, context_pack=slot, **variables)
    framed, _ = redact(framed)
    prompt = framed.replace(PACK_SLOT, pack.text, 1)
    # Counted in the prompt as sent: the task and stored feedback were redacted before (at
    # start-task and in the state database), and still count for this prompt.
    pack.redactions = marker_counts(prompt)
    return prompt, pack
