"""Recipient-like values in a step's input that a model wrote and nobody gave it.

A tool's name or description can talk a model into filling `to: ops@attacker.example`; the
input still follows the tool's schema, so nothing else would say so. A value is recipient-like
by its argument (a JSON Schema `format` such as `email` or `uri`, a name such as `to`, `cc`,
`recipient`, `webhook`, `phone`, a description that says e-mail, URL or phone number) or by its
own look (an e-mail address or a URL anywhere in a string, a whole string that is a phone
number). It is unsourced when its normalised text is in none of the texts the caller gave:
the goal, the constraints, the context, the worked examples, the earlier steps' inputs and
outputs. Each one is named in a warning, `input_value_unsourced`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from planner_arm.plan.schemas import PlanNote

Kind = Literal["email", "url", "phone", "recipient"]

UNSOURCED_CODE = "input_value_unsourced"

_EMAIL = re.compile(r"[\w.%+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"(?:\b[a-z][a-z0-9+.-]*://|\bwww\.)[^\s<>\"'`{}|\\^]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]'\""
# A whole string that is a phone number by its look alone: international (+...) or grouped
# as 555-123-4567, (555) 123 4567.
_PHONE_LOOK = re.compile(r"\+\d[\d\s().-]{5,}\d|\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}")
# A phone number inside the caller's text, to compare digits with.
_PHONE_IN_TEXT = re.compile(r"\+?\d[\d\s().-]{5,}\d")
_MIN_PHONE_DIGITS = 7
_STEP_REFERENCE = re.compile(r"\{\{\s*steps\.\d+\.output\s*\}\}")
_NAME_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

_FORMATS: dict[str, Kind] = {
    "email": "email",
    "idn-email": "email",
    "uri": "url",
    "iri": "url",
    "uri-reference": "url",
    "iri-reference": "url",
    "uri-template": "url",
    "url": "url",
    "phone": "phone",
    "phone-number": "phone",
    "tel": "phone",
}
# A word anywhere in an argument's name (`replyEmail`, `webhook_url`, `recipients`).
_NAME_WORDS: dict[str, Kind] = {
    "email": "email",
    "emails": "email",
    "mail": "email",
    "mailto": "email",
    "url": "url",
    "urls": "url",
    "uri": "url",
    "href": "url",
    "webhook": "url",
    "callback": "url",
    "phone": "phone",
    "telephone": "phone",
    "tel": "phone",
    "mobile": "phone",
    "sms": "phone",
    "fax": "phone",
    "msisdn": "phone",
    "recipient": "recipient",
    "recipients": "recipient",
    "bcc": "recipient",
}
# `to` and `cc` name a recipient alone, before one of these (`to_address`, `cc_list`) or after
# one of these (`reply_to`, `send_to`); never in `path_to_file` or `to_date`.
_ADDRESSEE = frozenset({"to", "cc"})
_ADDRESSEE_NEXT = frozenset({"address", "addresses", "list", "user", "users", "number"})
_ADDRESSEE_BEFORE = frozenset({"reply", "send", "forward", "notify", "mail"})
_DESCRIPTION: tuple[tuple[re.Pattern[str], Kind], ...] = (
    (re.compile(r"\be-?mail\b", re.IGNORECASE), "email"),
    (re.compile(r"\b(?:url|uri|webhook)s?\b", re.IGNORECASE), "url"),
    (re.compile(r"\b(?:phone|telephone|mobile) numbers?\b", re.IGNORECASE), "phone"),
    (re.compile(r"\brecipients?\b", re.IGNORECASE), "recipient"),
)
# What a string's own look says, wherever in it: an e-mail address, a URL.
_LOOKS: tuple[tuple[re.Pattern[str], Kind], ...] = ((_EMAIL, "email"), (_URL, "url"))


def normalised(text: str) -> str:
    """`text` as it is compared: compatibility forms folded, case folded, spaces collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclass(frozen=True)
class Sources:
    """The texts the caller gave, normalised once for every value looked for in them."""

    text: str
    phones: frozenset[str]

    @classmethod
    def of(cls, texts: Iterable[str]) -> Sources:
        joined = "\n".join(normalised(text) for text in texts)
        phones = {_digits(found) for found in _PHONE_IN_TEXT.findall(joined)}
        return cls(joined, frozenset(d for d in phones if len(d) >= _MIN_PHONE_DIGITS))

    def give(self, kind: Kind, value: str) -> bool:
        """Whether these texts give `value` (of `kind`)."""
        if kind == "phone":
            digits = _digits(value)
            if len(digits) < _MIN_PHONE_DIGITS:
                return True  # too few digits to be a number anyone can be reached at
            return any(digits.endswith(d) or d.endswith(digits) for d in self.phones)
        key = normalised(value)
        if kind == "email":
            key = key.removeprefix("mailto:")
        elif kind == "url":
            key = re.sub(r"^[a-z][a-z0-9+.-]*://", "", key).removeprefix("www.").rstrip("/")
        return not key or key in self.text


def texts_of(value: Any) -> Iterator[str]:
    """Every string, number and key in `value` (a JSON value), as text."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield str(key)
            yield from texts_of(inner)
    elif isinstance(value, list | tuple):
        for inner in value:
            yield from texts_of(inner)
    elif value is not None:
        yield str(value)


def unsourced_values(
    step: int, arguments: Mapping[str, Any], schema: Mapping[str, Any], sources: Sources
) -> list[PlanNote]:
    """A warning for each recipient-like value of `arguments` (step `step`'s input, as its
    arm's `schema` describes it) that `sources` do not give."""
    notes: list[PlanNote] = []
    seen: set[tuple[str, str]] = set()
    for path, kind, value in _recipients(arguments, schema, "", None):
        if sources.give(kind, value) or (path, value) in seen:
            continue
        seen.add((path, value))
        shown = value if len(value) <= 120 else value[:117] + "..."
        detail = (
            f"step {step}: argument {path} ({kind}) is {shown!r}, which the model wrote and "
            "neither the goal, the constraints, the context, the worked examples nor an "
            "earlier step gives"
        )
        notes.append(PlanNote(code=UNSOURCED_CODE, detail=detail[:500]))
    return notes


def _recipients(
    value: Any, schema: Mapping[str, Any], path: str, kind: Kind | None
) -> Iterator[tuple[str, Kind, str]]:
    """(argument, kind, value) of each recipient-like value in `value`; `kind` is what the
    argument holding it says it is."""
    if isinstance(value, Mapping):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        for name, inner in value.items():
            sub = properties.get(name)
            sub = sub if isinstance(sub, Mapping) else {}
            where = f"{path}.{name}" if path else str(name)
            yield from _recipients(inner, sub, where, field_kind(str(name), sub) or kind)
    elif isinstance(value, list):
        items = schema.get("items")
        items = items if isinstance(items, Mapping) else {}
        for index, inner in enumerate(value):
            yield from _recipients(inner, items, f"{path}[{index}]", field_kind("", items) or kind)
    elif isinstance(value, str):
        yield from _in_text(path, value, kind)
    elif isinstance(value, int | float) and not isinstance(value, bool) and kind == "phone":
        yield path, kind, str(value)


def _in_text(path: str, value: str, kind: Kind | None) -> Iterator[tuple[str, Kind, str]]:
    text = _STEP_REFERENCE.sub(" ", value).strip()
    if not text:
        return  # an earlier step's output: given by the plan
    found = False
    for pattern, look in _LOOKS:
        for match in pattern.findall(text):
            found = True
            yield path, look, match.rstrip(_TRAILING)
    if found:
        return
    if kind is not None:
        yield path, kind, text
    elif _PHONE_LOOK.fullmatch(text):
        yield path, "phone", text


def field_kind(name: str, schema: Mapping[str, Any]) -> Kind | None:
    """What an argument says it holds, by its schema's `format`, its name, its description."""
    form = schema.get("format")
    if isinstance(form, str) and form.casefold() in _FORMATS:
        return _FORMATS[form.casefold()]
    words = [word.casefold() for word in _NAME_WORD.findall(name)]
    for word in words:
        if word in _NAME_WORDS:
            return _NAME_WORDS[word]
    if _addressee(words):
        return "recipient"
    description = schema.get("description")
    if isinstance(description, str):
        for pattern, kind in _DESCRIPTION:
            if pattern.search(description):
                return kind
    return None


def _addressee(words: list[str]) -> bool:
    if not words or len(words) > 2:
        return False
    if words[0] in _ADDRESSEE:
        return len(words) == 1 or words[1] in _ADDRESSEE_NEXT
    return words[1:] == ["to"] and words[0] in _ADDRESSEE_BEFORE


def _digits(text: str) -> str:
    return "".join(char for char in text if char.isdigit())
