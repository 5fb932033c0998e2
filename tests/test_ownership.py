"""Who may change which file when a plan's components run side by side."""

from __future__ import annotations

from supervisor.core.dag import WorkGraph
from supervisor.core.schemas import PlanOutput
from supervisor.workflow import ownership


def graph(**files: list[str]) -> WorkGraph:
    components = [
        {"id": cid, "description": cid, "files": paths, "depends_on": []}
        for cid, paths in files.items()
    ]
    return WorkGraph.from_plan(
        PlanOutput.model_validate(
            {
                "status": "COMPLETE",
                "phases": [{"id": "p1", "description": "p", "components": components}],
                "estimated_components": len(components),
            }
        )
    )


def test_a_file_another_component_declares_is_out_of_scope_and_names_its_owner() -> None:
    work = graph(square=["square.py"], circle=["circle.py"])

    strays, new = ownership.check("circle", ["circle.py", "square.py"], work, {})

    assert strays == {"square.py": ["square"]}
    assert new == []
    text = ownership.scope_feedback("circle", strays, ["circle.py"])
    assert "square.py (belongs to component 'square')" in text
    assert "circle.py" in text


def test_a_folder_entry_covers_the_files_under_it() -> None:
    work = graph(api=["app/api/"], ui=["app/ui.py"])

    assert ownership.check("ui", ["app/api/routes.py"], work, {})[0] == {
        "app/api/routes.py": ["api"]
    }
    assert ownership.check("api", ["app/api/routes.py"], work, {}) == ({}, [])


def test_an_undeclared_file_goes_to_the_first_component_that_changes_it() -> None:
    work = graph(square=["square.py"], circle=["circle.py"])
    claims: dict[str, str] = {}

    strays, new = ownership.check("square", ["square.py", "util.py"], work, claims)
    assert (strays, new) == ({}, ["util.py"])
    claims.update(dict.fromkeys(new, "square"))

    # from then on it counts as square's: circle may not change it, square may again
    assert ownership.check("circle", ["util.py"], work, claims)[0] == {"util.py": ["square"]}
    assert ownership.check("square", ["util.py"], work, claims) == ({}, [])


def test_a_file_two_components_declare_belongs_to_both() -> None:
    work = graph(a=["shared.py"], b=["shared.py", "b.py"])

    assert ownership.check("a", ["shared.py"], work, {}) == ({}, [])
    assert ownership.check("b", ["shared.py"], work, {}) == ({}, [])
