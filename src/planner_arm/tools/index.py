"""Finding the right tools and examples: BM25 over tool names, descriptions and the requests of
worked examples (the shortlist of a large tool set, the rule-based tool planner, an unknown
tool name mapped to the closest one, the examples shown to the model).

The BM25 library (and numpy under it) is imported when an index is first built or searched: a
service that plans over its configured arms alone, with no worked examples, never loads it.
"""

from __future__ import annotations

import difflib
import functools
import logging
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from planner_arm.limits import ArmSpec, WorkedExample
from planner_arm.plan.arms import ArmResolver
from planner_arm.plan.tools import name_words, request_pieces
from planner_arm.plan.weighed import Lazy, SharedWork, ToolMemo, content_key
from planner_arm.text import stem

if TYPE_CHECKING:
    import bm25s  # type: ignore[import-untyped]

# The library says at debug level how it builds each index: not the service's business.
logging.getLogger("bm25s").setLevel(logging.WARNING)


def _bm25() -> Any:
    """The BM25 library, imported on first use."""
    import bm25s

    return bm25s


def _squashed(name: str) -> str:
    return name_words(name).replace(" ", "")


class ToolIndex:
    """BM25 over each tool's name (as words) and description, built on first use."""

    def __init__(
        self,
        specs: Sequence[ArmSpec],
        notes: Mapping[str, Sequence[str]] | None = None,
        shared: SharedWork | None = None,
    ) -> None:
        """`notes`: more text per tool id — the requests of worked examples that call it,
        which say in a user's words what the tool is for. `shared`: where each tool's words
        are kept for the other tool sets that have the tool, and the lane the build takes."""
        self.specs = list(specs)
        self.ids = [spec.id for spec in self.specs]
        self._by_squashed = {_squashed(spec.id): spec.id for spec in self.specs}
        memo, lane = (shared.memo, shared.lane) if shared is not None else (None, None)
        self.retriever: Lazy[bm25s.BM25] = Lazy(
            functools.partial(_retriever, self.specs, notes or {}, memo), lane
        )

    def scores(self, text: str) -> list[float]:
        """Each tool's BM25 score for `text`, in the order of the tools."""
        retriever = self.retriever.get()
        words = _tokens([text], ids=False)[0]
        known = [word for word in words if word in retriever.vocab_dict]
        if not known:
            return [0.0] * len(self.specs)
        return [float(score) for score in retriever.get_scores(known)]

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
        chosen = dict.fromkeys(self.named_in(text))
        # The request as a whole and each piece of work it asks for take turns: a tool that
        # one short piece needs is not crowded out by the words of the others.
        rankings = [self.ranked(text), *(self.ranked(piece) for piece in request_pieces(text))]
        for rank in range(len(self.ids)):
            for ranking in rankings:
                if len(chosen) >= size:
                    return [tool for tool in self.ids if tool in chosen]
                tool, score = ranking[rank]
                if score > 0:
                    chosen.setdefault(tool)
            if all(ranking[rank][1] <= 0 for ranking in rankings):
                break
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


class ExampleIndex:
    """BM25 over worked examples' requests: the solved requests most like a new one."""

    def __init__(self, examples: Sequence[WorkedExample]) -> None:
        self.examples = list(examples)

    def build(self) -> None:
        """Builds the index now (the configured examples' at start-up), not on first use."""
        _ = self._retriever

    @cached_property
    def _retriever(self) -> bm25s.BM25 | None:
        if not self.examples:
            return None
        return _indexed(_tokens([example.request for example in self.examples], ids=False))

    def notes(self, tool_ids: Sequence[str]) -> dict[str, list[str]]:
        """For each of these tools, the requests of the examples that call it (examples over
        other tools too are left out)."""
        known = set(tool_ids)
        notes: dict[str, list[str]] = {}
        for example in self.examples:
            tools = {step.tool for step in example.steps}
            if tools <= known:
                for tool in tools:
                    notes.setdefault(tool, []).append(example.request)
        return notes

    def similar(
        self, text: str, tool_ids: Sequence[str], count: int, max_chars: int
    ) -> list[WorkedExample]:
        """Up to `count` examples over these tools only, most similar to `text` first, whose
        JSON together stays within `max_chars`."""
        retriever = self._retriever
        if retriever is None or count <= 0:
            return []
        known = set(tool_ids)
        words = [word for word in _tokens([text], ids=False)[0] if word in retriever.vocab_dict]
        scores = retriever.get_scores(words) if words else [0.0] * len(self.examples)
        order = sorted(range(len(self.examples)), key=lambda index: (-scores[index], index))
        chosen: list[WorkedExample] = []
        used = 0
        for index in order:
            example = self.examples[index]
            if not words or scores[index] <= 0:
                break
            if any(step.tool not in known for step in example.steps):
                continue
            size = len(example.model_dump_json())
            if used + size > max_chars:
                continue
            chosen.append(example)
            used += size
            if len(chosen) == count:
                break
        return chosen


def _retriever(
    specs: Sequence[ArmSpec], notes: Mapping[str, Sequence[str]], memo: ToolMemo | None
) -> bm25s.BM25:
    documents = [
        " ".join([name_words(spec.id), spec.description, *notes.get(spec.id, ())]) for spec in specs
    ]
    retriever = _indexed(_document_tokens(documents, memo))
    # Only `retrieve` reads this set of every token id; scoring goes through `get_scores`.
    retriever.unique_token_ids_set = None
    return retriever


_NO_WORDS = "\x00"


def _indexed(tokens: Sequence[Sequence[str]]) -> bm25s.BM25:
    """BM25 over documents given as their words. When none has a word the index counts (a
    caller's tools or examples all named "0" or "x"), each gets one no query can hold: the
    library cannot index an empty vocabulary, and every score is then 0, as it should be."""
    if not any(tokens):
        tokens = [(_NO_WORDS,)] * len(tokens)
    retriever = _bm25().BM25()
    retriever.index(list(tokens), show_progress=False)
    return retriever


def _document_tokens(documents: list[str], memo: ToolMemo | None) -> list[tuple[str, ...]]:
    """Each document's words as the index counts them: those the memo has from another
    tool set, the others read together (each distinct word stemmed once) and kept there.
    Tuples of strings, which the garbage collector stops tracking."""
    keys = [content_key("tokens", document) for document in documents]
    found: list[tuple[str, ...] | None] = [
        None if memo is None else memo.found(key) for key in keys
    ]
    missing = [number for number, words in enumerate(found) if words is None]
    if missing:
        read = _tokens([documents[number] for number in missing], ids=False)
        for number, words in zip(missing, read, strict=True):
            found[number] = tuple(words)
            if memo is not None:
                memo.keep(keys[number], found[number])
    return [words or () for words in found]


def _stems(words: list[str]) -> list[str]:
    return [stem(word) for word in words]


def _tokens(texts: list[str], ids: bool = True) -> Any:
    """Lower-cased words without English stopwords, each reduced to its stem ("movies" and
    "movie" agree)."""
    return _bm25().tokenize(
        texts, stopwords="en", stemmer=_stems, return_ids=ids, show_progress=False
    )


def tool_resolver(
    tools: Sequence[ArmSpec],
    aliases: Mapping[str, str] | None = None,
    *,
    notes: Mapping[str, Sequence[str]] | None = None,
    shared: SharedWork | None = None,
) -> ArmResolver:
    """The resolver of a caller's tool set: a step's tool found by its words through this
    index (`notes`: more words per tool; `shared`: the words kept for other tool sets with the
    same tools, and the lane builds take)."""
    lane = shared.lane if shared is not None else None
    index = ToolIndex(tools, notes, shared)
    return ArmResolver(tools, aliases or {}, index=index, lane=lane)
