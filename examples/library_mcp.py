"""A small library's tools as an MCP server, written the everyday way: pydantic parameters
and results (an enum and nested models, so the tools' schemas hold `$defs` and `#/$defs/...`
references), docstrings as descriptions, no annotations. Its data lives in memory.

    python examples/library_mcp.py      # serves MCP over stdio

The examples' agents start it themselves. It runs with the SDK the service uses (mcp 1.x,
where the server class is `FastMCP`) and with mcp 2.x (where it is `MCPServer`). Placing a
hold fails the first time, as a busy service does, so that the agents show a replan.
"""

import logging
from enum import StrEnum

from pydantic import BaseModel

try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer as Server  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server


class Format(StrEnum):
    paper = "paper"
    ebook = "ebook"
    audio = "audio"


class Shelf(BaseModel):
    branch: str
    copies: int


class Book(BaseModel):
    book_id: str
    title: str
    author: str
    format: Format
    shelf: Shelf


class SearchResult(BaseModel):
    books: list[Book]


class Member(BaseModel):
    member_id: str
    name: str
    email: str


class Hold(BaseModel):
    hold_id: str
    book_id: str
    member_id: str
    position: int


BOOKS = [
    Book(book_id="B-300", title="Dune", author="Frank Herbert", format=Format.paper,
         shelf=Shelf(branch="Central", copies=0)),
    Book(book_id="B-301", title="Dune Messiah", author="Frank Herbert", format=Format.paper,
         shelf=Shelf(branch="Central", copies=2)),
    Book(book_id="B-410", title="The Left Hand of Darkness", author="Ursula K. Le Guin",
         format=Format.ebook, shelf=Shelf(branch="online", copies=5)),
]  # fmt: skip
MEMBERS = [Member(member_id="M-7", name="Alice Moreau", email="alice@example.com")]
HOLDS: list[Hold] = []
_FAILED_ONCE: set[str] = set()


def search_books(query: str, format: Format | None = None) -> SearchResult:
    """Search the catalogue by title, author or keyword; returns matching books with their
    book_id, best match first."""
    words = query.lower().split()
    found = [
        book
        for book in BOOKS
        if all(word in f"{book.title} {book.author}".lower() for word in words)
        and (format is None or book.format == format)
    ]
    found.sort(key=lambda book: book.title.lower() != query.lower())
    return SearchResult(books=found)


def find_member(email: str) -> Member:
    """Look up a library member by e-mail address."""
    for member in MEMBERS:
        if member.email == email.lower():
            return member
    raise ValueError(f"no member has the e-mail address {email}")


def place_hold(book_id: str, member_id: str) -> Hold:
    """Place a hold on a book for a member; they are told when it is on the shelf."""
    if "place_hold" not in _FAILED_ONCE:
        _FAILED_ONCE.add("place_hold")
        raise RuntimeError("the holds service is busy, try again")
    if book_id not in {book.book_id for book in BOOKS}:
        raise ValueError(f"no book has the id {book_id}")
    waiting = sum(1 for hold in HOLDS if hold.book_id == book_id)
    hold = Hold(hold_id=f"H-{len(HOLDS) + 1}", book_id=book_id, member_id=member_id,
                position=waiting + 1)  # fmt: skip
    HOLDS.append(hold)
    return hold


server = Server("library")
for tool in (search_books, find_member, place_hold):
    server.add_tool(tool)

if __name__ == "__main__":
    logging.disable(logging.INFO)  # the SDK logs every request it serves
    server.run()
