"""Recursive decomposition: when a component becomes a sub-plan, and what a sub-plan may say.

Why: a component that is too big for one worker, or that keeps failing its gates, used to be
retried at the same size until the task failed. Here it is split instead (as ADaPT does on
failure): its planner is asked for a sub-plan of that component only, whose sub-components run
side by side like any component, merge into the parent's branch, and the parent's gates then
judge the merged result (the QA pass) before the parent merges upward. Depth is bounded; past the
bound, or when the QA pass keeps failing, the component runs on its role's next CLI, and after
that a person decides (the task waits, exit 10).

This module only decides (no git, no workers, no store): the fan-out records what it saw as a
`Node` with status `requested`/`proposed`/`invalid`/`qa_failed`, and the engine (decide.py)
turns those into the tree's next state through `settle`, one transition. The tree lives in the
workflow's typed state (`WorkflowState.decomposition`), keyed by the parent component's id;
sub-component ids are the parent's id plus a dot and a number (`c2.1`, `c2.1.3`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from supervisor.core.strict_model import StrictModel
from supervisor.state.records import EventSpec

if TYPE_CHECKING:
    from supervisor.core.config import DecompositionLimits

EXPAND = "expand"
"""The fan-out's result when its tree must change: the engine settles it (decide.py)."""

Trigger = Literal["too_large", "failed", "scope", "qa_failed"]
Status = Literal[
    "requested", "planning", "proposed", "invalid", "expanded", "qa_failed", "retrying", "blocked"
]


class Node(StrictModel):
    """One component's place in the decomposition tree: why it was split, into what."""

    status: Status
    trigger: Trigger
    reason: str
    depth: int = Field(ge=1)
    """The level of its sub-components: 1 under a component of the plan."""
    cli: str | None = None
    """The CLI its worker last ran on (where a retry on another CLI starts)."""
    clis_tried: list[str] = Field(default_factory=list)
    retry_cli: str | None = None
    """The CLI its next run uses, after a retry on another CLI."""
    plan_attempts: int = 0
    problem: str = ""
    """Why the last sub-plan was sent back, or why the node waits for a person."""
    proposal: list[dict[str, Any]] | None = None
    """A validated sub-plan the engine has not installed yet."""
    children: list[dict[str, Any]] = Field(default_factory=list)
    """The installed sub-components (ComponentDefinition fields, ids already `<parent>.<n>`)."""
    failures: list[str] = Field(default_factory=list)
    """What happened to it, in order: shown by `status` when a person must decide."""


class Tree(StrictModel):
    nodes: dict[str, Node] = Field(default_factory=dict)

    def parent_of(self, cid: str) -> str | None:
        for parent, node in self.nodes.items():
            if any(child["id"] == cid for child in node.children):
                return parent
        return None

    def depth_of(self, cid: str) -> int:
        """0 for a component of the plan, 1 for its sub-components, and so on."""
        depth, parent = 0, self.parent_of(cid)
        while parent is not None:
            depth, parent = depth + 1, self.parent_of(parent)
        return depth

    def children(self) -> dict[str, list[dict[str, Any]]]:
        """Parent -> its installed sub-components, as supervisor.core.dag.flatten takes them."""
        return {cid: node.children for cid, node in self.nodes.items() if node.children}

    def lineage(self, cid: str) -> list[str]:
        """The component and its ancestors, nearest first."""
        found = [cid]
        parent = self.parent_of(cid)
        while parent is not None:
            found.append(parent)
            parent = self.parent_of(parent)
        return found


# -- what the fan-out asks -------------------------------------------------------------------


@dataclass(frozen=True)
class PackFact:
    """What the acting side measured of a component's context pack before any worker starts:
    the tokens its planned scope needs (the task and the component's own files as they would be
    packed, before any pruning) against its role's `context.token_budget`."""

    role: str
    tokens: int
    budget: int


def over_scope(
    comp_files: list[str],
    estimated_lines: int,
    depth: int,
    limits: DecompositionLimits,
    pack: PackFact | None = None,
) -> str | None:
    """Why a component's planned scope is too big for one worker, or None. A component at the
    depth bound runs as it is: splitting it is no longer possible. A pack over the budget would
    be pruned to fit, so its worker would not even see all of its own files: split instead."""
    if depth >= limits.max_depth:
        return None
    if pack is not None and pack.tokens > pack.budget:
        return (
            f"its context pack would take {pack.tokens} tokens, over the {pack.role} role's "
            f"token budget ({pack.budget}, context.token_budget)"
        )
    if len(comp_files) > limits.max_files:
        return (
            f"it names {len(comp_files)} files, over limits.decomposition.max_files "
            f"({limits.max_files})"
        )
    if estimated_lines > limits.max_estimated_lines:
        return (
            f"it is estimated at {estimated_lines} lines, over "
            f"limits.decomposition.max_estimated_lines ({limits.max_estimated_lines})"
        )
    return None


def request(tree: Tree, cid: str, trigger: Trigger, reason: str, cli: str | None) -> Node:
    """Record that `cid` should be split (or, for `qa_failed`, that its merged sub-components
    failed the QA pass); the engine decides what happens to it."""
    node = tree.nodes.get(cid)
    depth = tree.depth_of(cid) + 1
    if node is None:
        node = Node(status="requested", trigger=trigger, reason=reason, depth=depth, cli=cli)
        tree.nodes[cid] = node
    else:
        node.status = "qa_failed" if trigger == "qa_failed" else "requested"
        node.trigger, node.reason, node.cli = trigger, reason, cli
    node.failures.append(f"{trigger}: {reason[:400]}")
    return node


# -- what a sub-plan may say -----------------------------------------------------------------


def validate_subplan(
    parent: str, parent_files: list[str], plan: dict[str, Any], taken: set[str]
) -> tuple[list[dict[str, Any]], str | None]:
    """The sub-components of a planner's sub-plan for `parent`, renumbered `<parent>.<n>`, or
    the reason it is refused: fewer than two components, a dependency outside the sub-plan (a
    sibling is the only thing a sub-component may wait for: the parent's own dependencies are
    already its), a cycle, or a file outside the parent's files (or, when the parent names none,
    a file another component owns: `taken`)."""
    import networkx as nx

    defs: list[dict[str, Any]] = []
    phase_of: dict[str, int] = {}
    for i, phase in enumerate(plan.get("phases") or []):
        for comp in phase.get("components") or []:
            defs.append(comp)
            phase_of[comp["id"]] = i
    if len(defs) < 2:
        return [], (
            f"A sub-plan must split component '{parent}' into at least two components; it "
            f"has {len(defs)}."
        )
    ids = [d["id"] for d in defs]
    if len(set(ids)) != len(ids):
        return [], f"The sub-plan of '{parent}' names a component twice."
    deps = {d["id"]: list(d.get("depends_on") or []) for d in defs}
    for dep in plan.get("dependencies") or []:
        if dep["source"] in deps and dep["target"] not in deps[dep["source"]]:
            deps[dep["source"]].append(dep["target"])
    for cid, targets in deps.items():
        outside = [t for t in targets if t not in deps]
        if outside:
            return [], (
                f"Sub-component '{cid}' depends on {', '.join(outside)}, outside the sub-plan of "
                f"'{parent}': a sub-component may depend on its siblings only (the parent's own "
                "dependencies are already done before any of them starts)."
            )
    graph: Any = nx.DiGraph()
    graph.add_nodes_from(ids)
    graph.add_edges_from((t, cid) for cid, targets in deps.items() for t in targets)
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        path = " → ".join([edge[0] for edge in cycle] + [cycle[0][0]])
        return [], f"The sub-plan of '{parent}' has a dependency cycle: {path}."
    for d in defs:
        strays = [f for f in d.get("files") or [] if not _allowed(f, parent_files, taken)]
        if strays:
            scope = ", ".join(parent_files) if parent_files else "files no other component owns"
            return [], (
                f"Sub-component '{d['id']}' names {', '.join(strays)}, outside the scope of "
                f"'{parent}' ({scope})."
            )
    new_id = _numbering(parent, ids, taken)
    children = []
    for d in defs:
        later = [x["id"] for x in defs if phase_of[x["id"]] < phase_of[d["id"]]]
        children.append(
            {
                "id": new_id[d["id"]],
                "description": d["description"],
                "files": list(d.get("files") or []),
                "depends_on": [new_id[t] for t in dict.fromkeys([*later, *deps[d["id"]]])],
                "estimated_lines": int(d.get("estimated_lines") or 0),
            }
        )
    return children, None


def _allowed(path: str, parent_files: list[str], taken: set[str]) -> bool:
    if parent_files:
        return any(path == f or (f.endswith("/") and path.startswith(f)) for f in parent_files)
    return path not in taken


def _numbering(parent: str, ids: list[str], taken: set[str]) -> dict[str, str]:
    """`<parent>.1`, `<parent>.2`, ... in plan order, skipping an id the plan already uses."""
    found: dict[str, str] = {}
    n = 0
    for cid in ids:
        n += 1
        while f"{parent}.{n}" in taken:
            n += 1
        found[cid] = f"{parent}.{n}"
    return found


# -- the engine's settlement -----------------------------------------------------------------


@dataclass
class Settled:
    """What `settle` did to the tree: the events of the move, and whether a person must now
    decide (the task waits, as for an approval)."""

    events: list[EventSpec] = field(default_factory=list)
    info: list[str] = field(default_factory=list)
    human: bool = False


def settle(
    tree: Tree,
    components: dict[str, dict[str, Any]],
    step: str,
    limits: DecompositionLimits,
    role_clis: list[str],
) -> Settled:
    """Every pending change to the tree, decided: a requested split within the depth bound goes
    to its planner; a validated sub-plan is installed; an invalid one goes back to its planner
    with the reason, until `max_plan_attempts`; past the depth bound, or after a failed QA pass,
    the component runs again on its role's next untried CLI, and when none is left it is blocked
    and a person decides. `components` (the fan-out's progress) is updated to match."""
    done = Settled()
    for cid, node in tree.nodes.items():
        if node.status == "requested" and node.depth <= limits.max_depth:
            node.status, node.plan_attempts, node.problem = "planning", 0, ""
            done.events.append(_event("component_expanding", step, cid, node))
            done.info.append(f"component {cid} is split into a sub-plan ({node.reason[:120]})")
        elif node.status == "proposed" and node.proposal is not None:
            node.children, node.proposal, node.status = node.proposal, None, "expanded"
            entry = components.setdefault(cid, {"status": "pending", "attempts": 0})
            entry.update(status="pending", attempts=0)
            for child in node.children:
                components[child["id"]] = {"status": "pending", "attempts": 0}
            done.events.append(
                _event(
                    "component_expanded",
                    step,
                    cid,
                    node,
                    children=[c["id"] for c in node.children],
                )
            )
            done.info.append(
                f"component {cid} expanded into {', '.join(c['id'] for c in node.children)}"
            )
        elif node.status == "invalid":
            node.plan_attempts += 1
            if node.plan_attempts < limits.max_plan_attempts:
                node.status = "planning"
                done.events.append(_event("subplan_rejected", step, cid, node))
            else:
                node.failures.append(f"sub-plan refused: {node.problem[:400]}")
                _block(node, cid, step, f"its sub-plan was refused: {node.problem}", done)
        elif node.status in ("requested", "qa_failed"):
            why = (
                f"the depth bound (limits.decomposition.max_depth {limits.max_depth}) is reached"
                if node.status == "requested"
                else "its sub-components' merged work failed the QA pass"
            )
            untried = [c for c in role_clis if c not in {*node.clis_tried, node.cli}]
            if not untried:
                _block(node, cid, step, why, done)
                continue
            node.clis_tried = [c for c in dict.fromkeys([*node.clis_tried, node.cli]) if c]
            node.retry_cli = untried[0]
            # A split component's fix-up, or an unsplit one whole, on the next CLI.
            node.status = "expanded" if node.children else "retrying"
            entry = components.setdefault(cid, {"status": "pending", "attempts": 0})
            entry.update(status="pending", attempts=0)
            done.events.append(
                _event("component_retry_cli", step, cid, node, why=why, to=untried[0])
            )
            done.info.append(f"component {cid}: {why}; it runs again on {untried[0]}")
    return done


def unblock(tree: Tree, components: dict[str, dict[str, Any]], max_depth: int) -> None:
    """After a person let a blocked task go on (approve, then resume): each blocked component
    tries again from where it stood: a split one's QA pass, a refused sub-plan's planning, an
    unsplittable one whole. (A person who changed the limits or the task sees the change.)"""
    for cid, node in tree.nodes.items():
        if node.status != "blocked":
            continue
        if node.children:
            node.status = "expanded"
        elif node.trigger != "qa_failed" and node.depth <= max_depth:
            node.status, node.plan_attempts = "planning", 0
        else:
            node.status = "retrying"
        node.problem = ""
        entry = components.setdefault(cid, {"status": "pending", "attempts": 0})
        if entry.get("status") != "merged":
            entry.update(status="pending", attempts=0)


def _block(node: Node, cid: str, step: str, why: str, done: Settled) -> None:
    node.status, node.problem = "blocked", why
    done.human = True
    done.events.append(_event("decomposition_blocked", step, cid, node, why=why))
    done.info.append(f"component {cid} needs a person: {why}")


def _event(kind: str, step: str, cid: str, node: Node, **extra: Any) -> EventSpec:
    payload = {
        "component": cid,
        "trigger": node.trigger,
        "reason": node.reason[:1000],
        "depth": node.depth,
        **extra,
    }
    if node.problem:
        payload["problem"] = node.problem[:1000]
    return EventSpec(kind, step=step, status=node.status, payload=payload)


# -- the tree as one work graph --------------------------------------------------------------


def describe(tree: Tree, plan: dict[str, Any] | None) -> list[tuple[int, str]]:
    """(depth, component id) of every component, parents before their sub-components: the
    order `status`, the TUI and `analyze-deps` show the tree in."""
    found: list[tuple[int, str]] = []

    def walk(cid: str, depth: int) -> None:
        found.append((depth, cid))
        node = tree.nodes.get(cid)
        for child in node.children if node is not None else []:
            walk(child["id"], depth + 1)

    for phase in (plan or {}).get("phases") or []:
        for comp in phase.get("components") or []:
            walk(comp["id"], 0)
    return found


def blocked_summary(context: dict[str, Any]) -> str:
    """What a person is told (the exit-10 message, the notification): each component whose
    split went as far as it could, why, and what it went through; "" when none."""
    nodes = (context.get("decomposition") or {}).get("nodes") or {}
    said = [
        f"component {cid} (depth {n.get('depth')}) needs you: {n.get('problem')} "
        f"[{'; '.join(n.get('failures') or [])[-300:]}]"
        for cid, n in nodes.items()
        if n.get("status") == "blocked"
    ]
    return f" ({'; '.join(said)})" if said else ""
