"""A city's bike share as an MCP server: stations, riders, trips, passes, unlocking bikes and
reporting broken ones, over a small in-memory city."""

from __future__ import annotations

from datetime import datetime, timedelta

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("bike-share")

# The tools that change something (the benchmark's truth about which steps write).
WRITE_TOOLS = {"unlock_bike", "reserve_dock", "report_damage", "buy_pass", "dispute_charge"}

NOW = datetime(2025, 6, 3, 8, 15)


class Station(BaseModel):
    station_id: str
    name: str
    bikes_available: int
    ebikes_available: int
    docks_free: int
    distance_m: int


class StationStatus(BaseModel):
    station_id: str
    name: str
    bikes_available: int
    ebikes_available: int
    docks_free: int
    out_of_service: bool
    updated_at: datetime


class Rider(BaseModel):
    rider_id: str
    name: str
    email: str
    current_pass: str | None
    balance: float


class Trip(BaseModel):
    trip_id: str
    bike_id: str
    start_station_id: str
    end_station_id: str | None
    started_at: datetime
    minutes: int
    cost: float


class Receipt(BaseModel):
    trip_id: str
    lines: list[str]
    total: float
    charged_to: str


class Unlock(BaseModel):
    trip_id: str
    bike_id: str
    station_id: str
    electric: bool


class DockReservation(BaseModel):
    reservation_id: str
    station_id: str
    expires_at: datetime


class DamageReport(BaseModel):
    report_id: str
    bike_id: str
    problem: str
    bike_locked: bool


class PassOffer(BaseModel):
    pass_code: str
    name: str
    price: float
    days: int


class Purchase(BaseModel):
    purchase_id: str
    rider_id: str
    pass_code: str
    valid_until: datetime


class Dispute(BaseModel):
    dispute_id: str
    trip_id: str
    status: str


PLACES = {
    "union square": ["ST-204", "ST-117"],
    "central library": ["ST-301", "ST-117"],
    "pier 39": ["ST-410"],
    "grand central": ["ST-500", "ST-501"],
}
STATIONS = {
    "ST-117": StationStatus(station_id="ST-117", name="Market & 5th", bikes_available=6,
                            ebikes_available=2, docks_free=9, out_of_service=False,
                            updated_at=NOW),
    "ST-204": StationStatus(station_id="ST-204", name="Union Square East", bikes_available=0,
                            ebikes_available=1, docks_free=14, out_of_service=False,
                            updated_at=NOW),
    "ST-301": StationStatus(station_id="ST-301", name="Library Plaza", bikes_available=3,
                            ebikes_available=0, docks_free=2, out_of_service=False,
                            updated_at=NOW),
    "ST-410": StationStatus(station_id="ST-410", name="Embarcadero at Pier 39",
                            bikes_available=11, ebikes_available=4, docks_free=1,
                            out_of_service=False, updated_at=NOW),
    "ST-500": StationStatus(station_id="ST-500", name="Grand Central North", bikes_available=2,
                            ebikes_available=0, docks_free=20, out_of_service=False,
                            updated_at=NOW),
    "ST-501": StationStatus(station_id="ST-501", name="Vanderbilt Ave", bikes_available=0,
                            ebikes_available=0, docks_free=0, out_of_service=True,
                            updated_at=NOW),
}  # fmt: skip
RIDERS = {
    "R-12": Rider(rider_id="R-12", name="Jo Park", email="jo.park@example.com",
                  current_pass="monthly", balance=0.0),
    "R-58": Rider(rider_id="R-58", name="Sam Reyes", email="sam.reyes@example.com",
                  current_pass=None, balance=4.5),
}  # fmt: skip
TRIPS = [
    Trip(trip_id="T-7710", bike_id="BK-2001", start_station_id="ST-117", end_station_id="ST-204",
         started_at=NOW - timedelta(days=2), minutes=14, cost=0.0),
    Trip(trip_id="T-7714", bike_id="BK-3391", start_station_id="ST-204", end_station_id="ST-301",
         started_at=NOW - timedelta(days=1), minutes=22, cost=1.5),
    Trip(trip_id="T-8812", bike_id="BK-1450", start_station_id="ST-410", end_station_id="ST-117",
         started_at=NOW - timedelta(hours=20), minutes=31, cost=6.0),
]  # fmt: skip
TRIP_RIDER = {"T-7710": "R-12", "T-7714": "R-12", "T-8812": "R-58"}
PASSES = [
    PassOffer(pass_code="DAY-1", name="Day pass", price=8.0, days=1),
    PassOffer(pass_code="MO-30", name="Monthly pass", price=25.0, days=30),
    PassOffer(pass_code="AN-1", name="Annual pass", price=160.0, days=365),
]
REPORTS: list[DamageReport] = []


def _station(station_id: str) -> StationStatus:
    if station_id not in STATIONS:
        raise ValueError(f"no station {station_id}")
    return STATIONS[station_id]


def _rider(rider_id: str) -> Rider:
    if rider_id not in RIDERS:
        raise ValueError(f"no rider {rider_id}")
    return RIDERS[rider_id]


def _trip(trip_id: str) -> Trip:
    for trip in TRIPS:
        if trip.trip_id == trip_id:
            return trip
    raise ValueError(f"no trip {trip_id}")


@server.tool()
def find_stations(near: str, radius_m: int = 500) -> list[Station]:
    """Stations near a place or address."""
    ids = PLACES.get(near.lower().strip(), [])
    return [
        Station(station_id=s.station_id, name=s.name, bikes_available=s.bikes_available,
                ebikes_available=s.ebikes_available, docks_free=s.docks_free,
                distance_m=120 + 150 * n)
        for n, s in enumerate(_station(i) for i in ids)
        if 120 + 150 * n <= radius_m
    ]  # fmt: skip


@server.tool()
def station_status(station_id: str) -> StationStatus:
    """Live bikes, e-bikes and free docks at a station."""
    return _station(station_id)


@server.tool()
def find_rider(email: str) -> Rider:
    """Rider account by e-mail."""
    for rider in RIDERS.values():
        if rider.email.lower() == email.lower():
            return rider
    raise ValueError(f"no rider with e-mail {email}")


@server.tool()
def rider_trips(rider_id: str, last: int = 10) -> list[Trip]:
    """A rider's recent trips, newest first."""
    _rider(rider_id)
    trips = [t for t in TRIPS if TRIP_RIDER.get(t.trip_id) == rider_id]
    return sorted(trips, key=lambda t: t.started_at, reverse=True)[:last]


@server.tool()
def trip_receipt(trip_id: str) -> Receipt:
    """Receipt for a trip."""
    trip = _trip(trip_id)
    rider = _rider(TRIP_RIDER[trip_id])
    lines = [f"{trip.minutes} min on {trip.bike_id}", f"charge {trip.cost:.2f}"]
    return Receipt(trip_id=trip_id, lines=lines, total=trip.cost, charged_to=rider.email)


@server.tool()
def unlock_bike(rider_id: str, station_id: str, electric: bool = False) -> Unlock:
    """Unlock a bike at a station. Starts a trip."""
    _rider(rider_id)
    station = _station(station_id)
    free = station.ebikes_available if electric else station.bikes_available
    if station.out_of_service or free == 0:
        raise ValueError(f"no {'e-bike' if electric else 'bike'} free at {station_id}")
    trip_id = f"T-{9000 + len(TRIPS)}"
    trip = Trip(trip_id=trip_id, bike_id=f"BK-{4000 + len(TRIPS)}", start_station_id=station_id,
                end_station_id=None, started_at=NOW, minutes=0, cost=0.0)  # fmt: skip
    TRIPS.append(trip)
    TRIP_RIDER[trip_id] = rider_id
    return Unlock(trip_id=trip_id, bike_id=trip.bike_id, station_id=station_id, electric=electric)


@server.tool()
def reserve_dock(station_id: str, rider_id: str) -> DockReservation:
    """Hold a free dock for 15 minutes."""
    _rider(rider_id)
    if _station(station_id).docks_free == 0:
        raise ValueError(f"no free dock at {station_id}")
    return DockReservation(reservation_id=f"DR-{station_id}-{rider_id}", station_id=station_id,
                           expires_at=NOW + timedelta(minutes=15))  # fmt: skip


@server.tool()
def report_damage(bike_id: str, problem: str) -> DamageReport:
    """Report a broken or damaged bike."""
    report = DamageReport(report_id=f"DMG-{len(REPORTS) + 1}", bike_id=bike_id, problem=problem,
                          bike_locked=True)  # fmt: skip
    REPORTS.append(report)
    return report


@server.tool()
def list_passes() -> list[PassOffer]:
    """Passes on sale, with prices."""
    return PASSES


@server.tool()
def buy_pass(rider_id: str, pass_code: str) -> Purchase:
    """Buy a pass for a rider, charged to their card."""
    rider = _rider(rider_id)
    offer = next((p for p in PASSES if p.pass_code == pass_code), None)
    if offer is None:
        raise ValueError(f"no pass {pass_code}")
    rider.current_pass = offer.name
    return Purchase(purchase_id=f"PU-{rider_id}-{pass_code}", rider_id=rider_id,
                    pass_code=pass_code, valid_until=NOW + timedelta(days=offer.days))  # fmt: skip


@server.tool()
def dispute_charge(trip_id: str, reason: str) -> Dispute:
    """Contest what a trip was charged."""
    _trip(trip_id)
    return Dispute(dispute_id=f"DS-{trip_id}", trip_id=trip_id, status="under review")


if __name__ == "__main__":
    server.run()
