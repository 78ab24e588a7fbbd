"""The caller's own tools: the shapes a request may send them in, and finding the right ones.

A request's `tools` replace the configured arms for that request. Each item is either our arm
shape (`id`, `description`, optional `input_schema`, `consumes`, `produces`) or the OpenAI
function-tool shape (`{"type": "function", "function": {"name", "description",
"parameters"}}`); both become `ArmSpec`s. `ToolIndex` ranks tools against a text with BM25 over
their names and descriptions (the shortlist of a large tool set, the rule-based tool planner,
an unknown tool name mapped to the closest one).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Sequence
from functools import cached_property
from typing import Annotated, Any, Literal

import bm25s  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field

from planner_arm.config import (
    ARM_DESCRIPTION_MAX_CHARS,
    ARM_ID_MAX_CHARS,
    ARM_ID_PATTERN,
    RESOURCE_PATTERN,
    ArmSpec,
)
from planner_arm.plan.lexicon import stem

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


class FunctionSpec(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: ToolId
    description: Description
    parameters: dict[str, Any] | None = None


class FunctionTool(BaseModel):
    """A tool in the OpenAI function-tool shape."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    function: FunctionSpec


ToolItem = Tool | FunctionTool


def arm_specs(tools: Sequence[ToolItem]) -> list[ArmSpec]:
    """The tools as arms; raises ValueError naming a repeated id."""
    specs = [_spec(tool) for tool in tools]
    seen: set[str] = set()
    for spec in specs:
        if spec.id in seen:
            raise ValueError(f"tool id {spec.id!r} is given twice")
        seen.add(spec.id)
    return specs


def _spec(tool: ToolItem) -> ArmSpec:
    if isinstance(tool, FunctionTool):
        function = tool.function
        return ArmSpec(
            id=function.name, description=function.description, input_schema=function.parameters
        )
    return ArmSpec(
        id=tool.id,
        description=tool.description,
        input_schema=tool.input_schema,
        consumes=tool.consumes,
        produces=tool.produces,
    )


def tool_set_key(specs: Sequence[ArmSpec]) -> str:
    """A digest of a tool set's content: the same tools, the same key."""
    text = json.dumps([spec.model_dump(mode="json") for spec in specs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[^0-9a-zA-Z]+")


def name_words(name: str) -> str:
    """A tool name as words: `GetMovieCredit` and `get_movie_credit` are "get movie credit"."""
    return " ".join(_NOT_WORD.sub(" ", _CAMEL.sub(" ", name)).lower().split())


def _squashed(name: str) -> str:
    return name_words(name).replace(" ", "")


class ToolIndex:
    """BM25 over each tool's name (as words) and description."""

    def __init__(self, specs: Sequence[ArmSpec]) -> None:
        self.specs = list(specs)
        self.ids = [spec.id for spec in self.specs]
        self._by_squashed = {_squashed(spec.id): spec.id for spec in self.specs}

    @cached_property
    def _retriever(self) -> bm25s.BM25:
        corpus = [f"{name_words(spec.id)} {spec.description}" for spec in self.specs]
        retriever = bm25s.BM25()
        retriever.index(_tokens(corpus), show_progress=False)
        return retriever

    def scores(self, text: str) -> list[float]:
        """Each tool's BM25 score for `text`, in the order of the tools."""
        words = _tokens([text], ids=False)[0]
        known = [word for word in words if word in self._vocabulary]
        if not known:
            return [0.0] * len(self.specs)
        return [float(score) for score in self._retriever.get_scores(known)]

    @cached_property
    def _vocabulary(self) -> frozenset[str]:
        return frozenset(self._retriever.vocab_dict)

    def ranked(self, text: str) -> list[tuple[str, float]]:
        """Every tool with its score for `text`, best first (ties in the given order)."""
        scores = self.scores(text)
        order = sorted(range(len(scores)), key=lambda index: (-scores[index], index))
        return [(self.ids[index], scores[index]) for index in order]

    def named_in(self, text: str) -> list[str]:
        """The tools whose name the text spells out (as written, or as words)."""
        plain = f" {name_words(text)} "
        return [
            spec.id
            for spec in self.specs
            if spec.id in text
            or (len(name_words(spec.id)) > 3 and f" {name_words(spec.id)} " in plain)
        ]

    def shortlist(self, text: str, size: int) -> list[str]:
        """The `size` tools most relevant to `text`, and every tool it names, in the tools'
        own order (a stable prompt)."""
        chosen = set(self.named_in(text))
        for tool, score in self.ranked(text):
            if len(chosen) >= size:
                break
            if score > 0 or not chosen:
                chosen.add(tool)
        return [tool for tool in self.ids if tool in chosen]

    def closest_name(self, name: str) -> str | None:
        """The registered tool a misspelt or differently written name most likely means."""
        squashed = _squashed(name)
        if not squashed:
            return None
        if squashed in self._by_squashed:
            return self._by_squashed[squashed]
        close = difflib.get_close_matches(squashed, list(self._by_squashed), n=1, cutoff=0.8)
        return self._by_squashed[close[0]] if close else None


def _stems(words: list[str]) -> list[str]:
    return [stem(word) for word in words]


def _tokens(texts: list[str], ids: bool = True) -> Any:
    """Lower-cased words without English stopwords, each reduced to its stem ("movies" and
    "movie" agree)."""
    return bm25s.tokenize(
        texts, stopwords="en", stemmer=_stems, return_ids=ids, show_progress=False
    )
