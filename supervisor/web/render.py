"""HTML from the dashboard's own templates (supervisor/web/templates), never a repository's.

Autoescaping is on for every template, and every value a worker, a model or a repository wrote
also goes through `visible` (control characters and bidirectional overrides shown, not obeyed)
before it is escaped. A diff is highlighted by Pygments, which escapes what it highlights; the
page's one script sets text with `textContent`, never markup.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from supervisor.guard.visible import visible
from supervisor.views.listing import Listing, shown

MAX_HIGHLIGHTED = 200_000
"""Characters of one file's diff highlighted; a longer one is shown plain (Pygments is linear,
but a page of megabytes helps nobody)."""


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("supervisor.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["shown"] = lambda value: visible("" if value is None else value)
    env.filters["diff"] = highlighted_diff
    env.filters["money"] = lambda value: f"${float(value or 0):.2f}"
    env.filters["json"] = lambda value: visible(json.dumps(value, default=str, indent=1))
    env.globals["cells"] = cells
    return env


def page(name: str, **values: Any) -> str:
    return environment().get_template(name).render(**values)


CELL = 600
"""Characters of one table cell: an event's payload can be a worker's whole answer (the whole of
it is `supervisor events <id> --json`'s)."""


def cells(listing: Listing) -> list[list[str]]:
    """A listing's rows as one-line texts, as a pipe gets them (supervisor/views/listing.py),
    each cut to CELL characters."""
    kinds = [c.kind for c in listing.columns]
    return [
        [_cut(shown(cell, kind)) for cell, kind in zip(row, kinds, strict=True)]
        for row in listing.rows
    ]


def _cut(text: str) -> str:
    return text if len(text) <= CELL else text[:CELL] + f"… ({len(text) - CELL} more)"


def highlighted_diff(text: str) -> Markup:
    from pygments import highlight  # type: ignore[import-untyped]
    from pygments.formatters import HtmlFormatter  # type: ignore[import-untyped]
    from pygments.lexers import DiffLexer  # type: ignore[import-untyped]

    text = visible(text)
    if len(text) > MAX_HIGHLIGHTED:
        return Markup("<pre class='plain'>{}</pre>").format(text)
    return Markup(highlight(text, DiffLexer(), HtmlFormatter(cssclass="hl")))  # Pygments escapes it


def highlight_css() -> str:
    from pygments.formatters import HtmlFormatter

    return str(HtmlFormatter(style="default").get_style_defs(".hl"))
