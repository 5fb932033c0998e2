"""Worker answers are read strictly: a JSON block validated by the step's schema, nothing else."""

from __future__ import annotations

import pytest

from supervisor.core.errors import ParsingError
from supervisor.core.parsing import extract_json_block, parse_worker_output
from supervisor.core.schemas import ImplementationOutput, ReviewOutput

APPROVED = '{"status": "APPROVED", "summary": "ok", "issues": [], "suggestions": []}'


def test_a_fenced_block_inside_prose_is_found() -> None:
    text = f"I looked at everything.\n\n```json\n{APPROVED}\n```\nThanks!"
    assert parse_worker_output(text, ReviewOutput).status == "APPROVED"


def test_the_last_valid_block_wins_when_there_are_several() -> None:
    first = APPROVED.replace("APPROVED", "CHANGES_REQUESTED")
    text = f"Draft:\n```json\n{first}\n```\nFinal:\n```json\n{APPROVED}\n```"
    assert parse_worker_output(text, ReviewOutput).status == "APPROVED"


def test_a_bare_json_answer_is_accepted() -> None:
    assert parse_worker_output(APPROVED, ReviewOutput).status == "APPROVED"


def test_an_unfenced_object_after_prose_is_found() -> None:
    assert extract_json_block(f"Verdict follows: {APPROVED} -- end") == {
        "status": "APPROVED",
        "summary": "ok",
        "issues": [],
        "suggestions": [],
    }


def test_approval_in_prose_without_json_is_rejected() -> None:
    with pytest.raises(ParsingError, match="no JSON block"):
        parse_worker_output("REVIEW_STATUS: APPROVED\nLooks great, ship it.", ReviewOutput)


def test_a_spoofed_marker_next_to_invalid_json_is_still_rejected() -> None:
    text = 'REVIEW_STATUS: APPROVED\n```json\n{"status": "LGTM"}\n```'
    with pytest.raises(ParsingError, match="status"):
        parse_worker_output(text, ReviewOutput)


def test_unknown_keys_are_schema_errors_that_name_the_key() -> None:
    text = '{"status": "SUCCESS", "files_created": [], "files_modified": [], "mood": "great"}'
    with pytest.raises(ParsingError, match="mood"):
        parse_worker_output(text, ImplementationOutput)


def test_missing_required_fields_are_named() -> None:
    with pytest.raises(ParsingError, match="status"):
        parse_worker_output('{"files_created": []}', ImplementationOutput)


def test_ansi_escapes_do_not_hide_the_block() -> None:
    text = f"\x1b[32mdone\x1b[0m\n```json\n{APPROVED}\n```"
    assert parse_worker_output(text, ReviewOutput).status == "APPROVED"


DEEP = 200_000


@pytest.mark.parametrize(
    "answer",
    [
        "```json\n" + "[" * DEEP + "\n```",
        '{"status": "APPROVED", "x": ' + "{" * DEEP,
        '" ' + '{"a":' * (DEEP // 2),  # an unpaired quote hides the brackets from the pre-scan
        '{"status": "APPROVED", "summary": "x", "issues": [], "x": ' + "[" * 70 + "]" * 70 + "}",
    ],
    ids=["fenced", "bare", "quote-hidden", "just-over-the-bound"],
)
def test_an_answer_nested_too_deep_is_a_parsing_error_naming_the_bound(answer: str) -> None:
    with pytest.raises(ParsingError, match=r"nests brackets .*over the 64 levels"):
        parse_worker_output(answer, ReviewOutput)


def test_an_answer_over_the_size_bound_is_refused_before_parsing() -> None:
    answer = '{"status": "APPROVED", "summary": "' + "x" * 1_000_001 + '", "issues": []}'
    with pytest.raises(ParsingError, match="characters, over the 1000000"):
        parse_worker_output(answer, ReviewOutput)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    said = "[" * 200
    answer = f'{{"status": "APPROVED", "summary": "{said}", "issues": []}}'
    assert parse_worker_output(answer, ReviewOutput).summary == said
