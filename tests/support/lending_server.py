"""A small lending library as an MCP server written the everyday way (FastMCP, pydantic
parameters and results: an enum and nested models, so the schemas hold `$defs` and
`#/$defs/...` references), for running plans over it; a recorder of every call a client
session sends; and plans built by hand.

Its tools: `search_books` (`{"books": [{"book_id": ...}]}`), `find_member`, `place_hold` (a
write, unannotated), `cancel_hold` (annotated destructive; a bare string result, which FastMCP
wraps as `{"result": ...}`), `count_books` (a bare int), `check_availability` (fails the first
time each book is asked about, then answers), `list_branches` (read-only, no required
argument)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import httpx
from mcp.client.session import ClientSession
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import ToolAnnotations
from pydantic import BaseModel

from planner_arm.client import AsyncPlannerClient, PlannerClient, PlanResponse, PlanStep


class Format(StrEnum):
    paper = "paper"
    ebook = "ebook"
    audio = "audio"


class Book(BaseModel):
    book_id: str
    title: str
    author: str
    format: Format


class SearchResult(BaseModel):
    books: list[Book]


class Member(BaseModel):
    member_id: str
    name: str
    email: str


class Branch(BaseModel):
    name: str
    city: str


class Hold(BaseModel):
    hold_id: str
    book_id: str
    member_id: str
    pickup: Branch | None = None


class Availability(BaseModel):
    book_id: str
    copies: int


CATALOGUE = [
    Book(book_id="B-1", title="Dune", author="Frank Herbert", format=Format.paper),
    Book(book_id="B-2", title="Dune Messiah", author="Frank Herbert", format=Format.paper),
    Book(book_id="B-3", title="Children of Dune", author="Frank Herbert", format=Format.ebook),
    Book(book_id="B-4", title="Emma", author="Jane Austen", format=Format.audio),
]
MEMBERS = [Member(member_id="M-7", name="Alice", email="alice@example.com")]


@dataclass
class Library:
    """The server and what happened on it."""

    server: FastMCP
    holds: list[Hold] = field(default_factory=list)
    asked: set[str] = field(default_factory=set)


def lending_library() -> Library:
    """A fresh library server (its state is its own)."""
    server = FastMCP("lending")
    library = Library(server)

    @server.tool()
    def search_books(query: str, format: Format | None = None) -> SearchResult:
        """Search the catalogue by title or author; returns the matching books with their
        book_id."""
        words = query.casefold().split()
        found = [
            book
            for book in CATALOGUE
            if all(word in f"{book.title} {book.author}".casefold() for word in words)
            and (format is None or book.format == format)
        ]
        return SearchResult(books=found)

    @server.tool()
    def find_member(email: str) -> Member:
        """Look up a library member by e-mail address."""
        for member in MEMBERS:
            if member.email == email:
                return member
        raise ValueError(f"no member has the e-mail address {email}")

    @server.tool()
    def place_hold(book_id: str, member_id: str, pickup: Branch | None = None) -> Hold:
        """Place a hold on a book for a member."""
        hold = Hold(
            hold_id=f"H-{len(library.holds) + 1}",
            book_id=book_id,
            member_id=member_id,
            pickup=pickup,
        )
        library.holds.append(hold)
        return hold

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def cancel_hold(hold_id: str) -> str:
        """Cancel a hold."""
        return f"hold {hold_id} cancelled"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def count_books(query: str) -> int:
        """Count the books that match a search."""
        return len(search_books(query).books)

    @server.tool()
    def check_availability(book_id: str) -> Availability:
        """How many copies of a book are on the shelves."""
        if book_id not in library.asked:
            library.asked.add(book_id)
            raise RuntimeError("the shelf index is being rebuilt, try again")
        return Availability(book_id=book_id, copies=2)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def list_branches() -> list[Branch]:
        """The library's branches."""
        return [Branch(name="Central", city="Paris")]

    return library


Call = tuple[str, dict[str, Any] | None]


def record_calls(session: Any) -> list[Call]:
    """Every (tool, arguments) `session.call_tool` is sent from now on, recorded before it
    goes out; the session stays the same object."""
    calls: list[Call] = []
    send = session.call_tool

    async def call_tool(name: str, arguments: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        calls.append((name, arguments))
        return await send(name, arguments, **kwargs)

    session.call_tool = call_tool
    return calls


@asynccontextmanager
async def library_session() -> AsyncIterator[tuple[Library, ClientSession, list[Call]]]:
    """A fresh library, an initialized client session connected to it in process, and the
    calls the session sends; on the way out, no call may have carried anything half-known."""
    library = lending_library()
    async with create_connected_server_and_client_session(library.server._mcp_server) as session:
        calls = record_calls(session)
        yield library, session, calls
    assert_nothing_half_known(calls)


def assert_nothing_half_known(calls: Iterable[Call]) -> None:
    """No call carried a string holding `{{` or a `needs` object, at any depth."""
    for name, arguments in calls:
        text = json.dumps(arguments)
        assert "{{" not in text, (name, arguments)
        assert '"needs"' not in text, (name, arguments)


def plan_step(
    number: int,
    tool: str,
    arguments: dict[str, Any] | None,
    depends_on: Sequence[int] = (),
    *,
    writes: bool | None = None,
) -> PlanStep:
    """One step over a tool, its input written by hand."""
    return PlanStep(
        step=number,
        action=f"Call {tool}",
        required_arm=tool,
        acceptance_criteria=[f"{tool} answered"],
        depends_on=list(depends_on),
        input=arguments,
        writes=writes,
    )


def plan_of(*steps: PlanStep, plan_id: str = "plan-1", version: int = 1) -> PlanResponse:
    """A plan as the service answers one, of these steps."""
    return PlanResponse.model_validate(
        {
            "plan": [step.model_dump() for step in steps],
            "rationale": "by hand",
            "confidence": 0.9,
            "total_estimated_duration": 30 * len(steps),
            "complexity_score": 0.2,
            "plan_id": plan_id,
            "request_id": "request-1",
            "parallel_stages": [[step.step] for step in steps],
            "critical_path_duration": 30 * len(steps),
            "estimated_cost": {"llm_usd": 0, "prompt_tokens": 0, "completion_tokens": 0},
            "metadata": {
                "source": "fallback",
                "model": None,
                "attempts": 0,
                "repairs": [],
                "warnings": [],
                "latency_ms": 1.0,
                "prompt_version": "test",
            },
            "version": version,
            "goal": "Put a hold on Dune for Alice",
        }
    )


class ScriptedPlanner:
    """A planner service that answers each /replan with the next of `answers` (a plan, or an
    HTTP status for an error), recording every request body; entered (`async with`, or
    `with` for the blocking client), a client of it that does not retry."""

    def __init__(self, *answers: PlanResponse | int) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.transport = httpx.MockTransport(self._answer)
        self._async = AsyncPlannerClient("http://localhost", transport=self.transport, retries=0)
        self._sync = PlannerClient("http://localhost", transport=self.transport, retries=0)

    async def __aenter__(self) -> AsyncPlannerClient:
        return self._async

    async def __aexit__(self, *exc: object) -> None:
        await self._async.aclose()

    def __enter__(self) -> PlannerClient:
        return self._sync

    def __exit__(self, *exc: object) -> None:
        self._sync.close()

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        answer = self.answers.pop(0)
        if isinstance(answer, int):
            code = {404: "plan_not_found", 409: "replan_limit"}.get(answer, "scripted")
            return httpx.Response(answer, json={"error": code, "detail": "no"})
        return httpx.Response(200, json=answer.model_dump(mode="json"))
