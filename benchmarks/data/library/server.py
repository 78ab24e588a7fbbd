"""A public library's lending desk as an MCP server: the catalogue, members, loans, holds and
availability per branch, over a small in-memory collection."""

from __future__ import annotations

from datetime import date, timedelta

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("library")

# The tools that change something (the benchmark's truth about which steps write).
WRITE_TOOLS = {"renew_loan", "place_hold", "notify_member"}

TODAY = date(2025, 3, 10)
LOAN_DAYS = 21
MAX_RENEWALS = 2


class BookSummary(BaseModel):
    book_id: str
    title: str
    author: str
    year: int


class Copy(BaseModel):
    branch: str
    shelf_mark: str


class Book(BaseModel):
    book_id: str
    title: str
    author: str
    year: int
    isbn: str
    subjects: list[str]
    summary: str
    copies: list[Copy]


class Member(BaseModel):
    member_id: str
    name: str
    email: str
    home_branch: str


class Loan(BaseModel):
    loan_id: str
    book_id: str
    title: str
    due_date: date
    renewals: int


class Hold(BaseModel):
    hold_id: str
    book_id: str
    member_id: str
    pickup_branch: str
    position_in_queue: int


class Availability(BaseModel):
    book_id: str
    branch: str
    copies_on_shelf: int
    copies_on_loan: int
    next_due_date: date | None


class Notice(BaseModel):
    member_id: str
    sent_to: str
    message: str


BOOKS = {
    "B-100": Book(book_id="B-100", title="Dune", author="Frank Herbert", year=1965,
                  isbn="9780441013593", subjects=["science fiction", "desert", "politics"],
                  summary="A noble family is handed the desert planet Arrakis, the only source "
                          "of the spice, and is betrayed.",
                  copies=[Copy(branch="Central", shelf_mark="SF HER"),
                          Copy(branch="Riverside", shelf_mark="SF HER")]),
    "B-120": Book(book_id="B-120", title="The Hobbit", author="J. R. R. Tolkien", year=1937,
                  isbn="9780547928227", subjects=["fantasy", "adventure"],
                  summary="Bilbo Baggins is swept into a quest to win back a dwarf kingdom "
                          "from the dragon Smaug.",
                  copies=[Copy(branch="Central", shelf_mark="F TOL"),
                          Copy(branch="Central", shelf_mark="F TOL"),
                          Copy(branch="Eastside", shelf_mark="F TOL")]),
    "B-205": Book(book_id="B-205", title="Neuromancer", author="William Gibson", year=1984,
                  isbn="9780441569595", subjects=["science fiction", "cyberpunk"],
                  summary="A washed-up hacker is hired for one last job against an artificial "
                          "intelligence.",
                  copies=[Copy(branch="Riverside", shelf_mark="SF GIB")]),
    "B-300": Book(book_id="B-300", title="Pride and Prejudice", author="Jane Austen",
                  year=1813, isbn="9780141439518", subjects=["classics", "romance"],
                  summary="Elizabeth Bennet and Mr Darcy misjudge each other across a season "
                          "of balls and proposals.",
                  copies=[Copy(branch="Central", shelf_mark="F AUS"),
                          Copy(branch="Riverside", shelf_mark="F AUS")]),
    "B-310": Book(book_id="B-310", title="The Left Hand of Darkness",
                  author="Ursula K. Le Guin", year=1969, isbn="9780441478125",
                  subjects=["science fiction", "gender"],
                  summary="An envoy tries to bring a planet of ambisexual people into an "
                          "interstellar union.",
                  copies=[Copy(branch="Eastside", shelf_mark="SF LEG")]),
    "B-311": Book(book_id="B-311", title="A Wizard of Earthsea", author="Ursula K. Le Guin",
                  year=1968, isbn="9780547773742", subjects=["fantasy"],
                  summary="A gifted boy unleashes a shadow on the world and must hunt it down.",
                  copies=[Copy(branch="Central", shelf_mark="F LEG")]),
    "B-400": Book(book_id="B-400", title="Snow Crash", author="Neal Stephenson", year=1992,
                  isbn="9780553380958", subjects=["science fiction", "cyberpunk"],
                  summary="A pizza courier and hacker chases a drug that is also a computer "
                          "virus.",
                  copies=[Copy(branch="Eastside", shelf_mark="SF STE")]),
}  # fmt: skip

MEMBERS = {
    "M-2": Member(member_id="M-2", name="Alice Moreau", email="alice@example.com",
                  home_branch="Central"),
    "M-3": Member(member_id="M-3", name="Bob Lindqvist", email="bob@example.com",
                  home_branch="Riverside"),
    "M-4": Member(member_id="M-4", name="Carol Okafor", email="carol@example.com",
                  home_branch="Eastside"),
    "M-6": Member(member_id="M-6", name="Dave Kim", email="dave@example.com",
                  home_branch="Central"),
    "M-9": Member(member_id="M-9", name="Erin Walsh", email="erin@example.com",
                  home_branch="Riverside"),
}  # fmt: skip

LOANS = {
    "L-10": ("M-2", "B-205", TODAY + timedelta(days=4), 0),
    "L-11": ("M-3", "B-120", TODAY + timedelta(days=2), 1),
    "L-12": ("M-3", "B-400", TODAY - timedelta(days=1), 0),
    "L-13": ("M-6", "B-300", TODAY + timedelta(days=9), 0),
    "L-14": ("M-4", "B-310", TODAY + timedelta(days=12), 2),
}
HOLDS: dict[str, Hold] = {}
NOTICES: list[Notice] = []


def _loan(loan_id: str) -> Loan:
    _, book_id, due, renewals = LOANS[loan_id]
    return Loan(loan_id=loan_id, book_id=book_id, title=BOOKS[book_id].title, due_date=due,
                renewals=renewals)  # fmt: skip


def _book(book_id: str) -> Book:
    if book_id not in BOOKS:
        raise ValueError(f"no book {book_id}")
    return BOOKS[book_id]


def _member(member_id: str) -> Member:
    if member_id not in MEMBERS:
        raise ValueError(f"no member {member_id}")
    return MEMBERS[member_id]


@server.tool()
def search_books(query: str, limit: int = 10) -> list[BookSummary]:
    """Search the catalogue by title, author or subject. Returns matching books with their
    book_id, title, author and year."""
    words = query.lower().split()
    hits = []
    for book in BOOKS.values():
        text = " ".join([book.title, book.author, *book.subjects]).lower()
        if all(word in text for word in words):
            hits.append(BookSummary(book_id=book.book_id, title=book.title, author=book.author,
                                    year=book.year))  # fmt: skip
    return hits[:limit]


@server.tool()
def get_book(book_id: str) -> Book:
    """Get the full record of a book by its ID: author, year, ISBN, subjects, a short summary
    and the branches holding copies."""
    return _book(book_id)


@server.tool()
def find_member(email: str | None = None, name: str | None = None) -> list[Member]:
    """Look up library members by e-mail address or by name."""
    if not email and not name:
        raise ValueError("give an email or a name")
    return [
        member
        for member in MEMBERS.values()
        if (email and member.email.lower() == email.lower())
        or (name and name.lower() in member.name.lower())
    ]


@server.tool()
def list_loans(member_id: str) -> list[Loan]:
    """List the books a member currently has on loan, with due dates and how many times each
    loan was renewed."""
    _member(member_id)
    return [_loan(loan_id) for loan_id, row in LOANS.items() if row[0] == member_id]


@server.tool()
def renew_loan(loan_id: str) -> Loan:
    """Renew a loan for another three weeks from today. A loan can be renewed at most twice."""
    if loan_id not in LOANS:
        raise ValueError(f"no loan {loan_id}")
    member_id, book_id, _, renewals = LOANS[loan_id]
    if renewals >= MAX_RENEWALS:
        raise ValueError(f"loan {loan_id} was already renewed {renewals} times")
    LOANS[loan_id] = (member_id, book_id, TODAY + timedelta(days=LOAN_DAYS), renewals + 1)
    return _loan(loan_id)


@server.tool()
def place_hold(book_id: str, member_id: str, pickup_branch: str | None = None) -> Hold:
    """Place a hold on a book for a member. The member is told when a copy is waiting at the
    pickup branch (their home branch unless another is given)."""
    _book(book_id)
    member = _member(member_id)
    queue = sum(hold.book_id == book_id for hold in HOLDS.values())
    hold = Hold(hold_id=f"H-{len(HOLDS) + 1}", book_id=book_id, member_id=member_id,
                pickup_branch=pickup_branch or member.home_branch,
                position_in_queue=queue + 1)  # fmt: skip
    HOLDS[hold.hold_id] = hold
    return hold


@server.tool()
def check_availability(book_id: str, branch: str) -> Availability:
    """Check how many copies of a book are on the shelf at a branch right now, and when the
    next one is due back."""
    book = _book(book_id)
    copies = sum(copy.branch.lower() == branch.lower() for copy in book.copies)
    dues = sorted(row[2] for row in LOANS.values() if row[1] == book_id)
    on_loan = min(len(dues), copies)
    return Availability(book_id=book_id, branch=branch, copies_on_shelf=copies - on_loan,
                        copies_on_loan=on_loan,
                        next_due_date=dues[0] if on_loan else None)  # fmt: skip


@server.tool()
def notify_member(member_id: str, message: str) -> Notice:
    """Send a member a message by e-mail."""
    member = _member(member_id)
    notice = Notice(member_id=member_id, sent_to=member.email, message=message)
    NOTICES.append(notice)
    return notice


if __name__ == "__main__":
    server.run()
