"""Rendering a role's prompt from Jinja2 templates.

StrictUndefined turns a missing variable into an error instead of a silently empty prompt, and a
project's `.supervisor/templates/` shadows the package's templates file by file, once the user
trusted them: a repository's template is its author's code, so every template (ours too) renders
in one `ImmutableSandboxedEnvironment`, which refuses `__globals__`, `__subclasses__` and the
like, and a repository template is used only while its content is the one `supervisor trust`
recorded (else the built-in one, with a warning; supervisor/guard/trust.py). The whole prompt
is redacted (supervisor/core/redaction.py): the task, the feedback (gate output), the plan and the
context alike, and the pack's redaction counts include them all.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.bccache import Bucket
from jinja2.exceptions import SecurityError
from jinja2.loaders import split_template_path
from jinja2.sandbox import ImmutableSandboxedEnvironment

from supervisor.core import trustmap
from supervisor.core.errors import ConfigError
from supervisor.core.redaction import marker_counts, redact
from supervisor.core.resources import PROMPTS_DIR
from supervisor.guard import trust

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel

    from supervisor.context.ahead import Ahead
    from supervisor.context.assemble import Pack, Source
    from supervisor.context.project_scope import ProjectScope
    from supervisor.context.roles import Role


# Stands for the context pack while the text around it is redacted (no rule matches it).
PACK_SLOT = "\x00context-pack\x00"


class _Templates(jinja2.BaseLoader):
    """The repository's trusted templates first, then the package's. Which repository is read
    is the render's (a context variable), so that one environment serves every repository."""

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        from supervisor.guard.reading import read_regular

        parts = split_template_path(template)  # refuses `..`
        repo = _REPO.get()
        if parts[0] == PACK_PREFIX:
            return _pack_template(repo, parts), template, None
        if repo is not None:
            rel = "/".join([TEMPLATES, *parts])
            trustmap.repo_path(repo, rel, trustmap.NEEDS_TRUST)
            data = read_regular(repo, [rel]).get(rel)
            if data is not None:
                if trust.file_trusted(repo, rel, data):
                    return data.decode("utf-8", errors="replace"), rel, None
                state = "changed since you trusted it" if trust.file_known(repo, rel) else ""
                trust.warn(
                    f"The repository's template {rel} is not used: it is "
                    f"{state or 'not trusted'} (the built-in one is used instead). Read it, "
                    f"then run `supervisor trust --repo {repo}`."
                )
        path = PROMPTS_DIR.joinpath(*parts)
        if not path.is_file():
            raise jinja2.TemplateNotFound(template)
        return path.read_text(encoding="utf-8"), str(path), None


def _pack_template(repo: Path | None, parts: list[str]) -> str:
    """An installed pack's template (`@pack/<pack>/<file>`), once the pack matches its lock."""
    from supervisor.context.packs.store import find_installed

    found = find_installed(repo, parts[1]) if len(parts) == 3 else None
    if found is None:
        raise jinja2.TemplateNotFound("/".join(parts))
    path = found.pack().template_path(parts[2])
    if not path.is_file() or path.is_symlink():
        raise jinja2.TemplateNotFound("/".join(parts))
    return path.read_text(encoding="utf-8")


PACK_PREFIX = "@pack"
_REPO: ContextVar[Path | None] = ContextVar("template_repo", default=None)
TEMPLATES = trustmap.TEMPLATES


class _Compiled(jinja2.BytecodeCache):
    """Compiled templates kept in memory by name and by their source's checksum.

    Why: compiling (parsing, generating and compiling Python) was most of a render, twice per
    prompt, ~0.03 s of every step's set-up on the 2-core host, although the templates rarely
    change. Jinja2 checks the checksum of the source it just read (the repository's trusted
    file, or the built-in one) against the kept code's before using it, so a changed or another
    repository's template of the same name is compiled anew: what renders is always what
    `_Templates` read for this render.
    """

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def load_bytecode(self, bucket: Bucket) -> None:
        with self._lock:
            code = self._code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        code = bucket.bytecode_to_string()
        with self._lock:
            self._code[bucket.key] = code


# The one environment every prompt renders in. No template cache: the same name is another
# repository's template (or the built-in one) from one render to the next; only the compiled
# code of a source already seen is kept (`_Compiled`).
ENVIRONMENT = ImmutableSandboxedEnvironment(
    loader=_Templates(),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # prompts are plain text, not HTML
    cache_size=0,
    bytecode_cache=_Compiled(),
)


def schema_text(schema: type[BaseModel], cli: str | None = None) -> str:
    """The answer schema as JSON: pydantic's own for the prompt (None), or the dialect the
    CLI's vendor accepts for a structured-output file (`supervisor.workers.structured_output`)."""
    from supervisor.workers import structured_output

    return structured_output.text(schema, cli)


def render(template: str, repo: Path | None, schema: type[BaseModel], **variables: Any) -> str:
    token = _REPO.set(repo)
    try:
        return ENVIRONMENT.get_template(template).render(
            schema_name=schema.__name__, schema_json=schema_text(schema), **variables
        )
    except jinja2.TemplateNotFound as e:
        places = (
            f"{repo / TEMPLATES} (trusted files only) or {PROMPTS_DIR}" if repo else PROMPTS_DIR
        )
        raise ConfigError(
            f"Prompt template '{e.name}' not found in {places}.",
            "Check the role's `template:` name, or add the file to .supervisor/templates/ "
            "(and trust it: `supervisor trust`).",
        ) from e
    except SecurityError as e:
        raise ConfigError(
            f"Prompt template '{template}' was refused by the sandboxed environment every "
            f"template renders in: {str(e).rstrip('.')}.",
            "Fix the template; it may use the variables it is given and plain Jinja2 filters.",
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
    finally:
        _REPO.reset(token)


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
    research: str = "",
    scope: ProjectScope | None = None,
    projects: list[dict[str, Any]] | None = None,
    ahead: Ahead | None = None,
    tests_changed: list[str] | None = None,
) -> tuple[str, Pack]:
    """The role's prompt with its context pack; the pack gets what the bare prompt leaves over
    (`ahead`: packs gathered while the step before ran, supervisor/context/ahead.py)."""
    from supervisor.context import tokens
    from supervisor.context.assemble import build_pack

    variables: dict[str, Any] = {
        "role": role,
        "task": task,
        "feedback": feedback,
        "plan": plan,
        "run_id": run_id,
        "degrade": degrade or "",  # a degraded attempt's reduced scope (prompts/_degrade.j2)
        "research": research,  # an investigator's report, for the planner (workflow/depth.py)
        "projects": projects or [],  # a monorepo's map, for the planner (plan_projects.py)
        # what the candidate did to the base's tests, for its reviewer (gates/base_oracle.py)
        "tests_changed": tests_changed or [],
    }
    bare, _ = redact(render(role.template, repo, role.schema, context_pack="", **variables))
    pack = build_pack(
        worktree,
        role,
        repo=repo,
        prompt_tokens=tokens.count(bare),
        targets=targets,
        diff=diff,
        scope=scope,
        ahead=ahead,
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
