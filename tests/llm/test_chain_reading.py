"""Where the attempt loop reads an answer: a light question's short answer on the event loop
(a hop to a worker thread would cost more than the read), anything else in a worker thread,
so a long answer or a merge onto a large plan never holds up the other requests."""

from __future__ import annotations

import threading

import pytest
import respx

from planner_arm.llm.chain import LIGHT_ANSWER_CHARS, ModelAnswer, Question
from planner_arm.llm.client import Completion
from planner_arm.llm.usage import Usage
from planner_arm.strategies.prompts.messages import with_repair
from support.app import FakeClock, answer
from support.factories import make_service, request_deadline


@pytest.mark.parametrize(
    ("light", "text", "on_the_loop"),
    [
        (True, "{}", True),
        (True, "x" * (LIGHT_ANSWER_CHARS + 1), False),
        (False, "{}", False),
    ],
)
async def test_only_a_light_questions_short_answer_is_read_on_the_event_loop(
    chat_route: respx.Route, fake_clock: FakeClock, light: bool, text: str, on_the_loop: bool
) -> None:
    chat_route.return_value = answer(text)
    runtime = make_service(fake_clock)
    readers: list[int] = []

    def read(completion: Completion) -> str | None:
        readers.append(threading.get_ident())
        return completion.content

    messages = [{"role": "user", "content": "plan"}]
    question = Question(messages, read, with_repair, light=light)
    got = await runtime.models.ask(question, request_deadline(runtime), Usage())
    assert isinstance(got, ModelAnswer)
    assert got.value == text
    assert (readers == [threading.get_ident()]) is on_the_loop
