"""The caller's own tools: the shapes a request may send them in, and finding the right ones.

A request's `tools` replace the configured arms for that request. Each item is our arm shape
(`id`, `description`, optional `input_schema`, `consumes`, `produces`), the OpenAI
function-tool shape, an MCP tool as `tools/list` gives it or an Anthropic tool (the shapes the
configuration's arms take too: `limits.py`); each is told by its keys (`tool_shape`), so an
item of no shape is one problem that names the shapes. All become `ArmSpec`s. Pydantic only:
the client imports these models. Ranking tools against a text is `plan/tool_index.py`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from planner_arm.limits import (
    ARM_DESCRIPTION_MAX_CHARS,
    ARM_ID_MAX_CHARS,
    ARM_ID_PATTERN,
    RESOURCE_PATTERN,
    AnthropicTool,
    ArmSpec,
    FlatFunctionTool,
    FunctionTool,
    McpTool,
    foreign_arm_fields,
    shape_problem,
    tool_shape,
)
from planner_arm.limits import (
    name_words as name_words,
)

ToolId = Annotated[str, Field(min_length=1, max_length=ARM_ID_MAX_CHARS, pattern=ARM_ID_PATTERN)]
Description = Annotated[str, Field(min_length=1, max_length=ARM_DESCRIPTION_MAX_CHARS)]
Resource = Annotated[str, Field(pattern=RESOURCE_PATTERN)]


class Tool(BaseModel):
    """A tool in our arm shape."""

    model_config = ConfigDict(extra="forbid")

    id: ToolId
    description: Description
    input_schema: dict[str, Any] | None = None
    consumes: list[Resource] = Field(default_factory=list, max_length=16)
    produces: list[Resource] = Field(default_factory=list, max_length=16)


def _known_shape(item: Any) -> Any:
    # One problem per item of no shape, instead of one per field of every shape it is not.
    if tool_shape(item) is None:
        raise PydanticCustomError("tool_shape", "{problem}", {"problem": shape_problem(item)})
    return item


ToolItem = Annotated[
    Annotated[Tool, Tag("arm")]
    | Annotated[FunctionTool, Tag("openai")]
    | Annotated[FlatFunctionTool, Tag("openai_flat")]
    | Annotated[McpTool, Tag("mcp")]
    | Annotated[AnthropicTool, Tag("anthropic")],
    Discriminator(tool_shape),
    BeforeValidator(_known_shape),
]
AnyTool = Tool | FunctionTool | FlatFunctionTool | McpTool | AnthropicTool


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
    spec = tool.function if isinstance(tool, FunctionTool) else tool
    return spec.id if isinstance(spec, Tool) else spec.name


# An arm's schema fields as each shape spells them, so a problem names the caller's own key.
_SCHEMA_FIELDS = {
    McpTool: {"input_schema": "inputSchema", "output_schema": "outputSchema"},
    FunctionTool: {"input_schema": "function.parameters"},
    FlatFunctionTool: {"input_schema": "parameters"},
}


def _field_name(tool: AnyTool, part: object) -> str:
    return _SCHEMA_FIELDS.get(type(tool), {}).get(str(part), str(part))


def _spec(tool: AnyTool) -> ArmSpec:
    if isinstance(tool, Tool):
        return ArmSpec(
            id=tool.id,
            description=tool.description,
            input_schema=tool.input_schema,
            consumes=tool.consumes,
            produces=tool.produces,
        )
    return ArmSpec(**foreign_arm_fields(tool))


def undescribed(tools: Sequence[AnyTool]) -> list[str]:
    """The names of the tools sent without a description (planned from name and parameters)."""
    names = []
    for tool in tools:
        spec = tool.function if isinstance(tool, FunctionTool) else tool
        if not isinstance(spec, Tool) and not (spec.description or "").strip():
            names.append(spec.name)
    return names


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
# (`tool_words.leading_verb`).
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
