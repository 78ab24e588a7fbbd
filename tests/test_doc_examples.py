"""Docs that run: every example in README.md and docs/*.md is run and prints what the docs
say it prints; every code block is an example, an example's output, or marked not-run with a
reason. The convention and the runner: tests/support/doc_examples.py."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.doc_examples import (
    KINDS,
    Example,
    MarkupError,
    Services,
    check,
    examples,
    matches,
    normalise,
    parse_marker,
    unknown_setup_lines,
    workspace,
)

EXAMPLES, NOT_RUN, PROBLEMS = examples()


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    running = Services(tmp_path_factory.mktemp("doc-services"))
    try:
        yield running
    finally:
        running.stop()


def test_every_code_block_is_an_example_or_marked_not_run() -> None:
    assert not PROBLEMS, (
        "mark each block (tests/support/doc_examples.py says how):\n  " + "\n  ".join(PROBLEMS)
    )


def test_examples_of_every_kind_are_run() -> None:
    assert {example.kind for example in EXAMPLES} == set(KINDS)
    assert all(block.marker and block.marker.reason for block in NOT_RUN)


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.where)
def test_the_example_prints_what_the_docs_say(
    example: Example, services: Services, tmp_path: Path
) -> None:
    for tool in ("curl", "jq"):
        if re.search(rf"\b{tool}\b", example.source) and shutil.which(tool) is None:
            message = f"{example.where} runs {tool}, which is not installed"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
    problem = check(example, services, workspace(tmp_path))
    assert problem is None, problem


# --- the harness itself ------------------------------------------------------------------


def test_a_line_of_dots_stands_for_any_lines_and_dots_in_a_line_for_any_text() -> None:
    expected = "first\n...\nlast ends ...\n"
    assert matches(expected, "first\nlast ends here")
    assert matches(expected, "first\na\nb\nlast ends here and there")
    assert not matches(expected, "first\nlast\n")
    assert not matches(expected, "second\nlast ends here")
    assert not matches("first\n", "first\nmore")


def test_whitespace_can_be_ignored_but_not_the_text() -> None:
    expected = '{"plan": [\n  {"step": 1},\n  ...\n  {"step": 6}]}'
    assert matches(expected, '{"plan":[{"step":1},{"step":2},{"step":6}]}', ignore_whitespace=True)
    assert not matches(expected, '{"plan":[{"step":1},{"step":7}]}', ignore_whitespace=True)
    assert not matches(expected, '{"plan":[{"step":1},{"step":2},{"step":6}]}')


def test_what_changes_per_run_is_normalised_on_both_sides() -> None:
    documented = (
        '{"plan_id": "d2f03eb9a5d04054a83118ef96356096", "latency_ms": 1.297,'
        ' "request_id": "22b9ac5c-162f-4159-8572-30b3d94c0527"} Started server process [15528]'
    )
    printed = (
        '{"plan_id": "0123456789abcdef0123456789abcdef", "latency_ms": 12.5,'
        ' "request_id": "00000000-1111-2222-3333-444444444444"} Started server process [7]'
    )
    assert normalise(documented) == normalise(printed)
    assert normalise('{"confidence": 0.35}') != normalise('{"confidence": 0.36}')
    # The console pads the event to a column: a shorter PID is followed by more spaces.
    padded = "[info     ] Started server process [{}]{}[uvicorn.error]"
    assert normalise(padded.format(15528, " ")) == normalise(padded.format(9876, "  "))


def test_markers_name_a_kind_and_a_not_run_example_says_why() -> None:
    marker = parse_marker("<!-- example: shell service=no-model -->")
    assert marker is not None
    assert (marker.kind, marker.options) == (
        "shell",
        {"service": "no-model"},
    )
    assert parse_marker("a line of text") is None
    with pytest.raises(MarkupError):
        parse_marker("<!-- example: not-run -->")
    with pytest.raises(MarkupError):
        parse_marker("<!-- example: kubectl -->")


def test_a_block_without_a_marker_is_reported(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- example: shell -->\n```bash\necho hi\n```\n<!-- output -->\n```\nhi\n```\n\n"
        "```\n$ echo unchecked\nunchecked\n```\n"
        "<!-- example: kubectl -->\n```\nkubectl apply -k k8s\n```\n",
        encoding="utf-8",
    )
    found, _, problems = examples([doc])
    assert [(example.source, example.expected) for example in found] == [("echo hi\n", "hi\n")]
    assert problems == [
        f"{doc}:10: a code block with no marker before it",
        f"{doc}:15: not an example marker: '<!-- example: kubectl -->' (kinds: {KINDS})",
    ]


def test_set_up_lines_are_the_ones_the_script_prints() -> None:
    printed = (
        "setup: installing planner-arm[server] into .venv "
        "(pyproject.toml or constraints.txt changed)"
    )
    assert unknown_setup_lines([printed]) == []
    assert unknown_setup_lines(["setup: creating .venv with Python 3.11.7"]) != []
