"""A community role file as the role machinery may use it.

What a pack's role may not set is refused (manifest.refuse); its `template:` names the pack's own
template when the pack has one (rendered in the one sandboxed environment, through
prompts._Templates); the CLI and model it asks for are kept only when the user's own config
allows them (`roles: {pack_clis: [...], pack_models: [...]}`), else dropped with a warning, and
the role runs on what the base role and the task choose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from supervisor.context.packs.manifest import refuse
from supervisor.context.packs.store import find_installed, pack_settings
from supervisor.core.trust_records import warn

TEMPLATE_PREFIX = "@pack"  # prompts.PACK_PREFIX


def community_spec(
    path: Path, pack: str, raw: dict[str, Any], found: dict[str, Any]
) -> dict[str, Any]:
    refuse(raw, path, pack)
    template = found.get("template")
    if template and (path.parent.parent / "templates" / template).is_file():
        found["template"] = f"{TEMPLATE_PREFIX}/{pack}/{template}"
    context = found.get("context") or {}
    strategy = context.get("strategy")
    if strategy and (path.parent.parent / "context_strategies" / f"{strategy}.yaml").is_file():
        context["strategy"] = f"{TEMPLATE_PREFIX}/{pack}/{strategy}"
    settings = pack_settings()
    clis = [found["cli"]] if isinstance(found.get("cli"), str) else found.get("cli") or []
    refused_clis = [c for c in clis if not _allowed(c, settings.pack_clis)]
    if refused_clis:
        del found["cli"]
        warn(
            f"Role pack '{pack}' asks for CLI {', '.join(refused_clis)} in {path}; not used: "
            "your config does not allow it (add it to `roles: {pack_clis: [...]}` in "
            "~/.supervisor/config.yaml)."
        )
    models = {k: v for k, v in (found.get("models") or {}).items()}
    wanted = [m for m in [found.get("model"), *models.values()] if m]
    refused_models = sorted({m for m in wanted if not _allowed(m, settings.pack_models)})
    if refused_models:
        if found.get("model") in refused_models:
            del found["model"]
        kept = {k: v for k, v in models.items() if v not in refused_models}
        if kept:
            found["models"] = kept
        else:
            found.pop("models", None)
        warn(
            f"Role pack '{pack}' asks for model {', '.join(refused_models)} in {path}; not "
            "used: your config does not allow it (add it to `roles: {pack_models: [...]}` in "
            "~/.supervisor/config.yaml)."
        )
    return found


def pack_strategy(repo: Path | None, name: str) -> Path:
    """The file of an installed pack's context strategy (`@pack/<pack>/<name>`), once the pack
    matches its lock."""
    from supervisor.core.errors import ConfigError

    parts = name.split("/")
    found = find_installed(repo, parts[1]) if len(parts) == 3 else None
    path = found.pack().root / "context_strategies" / f"{parts[2]}.yaml" if found else None
    if path is None or not path.is_file() or path.is_symlink():
        raise ConfigError(
            f"Context strategy '{name}' is not in an installed pack.",
            "Install the pack (`supervisor role install`), or name a built-in strategy.",
        )
    return path


def _allowed(value: str, allowed: list[str]) -> bool:
    return "*" in allowed or value in allowed
