"""The phrase lexicon, sealed once built: read from any thread, added to by none."""

from __future__ import annotations

import pytest

from planner_arm.plan.lexicon import Lexicon
from planner_arm.text import stem


def test_a_sealed_lexicon_matches_as_before_and_takes_no_more_terms() -> None:
    lexicon = Lexicon()
    lexicon.add(0, "run tests", 1.0)
    lexicon.add(1, "tests", 0.5)
    sealed = lexicon.sealed()
    tokens = ["run", "tests", "tests"]
    stems = [stem(token) for token in tokens]
    assert list(sealed.scan(tokens, stems)) == [(0, {0: 1.0}), (2, {1: 0.5})]
    with pytest.raises(RuntimeError, match="sealed"):
        sealed.add(2, "more", 1.0)
