"""An event ticketing box office as an MCP server: events, venues, seat maps, seat holds,
orders, refunds, transfers and waiting lists, over a small in-memory season."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("box-office")

# The tools that change something (the benchmark's truth about which steps write).
WRITE_TOOLS = {"hold_seats", "purchase_tickets", "refund_order", "transfer_ticket", "join_waitlist"}

NOW = datetime(2025, 5, 1, 12, 0)
HOLD_MINUTES = 10


class EventHit(BaseModel):
    event_id: str
    name: str
    venue_name: str
    city: str
    starts_at: datetime
    from_price: float
    sold_out: bool


class EventSearchResult(BaseModel):
    total: int
    results: list[EventHit]


class Event(BaseModel):
    event_id: str
    name: str
    category: str
    description: str
    performers: list[str]
    venue_id: str
    starts_at: datetime
    age_limit: int | None


class Venue(BaseModel):
    venue_id: str
    name: str
    address: str
    step_free_access: bool
    parking: str
    bag_policy: str


class Seat(BaseModel):
    seat_id: str
    section: str
    row: str
    number: int
    price: float


class SeatMap(BaseModel):
    event_id: str
    seats: list[Seat]


class SeatHold(BaseModel):
    hold_id: str
    event_id: str
    seat_ids: list[str]
    total: float
    expires_at: datetime


class Buyer(BaseModel):
    name: str
    email: str


class Ticket(BaseModel):
    ticket_id: str
    seat_id: str
    holder_email: str


class Order(BaseModel):
    order_id: str
    event_id: str
    buyer: Buyer
    tickets: list[Ticket]
    total: float
    status: str


class OrderSummary(BaseModel):
    order_id: str
    event_name: str
    starts_at: datetime
    tickets: int
    status: str


class Refund(BaseModel):
    refund_id: str
    order_id: str
    amount: float


class Transfer(BaseModel):
    ticket_id: str
    to_email: str
    accepted: bool


class WaitlistEntry(BaseModel):
    event_id: str
    email: str
    position: int


EVENTS = {
    "EV-2201": Event(event_id="EV-2201", name="Arctic Monkeys", category="concert",
                     description="The band's summer stadium tour.",
                     performers=["Arctic Monkeys", "The Hives"], venue_id="V-3",
                     starts_at=datetime(2025, 6, 21, 19, 30), age_limit=None),
    "EV-2300": Event(event_id="EV-2300", name="Swan Lake", category="ballet",
                     description="Tchaikovsky's ballet by the touring company.",
                     performers=["Northern Ballet"], venue_id="V-9",
                     starts_at=datetime(2025, 5, 17, 19, 0), age_limit=None),
    "EV-3040": Event(event_id="EV-3040", name="Late Night Comedy", category="comedy",
                     description="Four stand-up comedians, one host.",
                     performers=["Mae Doyle", "Raj Patel"], venue_id="V-9",
                     starts_at=datetime(2025, 5, 9, 22, 0), age_limit=18),
    "EV-3100": Event(event_id="EV-3100", name="Hamilton", category="musical",
                     description="The musical about the founding father.",
                     performers=["West End cast"], venue_id="V-12",
                     starts_at=datetime(2025, 5, 2, 19, 30), age_limit=None),
    "EV-3200": Event(event_id="EV-3200", name="Coldplay", category="concert",
                     description="Music of the Spheres world tour.",
                     performers=["Coldplay"], venue_id="V-20",
                     starts_at=datetime(2025, 7, 5, 18, 30), age_limit=None),
    "EV-3300": Event(event_id="EV-3300", name="The Mousetrap", category="theatre",
                     description="Agatha Christie's murder mystery.",
                     performers=["St Martin's Theatre company"], venue_id="V-12",
                     starts_at=datetime(2025, 6, 2, 19, 45), age_limit=None),
}  # fmt: skip
VENUES = {
    "V-3": Venue(venue_id="V-3", name="Etihad Stadium", address="Ashton New Rd, Manchester",
                 step_free_access=True, parking="Pre-booked only",
                 bag_policy="No bags larger than A4"),
    "V-9": Venue(venue_id="V-9", name="Grand Theatre", address="46 New Briggate, Leeds",
                 step_free_access=True, parking="None on site",
                 bag_policy="Small bags, searched at the door"),
    "V-12": Venue(venue_id="V-12", name="Victoria Palace", address="Victoria St, London",
                  step_free_access=False, parking="None on site", bag_policy="No large bags"),
    "V-20": Venue(venue_id="V-20", name="Principality Stadium", address="Westgate St, Cardiff",
                  step_free_access=True, parking="Park and ride",
                  bag_policy="Clear bags only"),
}  # fmt: skip
CITY = {"V-3": "Manchester", "V-9": "Leeds", "V-12": "London", "V-20": "Cardiff"}
SOLD_OUT = {"EV-3100"}
SEATS = {
    "EV-2201": [Seat(seat_id="A12", section="floor", row="A", number=12, price=85.0),
                Seat(seat_id="A13", section="floor", row="A", number=13, price=85.0),
                Seat(seat_id="U101", section="upper tier", row="U", number=101, price=45.0)],
    "EV-2300": [Seat(seat_id="S7", section="stalls", row="S", number=7, price=60.0),
                Seat(seat_id="C2", section="circle", row="C", number=2, price=38.0)],
    "EV-3200": [Seat(seat_id="B40", section="balcony", row="B", number=40, price=55.0),
                Seat(seat_id="B41", section="balcony", row="B", number=41, price=49.0)],
    "EV-3300": [Seat(seat_id="F3", section="stalls", row="F", number=3, price=42.0),
                Seat(seat_id="F4", section="stalls", row="F", number=4, price=42.0)],
}  # fmt: skip
HOLDS: dict[str, SeatHold] = {}
ORDERS = {
    "ORD-7781": Order(order_id="ORD-7781", event_id="EV-2300",
                      buyer=Buyer(name="Lee Chan", email="lee.chan@example.com"),
                      tickets=[Ticket(ticket_id="TK-5530", seat_id="S8",
                                      holder_email="lee.chan@example.com")],
                      total=60.0, status="paid"),
    "ORD-7790": Order(order_id="ORD-7790", event_id="EV-2201",
                      buyer=Buyer(name="Lee Chan", email="lee.chan@example.com"),
                      tickets=[Ticket(ticket_id="TK-5601", seat_id="U102",
                                      holder_email="lee.chan@example.com")],
                      total=45.0, status="paid"),
}  # fmt: skip
WAITLISTS: dict[str, list[str]] = {}


def _event(event_id: str) -> Event:
    if event_id not in EVENTS:
        raise ValueError(f"no event {event_id}")
    return EVENTS[event_id]


def _order(order_id: str) -> Order:
    if order_id not in ORDERS:
        raise ValueError(f"no order {order_id}")
    return ORDERS[order_id]


def _hit(event: Event) -> EventHit:
    prices = [seat.price for seat in SEATS.get(event.event_id, [])]
    return EventHit(event_id=event.event_id, name=event.name,
                    venue_name=VENUES[event.venue_id].name, city=CITY[event.venue_id],
                    starts_at=event.starts_at, from_price=min(prices, default=0.0),
                    sold_out=event.event_id in SOLD_OUT)  # fmt: skip


@server.tool()
def search_events(
    query: str, city: str | None = None, on_date: date | None = None
) -> EventSearchResult:
    """Search upcoming events (concerts, theatre, comedy, sport).

    Args:
        query: Words to match against the event's name, performers and category.
        city: Only events in this city.
        on_date: Only events on this day.

    Returns the total number of matches and, for each, its event_id, venue, start time, lowest
    price and whether it is sold out.
    """
    words = query.lower().split()
    hits = []
    for event in EVENTS.values():
        text = " ".join([event.name, event.category, *event.performers]).lower()
        if not any(word in text for word in words):
            continue
        if city and CITY[event.venue_id].lower() != city.lower():
            continue
        if on_date and event.starts_at.date() != on_date:
            continue
        hits.append(_hit(event))
    return EventSearchResult(total=len(hits), results=hits)


@server.tool()
def get_event(event_id: str) -> Event:
    """Get an event's details: description, performers, venue, start time and age limit.

    Args:
        event_id: The event, e.g. "EV-2201".
    """
    return _event(event_id)


@server.tool()
def get_venue(venue_id: str) -> Venue:
    """Get a venue's address, step-free access, parking and bag policy.

    Args:
        venue_id: The venue, e.g. "V-9".
    """
    if venue_id not in VENUES:
        raise ValueError(f"no venue {venue_id}")
    return VENUES[venue_id]


@server.tool()
def list_seats(
    event_id: str, section: str | None = None, max_price: float | None = None
) -> SeatMap:
    """List the seats still for sale at an event, cheapest first.

    Args:
        event_id: The event.
        section: Only this part of the house, e.g. "stalls" or "balcony".
        max_price: Only seats at or under this price.
    """
    _event(event_id)
    held = {seat for hold in HOLDS.values() for seat in hold.seat_ids}
    seats = [
        seat
        for seat in SEATS.get(event_id, [])
        if seat.seat_id not in held
        and (section is None or seat.section.lower() == section.lower())
        and (max_price is None or seat.price <= max_price)
    ]
    return SeatMap(event_id=event_id, seats=sorted(seats, key=lambda seat: seat.price))


@server.tool()
def hold_seats(event_id: str, seat_ids: list[str]) -> SeatHold:
    """Hold seats for ten minutes while the buyer pays. Returns a hold_id to purchase with.

    Args:
        event_id: The event.
        seat_ids: The seats to hold, from list_seats.
    """
    offered = {seat.seat_id: seat for seat in SEATS.get(_event(event_id).event_id, [])}
    missing = [seat_id for seat_id in seat_ids if seat_id not in offered]
    if missing or not seat_ids:
        raise ValueError(f"not for sale: {', '.join(missing) or 'no seat given'}")
    hold = SeatHold(hold_id=f"HD-{len(HOLDS) + 1}", event_id=event_id, seat_ids=seat_ids,
                    total=sum(offered[s].price for s in seat_ids),
                    expires_at=NOW + timedelta(minutes=HOLD_MINUTES))  # fmt: skip
    HOLDS[hold.hold_id] = hold
    return hold


@server.tool()
def purchase_tickets(hold_id: str, buyer: Buyer) -> Order:
    """Pay for held seats and issue the tickets to the buyer by e-mail.

    Args:
        hold_id: The hold made by hold_seats.
        buyer: Who pays, and where the tickets are sent.
    """
    if hold_id not in HOLDS:
        raise ValueError(f"no hold {hold_id}, or it expired")
    hold = HOLDS.pop(hold_id)
    number = 7800 + len(ORDERS)
    tickets = [Ticket(ticket_id=f"TK-{number}-{n}", seat_id=seat_id, holder_email=buyer.email)
               for n, seat_id in enumerate(hold.seat_ids, 1)]  # fmt: skip
    order = Order(order_id=f"ORD-{number}", event_id=hold.event_id, buyer=buyer, tickets=tickets,
                  total=hold.total, status="paid")  # fmt: skip
    ORDERS[order.order_id] = order
    return order


@server.tool()
def find_orders(email: str) -> list[OrderSummary]:
    """Find the orders placed with an e-mail address.

    Args:
        email: The buyer's e-mail address.
    """
    return [
        OrderSummary(order_id=order.order_id, event_name=EVENTS[order.event_id].name,
                     starts_at=EVENTS[order.event_id].starts_at, tickets=len(order.tickets),
                     status=order.status)
        for order in ORDERS.values()
        if order.buyer.email.lower() == email.lower()
    ]  # fmt: skip


@server.tool()
def get_order(order_id: str) -> Order:
    """Get an order with its tickets.

    Args:
        order_id: The order, e.g. "ORD-7781".
    """
    return _order(order_id)


@server.tool()
def refund_order(order_id: str, reason: str | None = None) -> Refund:
    """Refund a whole order to the card that paid for it and void its tickets.

    Args:
        order_id: The order to refund.
        reason: Why, for the box office's records.
    """
    order = _order(order_id)
    if order.status == "refunded":
        raise ValueError(f"order {order_id} was already refunded")
    order.status = "refunded"
    return Refund(refund_id=f"RF-{order_id}", order_id=order_id, amount=order.total)


@server.tool()
def transfer_ticket(ticket_id: str, to_email: str) -> Transfer:
    """Send a ticket to someone else; it moves to them once they accept.

    Args:
        ticket_id: The ticket, e.g. "TK-5530".
        to_email: The new holder's e-mail address.
    """
    for order in ORDERS.values():
        for ticket in order.tickets:
            if ticket.ticket_id == ticket_id:
                return Transfer(ticket_id=ticket_id, to_email=to_email, accepted=False)
    raise ValueError(f"no ticket {ticket_id}")


@server.tool()
def join_waitlist(event_id: str, email: str) -> WaitlistEntry:
    """Put someone on a sold-out event's waiting list; they are e-mailed if seats come back.

    Args:
        event_id: The sold-out event.
        email: Who to tell.
    """
    _event(event_id)
    waiting = WAITLISTS.setdefault(event_id, [])
    waiting.append(email)
    return WaitlistEntry(event_id=event_id, email=email, position=len(waiting))


if __name__ == "__main__":
    server.run()
