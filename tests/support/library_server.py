"""A small library's tools as an MCP server written the everyday way: FastMCP, pydantic
parameters and results (so each tool has an `inputSchema` and an `outputSchema`, nested models
under `$defs`), docstrings as descriptions and no annotations. Its `tools/list` is what a
caller sends as `tools`."""

import asyncio
from typing import Any

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("library")


class Book(BaseModel):
    book_id: str
    title: str
    author: str


class SearchResult(BaseModel):
    books: list[Book]


class BookDetails(BaseModel):
    book_id: str
    title: str
    author: str
    summary: str
    year: int


class Member(BaseModel):
    member_id: str
    name: str
    email: str


class Loan(BaseModel):
    loan_id: str
    book_id: str
    due_date: str


class Loans(BaseModel):
    loans: list[Loan]


class Hold(BaseModel):
    hold_id: str
    position: int


class Availability(BaseModel):
    available: bool
    copies: int


class Sent(BaseModel):
    sent: bool


@server.tool()
def search_books(query: str) -> SearchResult:
    """Search the catalogue by title, author or keyword; returns matching books with their
    book_id."""
    return SearchResult(books=[])


@server.tool()
def get_book(book_id: str) -> BookDetails:
    """Get the details of a book by its ID: title, author, year and summary."""
    return BookDetails(book_id=book_id, title="", author="", summary="", year=0)


@server.tool()
def find_member(email: str) -> Member:
    """Look up a library member by e-mail address."""
    return Member(member_id="M-1", name="", email=email)


@server.tool()
def list_loans(member_id: str) -> Loans:
    """List the current loans of a member, with due dates."""
    return Loans(loans=[])


@server.tool()
def renew_loan(loan_id: str) -> Loan:
    """Renew a loan for another three weeks; returns the loan with its new due date."""
    return Loan(loan_id=loan_id, book_id="", due_date="")


@server.tool()
def place_hold(book_id: str, member_id: str) -> Hold:
    """Place a hold on a book for a member."""
    return Hold(hold_id="H-1", position=1)


@server.tool()
def check_availability(book_id: str, branch: str) -> Availability:
    """Check whether a book is on the shelf at a branch."""
    return Availability(available=True, copies=1)


@server.tool()
def notify_member(member_id: str, message: str) -> Sent:
    """Send a member a message by e-mail."""
    return Sent(sent=True)


def listed_tools() -> list[dict[str, Any]]:
    """The server's tools as `tools/list` gives them (MCP's field names)."""
    tools = asyncio.run(server.list_tools())
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
