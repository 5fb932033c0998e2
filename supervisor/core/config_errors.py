"""A configuration that does not fit its schema, said in the words of the person who wrote it.

pydantic says `limits.step_timeout_secs: Extra inputs are not permitted` about a whole cascade of
files; a person needs the file that holds the mistake, the key's path in it, what the key must
be, and for a misspelt key the one it was probably meant to be. The known keys come from the
schema itself (the models' fields, walked along the key's path), so a new setting is suggested
as soon as it exists. Pure: no files are read here; the caller passes what it loaded.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin

from pydantic import BaseModel

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails

Layers = Sequence[tuple[str, Any]]
"""(where it came from, its data), lowest precedence first: the cascade's files."""

LISTED = 16
"""Known keys named when none is close to a misspelt one; more say less."""
CLOSE = 0.7
"""difflib's likeness a known key needs to be suggested: at 0.6 `max_retrys` (a step's
setting) was offered `limits.max_prompt_bytes`, a wrong guess worse than none."""


def message(model: type[BaseModel], error: ValidationError, layers: Layers) -> str:
    """Every problem, under the file that holds it: `<file>: `<key path>` <what is wrong>.`,
    several in one file a line each under `<file> has 2 problems:`."""
    by_file: dict[str, list[str]] = {}
    for where, said in problems(model, error, layers):
        by_file.setdefault(where, []).append(said)
    parts = [
        _ended(f"{where}: {found[0]}")
        if len(found) == 1
        else f"{where} has {len(found)} problems:" + "".join(f"\n  {_ended(f)}" for f in found)
        for where, found in by_file.items()
    ]
    return "\n".join(parts)


def _ended(said: str) -> str:
    return said if said.endswith(("?", ".")) else f"{said}."


def problems(
    model: type[BaseModel], error: ValidationError, layers: Layers
) -> list[tuple[str, str]]:
    """(the file that holds it, `<key path>` <what is wrong>) a problem."""
    return [_problem(model, detail, layers) for detail in error.errors()]


def _problem(model: type[BaseModel], detail: ErrorDetails, layers: Layers) -> tuple[str, str]:
    loc = tuple(detail["loc"])
    key = f"`{dotted(loc)}`" if loc else "the file"
    where = _source(loc, layers) or " < ".join(name for name, _ in layers)
    return where, f"{key} {_what(model, detail, loc)}"


def dotted(loc: Sequence[int | str]) -> str:
    """`steps.implement.role`, `projects[0].path`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _what(model: type[BaseModel], detail: ErrorDetails, loc: tuple[int | str, ...]) -> str:
    kind, ctx, value = detail["type"], detail.get("ctx") or {}, detail.get("input")
    if kind == "extra_forbidden":
        return _unknown(model, loc)
    if kind == "missing":
        return "is required and not set"
    if kind == "literal_error":
        return _choice(str(ctx.get("expected", "")), value)
    bounds = {
        "greater_than": f"must be more than {ctx.get('gt')}",
        "greater_than_equal": f"must be at least {ctx.get('ge')}",
        "less_than": f"must be less than {ctx.get('lt')}",
        "less_than_equal": f"must be at most {ctx.get('le')}",
    }
    if kind in bounds:
        return f"{bounds[kind]}, not {_shown(value)}"
    for prefix, must in KINDS:
        if kind.startswith(prefix):
            return f"must be {must}, not {_shown(value)}"
    if kind in ("value_error", "assertion_error"):
        return f"is refused: {str(detail['msg']).split(', ', 1)[-1]}"
    return f"is refused: {detail['msg']}"


KINDS = (
    ("int_", "a whole number"),
    ("float_", "a number"),
    ("bool_", "true or false"),
    ("string_", "text"),
    ("dict_", "a mapping (key: value lines)"),
    ("model_", "a mapping (key: value lines)"),
    ("list_", "a list"),
    ("tuple_", "a list"),
    ("set_", "a list"),
)
"""pydantic's error types by prefix, and what the value must be instead."""


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:59] + "…"


def _unknown(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """A key the schema does not have: the closest known key at that place, else the known."""
    known = known_keys(model, loc[:-1])
    said = "is not a setting"
    if not known:
        return said
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=CLOSE)
    if close:
        return f"{said}; did you mean `{dotted((*loc[:-1], close[0]))}`?"
    names = ", ".join(sorted(known)[:LISTED]) + (", …" if len(known) > LISTED else "")
    return f"{said} (the settings here: {names})"


def _choice(expected: str, value: Any) -> str:
    """A value outside a fixed set: the set, and the member it was probably meant to be."""
    options = re.findall(r"'([^']*)'", expected)
    said = f"must be one of {', '.join(repr(o) for o in options) or expected}, not {_shown(value)}"
    close = difflib.get_close_matches(str(value), options, n=1, cutoff=CLOSE)
    return f"{said}; did you mean {close[0]!r}?" if close else said


def known_keys(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys the schema allows at `loc` (a path into `model`): a model's fields and their
    aliases; [] where the place is free-form (a mapping of names, a plain value)."""
    here: Any = model
    for part in loc:
        here = _inside(here, part)
        if here is None:
            return []
    found = _model_in(here)
    if found is None:
        return []
    names = []
    for name, field in found.model_fields.items():
        names.append(name)
        if field.alias and field.alias != name:
            names.append(field.alias)
    return names


def _inside(annotation: Any, part: int | str) -> Any:
    """The type found one step down `annotation` at `part` (a field, a mapping's value, a
    list's item); None when the schema cannot say."""
    found = _model_in(annotation)
    if found is not None:
        for name, field in found.model_fields.items():
            if part in (name, field.alias):
                return field.annotation
        return None
    origin = get_origin(annotation)
    args = get_args(annotation)
    if isinstance(origin, type) and issubclass(origin, Mapping) and len(args) == 2:
        return args[1]
    if isinstance(origin, type) and issubclass(origin, Sequence) and args:
        return args[0]
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model `annotation` is, or the one model in its union with None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        models = [m for a in get_args(annotation) if (m := _model_in(a)) is not None]
        return models[0] if len(models) == 1 else None
    return None


def _source(loc: tuple[int | str, ...], layers: Layers) -> str | None:
    """The layer that set `loc` (the last one holding it: its value is the one in force), else
    the only layer, else None (a key no file set: a required one left out)."""
    for name, data in reversed(layers):
        if _holds(data, loc):
            return name
    return layers[0][0] if len(layers) == 1 else None


def _holds(data: Any, loc: tuple[int | str, ...]) -> bool:
    for part in loc:
        listed = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if not (listed or (isinstance(data, Mapping) and part in data)):
            return False
        data = data[part]
    return True
