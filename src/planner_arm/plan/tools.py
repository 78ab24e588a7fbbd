"""The caller's own tools as arms, and the pieces of work a request asks for.

A request's `tools` replace the configured arms for that request. Each item is in one of the
shapes of `tool_shapes.py` (the shapes the configuration's arms take too), told by its keys,
so an item of no shape is one problem that names the shapes. All become `ArmSpec`s. Pydantic
only: the client imports these models. Ranking tools against a text is `tools/index.py`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from planner_arm.limits import ArmSpec
from planner_arm.tool_shapes import AnthropicTool as AnthropicTool
from planner_arm.tool_shapes import FlatFunctionTool as FlatFunctionTool
from planner_arm.tool_shapes import FunctionTool as FunctionTool
from planner_arm.tool_shapes import McpTool as McpTool
from planner_arm.tool_shapes import Tool as Tool
from planner_arm.tool_shapes import ToolItem as ToolItem
from planner_arm.tool_shapes import name_words as name_words
from planner_arm.tool_shapes import shape_of

AnyTool = BaseModel  # a tool of any shape in `tool_shapes.SHAPES`


def arm_specs(tools: Sequence[AnyTool]) -> list[ArmSpec]:
    """The tools as arms; raises ValueError naming a repeated id, or the tool (by its place
    and name) that is no arm: an id with spaces around it, a schema that refers outside
    itself or breaks a bound (`tool_schema.py`)."""
    specs = []
    for index, tool in enumerate(tools):
        try:
            specs.append(_spec(tool))
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(_field_name(tool, part) for part in item['loc'])}: {item['msg']}"
                for item in error.errors()
            )
            raise ValueError(f"tool {index} ({_name(tool)[:60]!r}): {problems}") from None
    seen: set[str] = set()
    for spec in specs:
        if spec.id in seen:
            raise ValueError(f"tool id {spec.id!r} is given twice")
        seen.add(spec.id)
    return specs


def _name(tool: AnyTool) -> str:
    return str(shape_of(tool).to_arm(tool)["id"])


def _field_name(tool: AnyTool, part: object) -> str:
    return shape_of(tool).fields.get(str(part), str(part))


def _spec(tool: AnyTool) -> ArmSpec:
    return ArmSpec(**shape_of(tool).to_arm(tool))


def undescribed(tools: Sequence[AnyTool]) -> list[str]:
    """The names of the tools sent without a description (planned from name and parameters)."""
    names = []
    for tool in tools:
        shape = shape_of(tool)
        if shape.name != "arm" and not _own_description(tool):
            names.append(str(shape.to_arm(tool)["id"]))
    return names


def _own_description(tool: AnyTool) -> str:
    spec = getattr(tool, "function", tool)
    return (getattr(spec, "description", None) or "").strip()


def tool_set_key(specs: Sequence[ArmSpec]) -> str:
    """A digest of a tool set's content: the same tools, the same key."""
    text = json.dumps([spec.model_dump(mode="json") for spec in specs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


# Verbs a request's pieces of work open with: a comma before one starts a new piece.
_REQUEST_VERB_WORDS = (
    "add adjust analyse analyze answer apply archive arrange ask assign back book buy "
    "calculate call cancel change check choose close collect compare compress confirm "
    "contact convert copy count create delete deliver deposit describe download draft "
    "edit email estimate evaluate explain export fetch file find fix forward generate get "
    "give help identify import inform inquire install invite issue list locate log look "
    "make mark message modify move notify open order organise organize page pay pick "
    "place plan play post predict prepare print publish purchase put query read "
    "recharge recommend record refund register remind remove rename renew rent repair "
    "repay replace reply report request reschedule reserve reset restart restore retrieve "
    "return review run save schedule search select sell send set share show sign sort "
    "start stop submit summarise summarize switch tell text track transfer translate turn "
    "unsubscribe update upgrade upload verify view withdraw write "
    "accept activate approve attach block borrow charge contest decline dispute exchange "
    "follow hold invoice join leave lend lock pause redeem refer refill reject resume ship "
    "subscribe suspend swap unblock unlock"
)
REQUEST_VERBS = frozenset(_REQUEST_VERB_WORDS.split())
# Words after which, at the opening of a piece, a thing is named: the word before is a verb
# (`tools/words.py:leading_verb`).
_DETERMINER_WORDS = "the a an his her their my our its it them him me us this these those"
DETERMINER_WORDS = frozenset(_DETERMINER_WORDS.split())
# Lower-case words before a determiner that are no verb.
_NOT_VERB_WORDS = (
    "with from for and or into about at in on to by of over under after before during "
    "including using via per than like as but so if when while where which who that whose "
    "then also now today tomorrow yesterday tonight please maybe just only even all both "
    "each every any some"
)
NOT_VERB_WORDS = frozenset(_NOT_VERB_WORDS.split())
# Where one piece of work in a request ends and the next begins.
_PIECES = re.compile(
    r"(?<=[.!?;])\s+|\n+|,?\s+\b(?:and then|then|after that|afterwards|finally|also|and)\b\s+"
    rf"|,\s+(?=(?:{'|'.join(sorted(REQUEST_VERBS))})\b(?![-']))"
    # A request inside a sentence of circumstances: "..., but due to a conflict, please
    # cancel it", "... last week, and now I need to change it".
    r"|,?\s+(?=(?:please|i (?:also )?(?:need|want|would like) to)\s)",
    re.I,
)
# A cut, or the opening of a piece, that puts the piece after the one before.
_SEQUENCE = re.compile(r"\b(?:then|after that|afterwards|finally|next|after this)\b", re.I)
_OPENING_SEQUENCE = re.compile(
    r"^(?:and\s+)?(?:then|after that|afterwards|finally|next|after this)\b[\s,]*", re.I
)
_FILLER = re.compile(
    r"^(?:(?:please|kindly|also|(?:and )?i (?:also )?(?:want|need|would like|wish|hope)"
    r"(?: you)?(?: to| can| could)?|i'd like to|(?:can|could|would) you|help me|to"
    # A condition on the piece before ("If so, book it"): the work is what follows.
    r"|if (?:so|yes|not|it is|there is one|they are|available)|otherwise)(?:[\s,]+|$))+",
    re.I,
)
# Quoted text, inside which a request is never cut ("'Pride and Prejudice'").
_QUOTED = re.compile(r"\"[^\"]*\"|(?<!\w)'[^']*'(?!\w)|“[^”]*”|‘[^’]*’")
_MIN_PIECE_WORDS = 2


@dataclass(frozen=True)
class GoalPiece:
    """One piece of work a request asks for, and whether the request puts it after the piece
    before ("..., then ...", "After that, ...")."""

    text: str
    after_previous: bool = False


def goal_pieces(text: str) -> list[GoalPiece]:
    """The pieces of work a request asks for, in its order: its sentences, cut again at
    "and", "then", "after that" (pieces of one word are dropped)."""
    pieces: list[GoalPiece] = []
    start, sequenced = 0, False
    quoted = [match.span() for match in _QUOTED.finditer(text)]
    cuts = [
        cut
        for cut in _PIECES.finditer(text)
        if not any(left < cut.start() < right for left, right in quoted)
    ]
    for cut in [*cuts, None]:
        raw = text[start : cut.start() if cut else len(text)].strip(" ,.;:")
        opening = _OPENING_SEQUENCE.match(raw)
        sequenced = sequenced or opening is not None
        piece = _FILLER.sub("", raw[opening.end() :] if opening else raw)
        if len(piece.split()) >= _MIN_PIECE_WORDS:
            pieces.append(GoalPiece(piece, sequenced and bool(pieces)))
            sequenced = False
        if cut is not None:
            sequenced = sequenced or bool(_SEQUENCE.search(cut.group()))
            start = cut.end()
    return pieces or [GoalPiece(text.strip())]


def request_pieces(text: str) -> list[str]:
    """The texts of the pieces of work a request asks for (`goal_pieces`)."""
    return [piece.text for piece in goal_pieces(text)]
