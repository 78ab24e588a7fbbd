"""A group of outpatient clinics as an MCP server: doctors and their open slots, patients,
appointments, prescriptions and reminders, over a small in-memory practice."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel, Field

server = FastMCP("clinic")

# The tools that change something (the benchmark's truth about which steps write).
WRITE_TOOLS = {
    "book_appointment",
    "cancel_appointment",
    "reschedule_appointment",
    "request_refill",
    "send_reminder",
}

PatientId = Annotated[str, Field(description="The patient's ID, e.g. 'P-1042'.")]
AppointmentId = Annotated[str, Field(description="The appointment's ID, e.g. 'A-3107'.")]
DoctorId = Annotated[str, Field(description="The doctor's ID, e.g. 'D-7'.")]


class Clinic(BaseModel):
    name: str
    address: str
    city: str


class DoctorSummary(BaseModel):
    doctor_id: str
    name: str
    specialty: str
    clinic: Clinic


class Doctor(BaseModel):
    doctor_id: str
    name: str
    specialty: str
    clinic: Clinic
    languages: list[str]
    accepts_new_patients: bool
    biography: str


class Patient(BaseModel):
    patient_id: str
    name: str
    email: str
    phone: str
    date_of_birth: date


class Slot(BaseModel):
    slot_id: str
    doctor_id: str
    starts_at: datetime
    minutes: int


class Appointment(BaseModel):
    appointment_id: str
    patient_id: str
    doctor_id: str
    starts_at: datetime
    reason: str
    status: Literal["booked", "cancelled", "attended"]


class AppointmentDetails(Appointment):
    doctor_name: str
    clinic: Clinic
    what_to_bring: list[str]


class Prescription(BaseModel):
    prescription_id: str
    medication: str
    dose: str
    refills_left: int
    prescribed_by: str


class RefillRequest(BaseModel):
    refill_id: str
    prescription_id: str
    pharmacy: str
    status: Literal["sent", "needs_review"]


class Reminder(BaseModel):
    appointment_id: str
    channel: Literal["sms", "email"]
    sent_to: str


LEEDS = Clinic(name="Headrow Clinic", address="12 The Headrow", city="Leeds")
BRISTOL = Clinic(name="Harbourside Health", address="3 Canon's Road", city="Bristol")
MANCHESTER = Clinic(name="Deansgate Medical", address="200 Deansgate", city="Manchester")

DOCTORS = {
    "D-7": Doctor(doctor_id="D-7", name="Dr. Amara Osei", specialty="dermatology", clinic=LEEDS,
                  languages=["English", "Twi"], accepts_new_patients=True,
                  biography="Consultant dermatologist with a focus on eczema and skin cancer "
                            "screening."),
    "D-9": Doctor(doctor_id="D-9", name="Dr. Lucía Fernández", specialty="paediatrics",
                  clinic=BRISTOL, languages=["English", "Spanish"], accepts_new_patients=True,
                  biography="Paediatrician for twenty years, trained in Madrid and Bristol."),
    "D-12": Doctor(doctor_id="D-12", name="Dr. Henry Walsh", specialty="cardiology",
                   clinic=MANCHESTER, languages=["English"], accepts_new_patients=False,
                   biography="Cardiologist; runs the clinic's blood pressure service."),
    "D-15": Doctor(doctor_id="D-15", name="Dr. Priya Nair", specialty="general practice",
                   clinic=LEEDS, languages=["English", "Hindi"], accepts_new_patients=True,
                   biography="GP with an interest in sports injuries."),
}  # fmt: skip

PATIENTS = {
    "P-1042": Patient(patient_id="P-1042", name="Maria Lopez", email="maria.lopez@example.com",
                      phone="+44 7700 900104", date_of_birth=date(1988, 5, 2)),
    "P-2210": Patient(patient_id="P-2210", name="Tom Baker", email="tom.baker@example.com",
                      phone="+44 7700 900221", date_of_birth=date(1954, 11, 20)),
    "P-3301": Patient(patient_id="P-3301", name="Aisha Khan", email="aisha.khan@example.com",
                      phone="+44 7700 900330", date_of_birth=date(1992, 1, 14)),
}  # fmt: skip

SLOTS = {
    "S-88": Slot(slot_id="S-88", doctor_id="D-15", starts_at=datetime(2025, 4, 14, 9, 0),
                 minutes=15),
    "S-89": Slot(slot_id="S-89", doctor_id="D-7", starts_at=datetime(2025, 4, 14, 10, 30),
                 minutes=20),
    "S-90": Slot(slot_id="S-90", doctor_id="D-7", starts_at=datetime(2025, 4, 14, 14, 0),
                 minutes=20),
    "S-91": Slot(slot_id="S-91", doctor_id="D-9", starts_at=datetime(2025, 4, 15, 11, 0),
                 minutes=30),
    "S-92": Slot(slot_id="S-92", doctor_id="D-12", starts_at=datetime(2025, 4, 15, 8, 30),
                 minutes=30),
}  # fmt: skip

APPOINTMENTS = {
    "A-2950": AppointmentDetails(appointment_id="A-2950", patient_id="P-1042", doctor_id="D-7",
                                 starts_at=datetime(2025, 4, 3, 9, 40), reason="mole check",
                                 status="booked", doctor_name="Dr. Amara Osei", clinic=LEEDS,
                                 what_to_bring=["photo ID", "list of current medication"]),
    "A-3107": AppointmentDetails(appointment_id="A-3107", patient_id="P-2210",
                                 doctor_id="D-12", starts_at=datetime(2025, 4, 8, 15, 0),
                                 reason="blood pressure review", status="booked",
                                 doctor_name="Dr. Henry Walsh", clinic=MANCHESTER,
                                 what_to_bring=["home blood pressure readings"]),
    "A-3120": AppointmentDetails(appointment_id="A-3120", patient_id="P-1042",
                                 doctor_id="D-15", starts_at=datetime(2025, 4, 9, 11, 15),
                                 reason="knee pain", status="booked",
                                 doctor_name="Dr. Priya Nair", clinic=LEEDS,
                                 what_to_bring=["photo ID"]),
}  # fmt: skip

PRESCRIPTIONS = {
    "P-2210": [
        Prescription(prescription_id="RX-5521", medication="amlodipine", dose="5 mg daily",
                     refills_left=2, prescribed_by="D-12"),
        Prescription(prescription_id="RX-5522", medication="atorvastatin", dose="20 mg daily",
                     refills_left=0, prescribed_by="D-12"),
    ],
    "P-1042": [
        Prescription(prescription_id="RX-6010", medication="hydrocortisone cream",
                     dose="apply twice daily", refills_left=1, prescribed_by="D-7"),
    ],
}  # fmt: skip
REFILLS: list[RefillRequest] = []


def _patient(patient_id: str) -> Patient:
    if patient_id not in PATIENTS:
        raise ValueError(f"no patient {patient_id}")
    return PATIENTS[patient_id]


def _appointment(appointment_id: str) -> AppointmentDetails:
    if appointment_id not in APPOINTMENTS:
        raise ValueError(f"no appointment {appointment_id}")
    return APPOINTMENTS[appointment_id]


def _summary(doctor: Doctor) -> DoctorSummary:
    return DoctorSummary(doctor_id=doctor.doctor_id, name=doctor.name,
                         specialty=doctor.specialty, clinic=doctor.clinic)  # fmt: skip


@server.tool()
def search_doctors(
    specialty: Annotated[
        str | None, Field(description="A medical specialty, such as 'dermatology'.")
    ] = None,
    city: Annotated[str | None, Field(description="Only doctors practising in this city.")] = None,
    name: Annotated[str | None, Field(description="All or part of the doctor's name.")] = None,
    language: Annotated[
        str | None, Field(description="A language the doctor speaks with patients.")
    ] = None,
) -> list[DoctorSummary]:
    """Search the clinics' doctors by specialty, city, name or spoken language."""
    found = []
    for doctor in DOCTORS.values():
        if specialty and specialty.lower()[:6] not in doctor.specialty.lower():
            continue
        if city and city.lower() != doctor.clinic.city.lower():
            continue
        if name and name.lower().removeprefix("dr. ") not in doctor.name.lower():
            continue
        if language and language.lower() not in [lang.lower() for lang in doctor.languages]:
            continue
        found.append(_summary(doctor))
    return found


@server.tool()
def get_doctor(doctor_id: DoctorId) -> Doctor:
    """A doctor's profile: specialty, clinic, languages, biography and whether they take new
    patients."""
    if doctor_id not in DOCTORS:
        raise ValueError(f"no doctor {doctor_id}")
    return DOCTORS[doctor_id]


@server.tool()
def find_patient(
    email: Annotated[str | None, Field(description="The patient's e-mail address.")] = None,
    phone: Annotated[str | None, Field(description="The patient's phone number.")] = None,
) -> Patient:
    """Find a registered patient by e-mail address or phone number."""
    for patient in PATIENTS.values():
        if email and patient.email.lower() == email.lower():
            return patient
        if phone and patient.phone.replace(" ", "") == phone.replace(" ", ""):
            return patient
    raise ValueError("no patient with these details")


@server.tool()
def list_open_slots(
    doctor_id: DoctorId,
    day: Annotated[date, Field(description="The day to look at, as YYYY-MM-DD.")],
) -> list[Slot]:
    """Free appointment slots of a doctor on a given day."""
    return [
        slot
        for slot in SLOTS.values()
        if slot.doctor_id == doctor_id and slot.starts_at.date() == day
    ]


@server.tool()
def book_appointment(
    patient_id: PatientId,
    slot_id: Annotated[str, Field(description="A free slot, from list_open_slots.")],
    reason: Annotated[str, Field(description="Why the patient wants to be seen.")] = "",
) -> Appointment:
    """Book a patient into a free slot."""
    _patient(patient_id)
    if slot_id not in SLOTS:
        raise ValueError(f"slot {slot_id} is not free")
    slot = SLOTS.pop(slot_id)
    doctor = DOCTORS[slot.doctor_id]
    booked = AppointmentDetails(appointment_id=f"A-{4000 + len(APPOINTMENTS)}",
                                patient_id=patient_id, doctor_id=slot.doctor_id,
                                starts_at=slot.starts_at, reason=reason, status="booked",
                                doctor_name=doctor.name, clinic=doctor.clinic,
                                what_to_bring=["photo ID"])  # fmt: skip
    APPOINTMENTS[booked.appointment_id] = booked
    return Appointment.model_validate(booked.model_dump())


@server.tool()
def list_appointments(
    patient_id: PatientId,
    include_past: Annotated[bool, Field(description="Also list past appointments.")] = False,
) -> list[Appointment]:
    """A patient's appointments, upcoming ones first."""
    _patient(patient_id)
    rows = [a for a in APPOINTMENTS.values() if a.patient_id == patient_id]
    if not include_past:
        rows = [a for a in rows if a.status == "booked"]
    return [Appointment.model_validate(a.model_dump()) for a in sorted(rows, key=_start)]


def _start(appointment: Appointment) -> datetime:
    return appointment.starts_at


@server.tool()
def get_appointment(appointment_id: AppointmentId) -> AppointmentDetails:
    """Everything about one appointment: when, with whom, the clinic's address and what to
    bring."""
    return _appointment(appointment_id)


@server.tool()
def cancel_appointment(
    appointment_id: AppointmentId,
    reason: Annotated[str | None, Field(description="Why it is cancelled.")] = None,
) -> Appointment:
    """Cancel an appointment and free its slot."""
    appointment = _appointment(appointment_id)
    appointment.status = "cancelled"
    return Appointment.model_validate(appointment.model_dump())


@server.tool()
def reschedule_appointment(
    appointment_id: AppointmentId,
    new_slot_id: Annotated[str, Field(description="The free slot to move it to.")],
) -> Appointment:
    """Move an appointment to another free slot with the same doctor or another one."""
    appointment = _appointment(appointment_id)
    if new_slot_id not in SLOTS:
        raise ValueError(f"slot {new_slot_id} is not free")
    slot = SLOTS.pop(new_slot_id)
    appointment.starts_at, appointment.doctor_id = slot.starts_at, slot.doctor_id
    return Appointment.model_validate(appointment.model_dump())


@server.tool()
def list_prescriptions(patient_id: PatientId) -> list[Prescription]:
    """A patient's repeat prescriptions and how many refills each has left."""
    _patient(patient_id)
    return PRESCRIPTIONS.get(patient_id, [])


@server.tool()
def request_refill(
    prescription_id: Annotated[str, Field(description="The prescription, e.g. 'RX-5521'.")],
    pharmacy: Annotated[
        str | None, Field(description="Where to collect it; the patient's usual one if empty.")
    ] = None,
) -> RefillRequest:
    """Ask for a repeat prescription to be refilled and sent to a pharmacy."""
    held = [
        p for rows in PRESCRIPTIONS.values() for p in rows if p.prescription_id == prescription_id
    ]
    if not held:
        raise ValueError(f"no prescription {prescription_id}")
    status: Literal["sent", "needs_review"] = "sent" if held[0].refills_left else "needs_review"
    refill = RefillRequest(refill_id=f"RF-{len(REFILLS) + 1}", prescription_id=prescription_id,
                           pharmacy=pharmacy or "usual pharmacy", status=status)  # fmt: skip
    REFILLS.append(refill)
    return refill


@server.tool()
def send_reminder(
    appointment_id: AppointmentId,
    channel: Annotated[
        Literal["sms", "email"], Field(description="Text message or e-mail.")
    ] = "sms",
) -> Reminder:
    """Send the patient a reminder of an appointment."""
    appointment = _appointment(appointment_id)
    patient = _patient(appointment.patient_id)
    to = patient.phone if channel == "sms" else patient.email
    return Reminder(appointment_id=appointment_id, channel=channel, sent_to=to)


if __name__ == "__main__":
    server.run()
