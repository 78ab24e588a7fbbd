"""Text -> JSON value: find the plan JSON in whatever a model answered, without another call.

Stages, cheapest first: the whole answer as JSON; the body of a code fence; the largest
balanced `{...}`/`[...]` span; that span after targeted cleanups (comments, trailing commas,
single or curly quotes, Python literals, NaN); finally the `json_repair` library. Each fix is
recorded once as a repair string (see `draft.repair`). The text a model writes in place of a
single value (durations, step references, cost words, lists) is read by `value_text.py`.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from typing import Any

import json_repair

from planner_arm.errors import PlanParseError
from planner_arm.plan.draft import repair

_UNSET = object()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-JSON constant {name}")


# NaN/Infinity are rejected here and made null by the cleanup stage, so the fast path stays one
# C-level decode and the repair is recorded. strict=False: raw newlines inside strings are fine.
_DECODER = json.JSONDecoder(strict=False, parse_constant=_reject_constant)

_FENCE = re.compile(r"```[ \t]*([A-Za-z][A-Za-z0-9_+-]*)?[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_OPENER = re.compile(r"[{\[]")
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"?|[{}\[\]]', re.S)
_REFUSAL = re.compile(
    r"\b(?:I(?:'?m| am) (?:sorry|not able|unable)|I apologi[sz]e|as an AI|I can(?:no|')t|"
    r"I won'?t|I will not|I must decline)",
    re.I,
)

# The cleanup scanner's tokens: a double-quoted string, a single-quoted one, a run of
# characters with no special meaning, or one special character.
_DQ_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.S)
# An apostrophe between two letters (don't) is content, not the closing quote.
_SQ_STRING = re.compile(r"'((?:[^'\\]|\\.|(?<=\w)'(?=\w))*)('?)", re.S)
_SMART_DQ = "\u201c\u201d\u201e\u201f"
_SMART_SQ = "\u2018\u2019\u201a\u201b"
_PLAIN = re.compile(r"""[^"'\u201c\u201d\u201e\u201f\u2018\u2019\u201a\u201b/#,\]}\-+A-Za-z_]+""")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PYTHON_WORDS = {"True": "true", "False": "false", "None": "null"}
_NAN_WORDS = {"NaN", "Infinity", "nan", "inf"}

_MAX_SPANS = 8
_MAX_TRIED_SPANS = 3
_TRUNCATED_DETAIL = "cut off at the token limit and closed by json-repair; last step may be partial"
# Beyond these the answer is not a plan, and json-repair would take seconds to say so.
_MAX_NESTING = 64
_MAX_REPAIR_CHARS = 64 * 1024


def extract_json(text: str | None, *, truncated: bool = False) -> tuple[Any, list[str]]:
    """The JSON value in a model's answer, and the repairs it needed.

    `truncated` says the answer was cut off at the token limit. Raises PlanParseError with
    code `empty`, `refusal`, `no_json` or `truncated`.
    """
    return _extract(text, truncated, nested=False)


def _extract(text: str | None, truncated: bool, *, nested: bool) -> tuple[Any, list[str]]:
    if text is None or not text.strip():
        raise PlanParseError("the model returned an empty answer", code="empty")
    stripped = text.strip()
    value = _decode(stripped)
    if value is not _UNSET:
        return _accept(value, [], truncated, nested)

    body, repairs, value = _fenced(stripped)
    if value is not _UNSET:
        return _accept(value, repairs, truncated, nested)

    closed, unclosed = _spans(body)
    if not closed and unclosed is None:
        raise _nothing_found(stripped, truncated)
    for start, end in sorted(closed, key=lambda span: span[0] - span[1])[:_MAX_TRIED_SPANS]:
        found = _decode_cleaned(body[start:end])
        if found is not None:
            _note_prose(repairs, body, start, end)
            return _accept(found[0], repairs + found[1], truncated, nested)
    return _repaired_by_library(stripped, body, closed, unclosed, truncated, repairs)


def _fenced(text: str) -> tuple[str, list[str], Any]:
    """The text to look in (a code fence's body, else all of it), its repairs, and its JSON
    value when the body is JSON as it is (else _UNSET)."""
    fenced = _fence_body(text)
    if fenced is None:
        return text, [], _UNSET
    body, prose = fenced
    repairs = [repair("code_fence")]
    if prose:
        repairs.append(repair("surrounding_text", "prose outside the code fence dropped"))
    return body, repairs, _decode(body)


def _repaired_by_library(
    text: str,
    body: str,
    closed: list[tuple[int, int]],
    unclosed: tuple[int, int] | None,
    truncated: bool,
    repairs: list[str],
) -> tuple[Any, list[str]]:
    """The last stage: the library, on the largest span; a cut-off answer on the one left open."""
    if unclosed is not None and truncated:
        start, end = unclosed
    else:
        candidates = [*closed, unclosed] if unclosed is not None else closed
        start, end = max(candidates, key=lambda span: span[1] - span[0])
    repaired = _library_repair(body[start:end]) if end - start <= _MAX_REPAIR_CHARS else None
    if repaired is None:
        raise _nothing_found(text, truncated)
    value, cleanups, fixes = repaired
    _note_prose(repairs, body, start, end)
    repairs.extend(cleanups)
    repairs.append(repair("json_repair", f"the json-repair library fixed the rest, {fixes} fixes"))
    if truncated:
        repairs.append(repair("truncated_output", _TRUNCATED_DETAIL))
    return value, repairs


def _decode(text: str) -> Any:
    """The JSON value of the whole text, or _UNSET."""
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError):
        return _UNSET


def _accept(value: Any, repairs: list[str], truncated: bool, nested: bool) -> tuple[Any, list[str]]:
    if isinstance(value, dict | list):
        return value, repairs
    if isinstance(value, str) and not nested:
        # JSON encoded twice: the answer is a JSON string whose content is the plan.
        try:
            inner, inner_repairs = _extract(value, truncated, nested=True)
        except PlanParseError as error:
            if error.code == "refusal":
                raise
            raise PlanParseError(
                "the answer is a JSON string that holds no JSON object or list", code="no_json"
            ) from error
        return inner, [*repairs, repair("double_encoded"), *inner_repairs]
    raise PlanParseError(
        f"the answer is a JSON {type(value).__name__}, not an object or a list", code="no_json"
    )


def _nothing_found(text: str, truncated: bool) -> PlanParseError:
    if _REFUSAL.search(text[:500]):
        return PlanParseError(f"the model declined: {text[:200]!r}", code="refusal")
    if truncated:
        return PlanParseError("cut off at the token limit before any usable JSON", code="truncated")
    return PlanParseError("no JSON object or list found in the answer", code="no_json")


def _fence_body(text: str) -> tuple[str, bool] | None:
    """The first code fence that holds JSON-looking text, and whether prose surrounds it."""
    if "```" not in text:
        return None
    for match in _FENCE.finditer(text):
        body = match.group(2).strip()
        if body[:1] in ("{", "[", '"') or (_OPENER.search(body) and match.group(1)):
            prose = bool(text[: match.start()].strip() or text[match.end() :].strip())
            return body, prose
    return None


def _spans(text: str) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """Top-level balanced bracket spans (outside strings), and the span left open, if any."""
    closed: list[tuple[int, int]] = []
    pos = 0
    while len(closed) < _MAX_SPANS:
        opener = _OPENER.search(text, pos)
        if opener is None:
            return closed, None
        depth = 0
        for token in _BRACKETS.finditer(text, opener.start()):
            char = token.group()
            if char in "{[":
                depth += 1
                if depth > _MAX_NESTING:
                    return closed, None
            elif char in "}]":
                depth -= 1
                if depth == 0:
                    closed.append((opener.start(), token.end()))
                    pos = token.end()
                    break
        else:
            return closed, (opener.start(), len(text))
    return closed, None


def _note_prose(repairs: list[str], text: str, start: int, end: int) -> None:
    """Record the prose around the JSON span, unless the code fence's prose already was."""
    before, after = bool(text[:start].strip()), bool(text[end:].strip())
    if (before or after) and not any(r.startswith("surrounding_text") for r in repairs):
        where = " and ".join(w for w, there in (("before", before), ("after", after)) if there)
        repairs.append(repair("surrounding_text", f"prose {where} the JSON dropped"))


def _decode_cleaned(text: str) -> tuple[Any, list[str]] | None:
    """A non-empty container decoded from the span as it is, or after the targeted cleanups."""
    value = _decode(text)
    if isinstance(value, dict | list) and value:
        return value, []
    cleaned, codes = _clean(text)
    value = _decode(cleaned) if codes else None
    return (value, codes) if isinstance(value, dict | list) and value else None


def _library_repair(text: str) -> tuple[Any, list[str], int] | None:
    """json-repair on the cleaned span, then on the raw one: a non-empty container of the kind
    the span opens with, or None."""
    kind = dict if text.startswith("{") else list
    cleaned, codes = _clean(text)
    attempts = [(cleaned, codes), (text, [])] if codes else [(text, [])]
    for candidate, used in attempts:
        try:
            result = json_repair.loads(candidate, skip_json_loads=True, logging=True)
        except Exception:  # noqa: S112 - the library raises many kinds; any means "no"
            continue
        value, log = result if isinstance(result, tuple) else (result, [])
        if isinstance(value, kind) and value:
            return value, used, len(log)
    return None


def _clean(text: str) -> tuple[str, list[str]]:
    """Rewrite JSON-like text into JSON; returns the text and the repair strings applied."""
    out: list[str] = []
    codes: dict[str, str] = {}  # one repair string per code, in the order first applied
    pos, size = 0, len(text)
    while pos < size:
        plain = _PLAIN.match(text, pos)
        if plain:
            out.append(plain.group())
            pos = plain.end()
        else:
            pos = _TOKENS.get(text[pos], _other)(text, pos, out, codes)
    return "".join(out), list(codes.values())


# Each reader below takes the text, the position of a token's first character, the output so
# far and the repairs applied; it writes the token's cleaned text and returns where it ends.


def _double_quoted(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    match = _DQ_STRING.match(text, pos)
    assert match is not None
    out.append(match.group())
    return match.end()


def _single_quoted(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    match = _SQ_STRING.match(text, pos)
    assert match is not None
    codes["single_quotes"] = repair("single_quotes", "strings re-quoted")
    out.append(_requote(match.group(1).replace("\\'", "'")))
    return match.end()


def _curly_single_quoted(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    content, end = _read_until(text, pos + 1, _SMART_SQ + "'")
    codes["smart_quotes"] = repair("smart_quotes", "curly quotes made straight")
    out.append(_requote(content.replace("\\'", "'")))
    return end


def _curly_double_quoted(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    content, end = _read_until(text, pos + 1, _SMART_DQ + '"')
    out.append(_requote(content))
    codes["smart_quotes"] = repair("smart_quotes", "curly quotes made straight")
    return end


def _line_comment(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    end = text.find("\n", pos)
    codes["comments"] = repair("comments", "comments removed")
    return len(text) if end < 0 else end


def _slash(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    if text.startswith("//", pos):
        return _line_comment(text, pos, out, codes)
    if not text.startswith("/*", pos):
        return _other(text, pos, out, codes)
    end = text.find("*/", pos + 2)
    codes["comments"] = repair("comments", "comments removed")
    return len(text) if end < 0 else end + 2


def _closer(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    if _drop_trailing_comma(out):
        codes["trailing_comma"] = repair("trailing_comma", "commas before } or ] removed")
    out.append(text[pos])
    return pos + 1


def _word(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    match = _WORD.match(text, pos)
    assert match is not None
    word = match.group()
    if word in _PYTHON_WORDS:
        word = _PYTHON_WORDS[word]
        codes["python_literals"] = repair("python_literals", "True/False/None -> true/false/null")
    elif word in _NAN_WORDS:
        if out and out[-1] in ("-", "+"):
            out.pop()
        word = "null"
        codes["nan_value"] = repair("nan_value", "NaN/Infinity -> null")
    out.append(word)
    return match.end()


def _other(text: str, pos: int, out: list[str], codes: dict[str, str]) -> int:
    out.append(text[pos])
    return pos + 1


# The characters _PLAIN stops at, each with its reader; the rest (",", "-", "+") go as they are.
_TOKENS: dict[str, Callable[[str, int, list[str], dict[str, str]], int]] = {
    '"': _double_quoted,
    "'": _single_quoted,
    **dict.fromkeys(_SMART_SQ, _curly_single_quoted),
    **dict.fromkeys(_SMART_DQ, _curly_double_quoted),
    "#": _line_comment,
    "/": _slash,
    "}": _closer,
    "]": _closer,
    **dict.fromkeys(string.ascii_letters + "_", _word),
}


def _read_until(text: str, pos: int, closers: str) -> tuple[str, int]:
    """The characters up to the first closer, and the position after it (or the end)."""
    for index in range(pos, len(text)):
        if text[index] in closers:
            return text[pos:index], index + 1
    return text[pos:], len(text)


def _requote(content: str) -> str:
    # Content of a single- or curly-quoted string: escape bare double quotes, keep escapes.
    escaped = re.sub(r'(?<!\\)((?:\\\\)*)"', r'\1\\"', content)
    return f'"{escaped}"'


def _drop_trailing_comma(out: list[str]) -> bool:
    for index in range(len(out) - 1, -1, -1):
        piece = out[index]
        if piece.isspace():
            continue
        if piece == ",":
            del out[index]
            return True
        return False
    return False
