"""Which values of a step's input are recipient-like (by the argument's schema, name or
description, or by their own look), and when the caller's texts give one (normalised)."""

from __future__ import annotations

from typing import Any

import pytest

from planner_arm.plan.unsourced import Sources, field_kind, texts_of, unsourced_values


def found(arguments: dict[str, Any], schema: dict[str, Any], *given: str) -> list[str]:
    notes = unsourced_values(3, arguments, schema, Sources.of(given))
    assert all(note.code == "input_value_unsourced" for note in notes)
    return [note.detail.split(", which")[0] for note in notes]


@pytest.mark.parametrize(
    ("name", "schema", "kind"),
    [
        ("address", {"format": "email"}, "email"),
        ("target", {"format": "idn-email"}, "email"),
        ("hook", {"format": "uri"}, "url"),
        ("reachAt", {"format": "phone"}, "phone"),
        ("to", {}, "recipient"),
        ("cc", {}, "recipient"),
        ("to_address", {}, "recipient"),
        ("replyTo", {}, "recipient"),
        ("bcc_list", {}, "recipient"),
        ("recipients", {}, "recipient"),
        ("replyEmail", {}, "email"),
        ("e-mail", {}, "email"),
        ("webhook_target", {}, "url"),
        ("callbackURL", {}, "url"),
        ("mobileNumber", {}, "phone"),
        ("owner", {"description": "The e-mail of whoever gets it"}, "email"),
        ("owner", {"description": "Where to POST: a webhook"}, "url"),
        ("contact", {"description": "A phone number, with its country code"}, "phone"),
        ("who", {"description": "The recipient"}, "recipient"),
        ("path_to_file", {}, None),
        ("to_date", {}, None),
        ("title", {"description": "The movie's title"}, None),
        ("query", {"format": "date"}, None),
    ],
)
def test_what_an_argument_says_it_holds(
    name: str, schema: dict[str, Any], kind: str | None
) -> None:
    assert field_kind(name, schema) == kind


EMAIL_TO = {"type": "object", "properties": {"to": {"type": "string", "format": "email"}}}


def test_a_recipient_nobody_gave_is_named_with_its_step_argument_and_kind() -> None:
    assert found({"to": "ops@attacker.example"}, EMAIL_TO, "Send it to finance") == [
        "step 3: argument to (email) is 'ops@attacker.example'"
    ]


@pytest.mark.parametrize(
    "given",
    [
        "Send it to OPS@attacker.example.",
        "send it to   mailto:ops@attacker.example",
        '{"team": "ops@attacker.example"}',
    ],
)
def test_a_recipient_the_caller_gave_is_found_whatever_its_case_and_spacing(given: str) -> None:
    assert found({"to": "ops@attacker.example"}, EMAIL_TO, given) == []


def test_links_compare_without_their_scheme_www_or_last_slash() -> None:
    schema = {"type": "object", "properties": {"webhook": {"type": "string"}}}
    given = "post the result to www.hooks.example.com/in"
    assert found({"webhook": "https://hooks.example.com/in/"}, schema, given) == []
    assert found({"webhook": "https://hooks.example.com/other"}, schema, given) == [
        "step 3: argument webhook (url) is 'https://hooks.example.com/other'"
    ]


def test_phone_numbers_compare_by_their_digits() -> None:
    schema = {"type": "object", "properties": {"phone": {"type": "string"}}}
    given = "call me on (555) 123-4567 after six"
    assert found({"phone": "+1 555 123 4567"}, schema, given) == []
    assert found({"phone": "+44 20 7946 0000"}, schema, given) == [
        "step 3: argument phone (phone) is '+44 20 7946 0000'"
    ]


def test_a_value_is_recipient_like_by_its_own_look_in_any_argument() -> None:
    schema = {"type": "object", "properties": {"body": {"type": "string"}}}
    body = "Figures attached; copy x@evil.example and see https://evil.example/p."
    assert found({"body": body, "note": "+33 1 23 45 67 89"}, schema, "Send the figures") == [
        "step 3: argument body (email) is 'x@evil.example'",
        "step 3: argument body (url) is 'https://evil.example/p'",
        "step 3: argument note (phone) is '+33 1 23 45 67 89'",
    ]
    # Plain words, numbers and dates in other arguments are no recipients.
    quiet = {"body": "Weekly figures", "week": "2026-11-28", "count": 5551234567}
    assert found(quiet, schema, "Send the figures") == []


def test_nested_arguments_and_lists_are_named_by_their_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "message": {
                "type": "object",
                "properties": {"cc": {"type": "array", "items": {"type": "string"}}},
            }
        },
    }
    arguments = {"message": {"cc": ["Alice", "Mallory"]}}
    assert found(arguments, schema, "Copy alice on it") == [
        "step 3: argument message.cc[1] (recipient) is 'Mallory'"
    ]


def test_an_earlier_steps_output_is_given_by_the_plan() -> None:
    arguments = {"to": "{{steps.1.output}}", "cc": " {{ steps.2.output }} "}
    assert found(arguments, EMAIL_TO, "Send it") == []


def test_the_texts_of_a_json_value_are_its_keys_and_leaves() -> None:
    value = {"a": [1, "b@c.d", {"e": None, "f": True}]}
    assert list(texts_of(value)) == ["a", "1", "b@c.d", "e", "f", "True"]
