"""Docs that run: the examples of README.md and docs/*.md, found by their markers, run, and
their documented output compared with what the code prints.

The convention (also in docs/architecture.md, "Docs that run"): an HTML comment, invisible
when rendered, is the last non-blank line before every fenced code block.

    <!-- example: shell service=no-model -->   the block is bash: curl, jq, planner-arm, ...
    <!-- example: python service=no-model -->  the block is a Python program (the client)
    <!-- example: serve-log -->               the block is what `bash scripts/serve.sh` prints
    <!-- output -->                            the block is what the example above it prints
    <!-- output: ignore-whitespace -->         ... compared with all whitespace removed
    <!-- example: not-run, <reason> -->        illustrative only, and why

A shell block whose lines start with `$ ` holds its commands and their output together; with
`output=comments` the block's last `# ` lines are its output (`output=ignore-whitespace`
compares an output written in the example's own block so); with `command='...'` the block is
the output of that command; `before='...'` runs first, its output unseen (a file, a variable
the example uses). For serve-log: `plan=<goal>` logs one plan too, `format=json`, `tail=N`
compares the last N lines only. An example without an output block must exit 0 (and a shell
example must not print an error body). `service=` names the service the example talks to
(`SERVICE_ENVS`): a real process on a free loopback port, one per name for the whole run;
`localhost:8080` and `127.0.0.1:8080` in the example are rewritten to it. Options are
`key=value` words (shell quoting).

Comparison: both sides are normalised (`NORMALISERS`: ids, timestamps, latencies, ...), then
matched exactly, except that a line `...` in the docs stands for any number of lines and
`...` within a line for any text.
"""

from __future__ import annotations

import difflib
import json
import os
import queue
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from support.otlp_receiver import OTLPReceiver
from support.redis_server import RedisServer
from support.service import free_port, start_service, stop_services, wait_for_line
from support.stub_model import StubLLM

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KINDS = ("shell", "python", "serve-log")
NOT_RUN = "not-run"
IGNORE_WHITESPACE = "ignore-whitespace"
DOC_PORT = 8080
RUN_SECONDS = 60

MARKER = re.compile(r"^\s*<!--\s*(example|output)\s*(?::\s*(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,})([\w-]*)\s*$")
DOC_URL = re.compile(rf"\b(?:localhost|127\.0\.0\.1):{DOC_PORT}\b")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
LEADING_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z? ", re.MULTILINE)

# What changes from run to run, replaced on both sides by a placeholder before comparing.
NORMALISERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<id>"),
    (re.compile(r"(\"?span_id\"?[=:] ?\"?)[0-9a-f]{16}\b"), r"\1<span>"),
    (re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"(\"?(?:latency_ms|duration_ms|uptime_seconds)\"?[=:] ?)[\d.]+"), r"\1<n>"),
    # The console pads the event to a column, so a shorter PID leaves more spaces after it.
    (re.compile(r"(Started server process \[)\d+\] *"), r"\1<pid>] "),
    (re.compile(r"\bPython 3\.\d+\.\d+\b"), "Python <version>"),
)


@dataclass(frozen=True)
class Marker:
    role: str  # "example" or "output"
    kind: str  # a KINDS entry or NOT_RUN for an example; "" or IGNORE_WHITESPACE for output
    options: dict[str, str]
    reason: str


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # the opening fence's line, 1-based
    lang: str
    text: str
    marker: Marker | None
    markup_error: str = ""  # why the comment before it is not a marker the harness reads

    @property
    def where(self) -> str:
        return f"{shown(self.path)}:{self.line}"


@dataclass
class Example:
    block: Block
    kind: str
    options: dict[str, str]
    source: str
    expected: str | None = None
    ignore_whitespace: bool = False

    @property
    def where(self) -> str:
        return self.block.where


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


class MarkupError(ValueError):
    """A marker the harness cannot read, or a block left without one."""


def parse_marker(text: str) -> Marker | None:
    match = MARKER.match(text)
    if match is None:
        return None
    role, body = match.group(1), (match.group(2) or "").strip()
    if role == "output":
        if body not in ("", IGNORE_WHITESPACE):
            raise MarkupError(f"unknown output option {body!r}")
        return Marker(role, body, {}, "")
    if body.split(",")[0].strip() == NOT_RUN:
        reason = body.partition(",")[2].strip()
        if not reason:
            raise MarkupError("a not-run example says why: <!-- example: not-run, <reason> -->")
        return Marker(role, NOT_RUN, {}, reason)
    try:
        kind, *pairs = shlex.split(body) or [""]
    except ValueError as error:
        raise MarkupError(f"{text.strip()!r}: {error}") from None
    if kind not in KINDS or any("=" not in pair for pair in pairs):
        raise MarkupError(f"not an example marker: {text.strip()!r} (kinds: {KINDS})")
    return Marker(role, kind, dict(pair.split("=", 1) for pair in pairs), "")


def blocks(path: Path) -> Iterator[Block]:
    """Every fenced code block of `path`, with the marker on the last non-blank line before
    it (None when there is none)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        indent, ticks, lang = fence.groups()
        end = next(
            (i for i in range(index + 1, len(lines)) if lines[i].strip() == ticks), len(lines)
        )
        body = [
            line[len(indent) :] if line.startswith(indent) else line
            for line in lines[index + 1 : end]
        ]
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker, markup_error = None, ""
        try:
            marker = parse_marker(before)
        except MarkupError as error:
            markup_error = str(error)
        yield Block(path, index + 1, lang, "\n".join(body) + "\n", marker, markup_error)
        index = end + 1


def _split_session(text: str) -> tuple[str, str]:
    """A `$ command` block: (the commands, the output printed under them)."""
    commands, output, continued = [], [], False
    for line in text.splitlines():
        if line.startswith("$ ") or continued:
            commands.append(line[2:] if line.startswith("$ ") and not continued else line)
            continued = line.endswith("\\")
        else:
            output.append(line)
    return "\n".join(commands) + "\n", "\n".join(output) + "\n"


def _trailing_comments(text: str) -> tuple[str, str]:
    """A block whose last lines are `# ` comments: (the commands, the comments' text)."""
    lines = text.splitlines()
    start = len(lines)
    while start > 0 and lines[start - 1].startswith("# "):
        start -= 1
    output = [line[2:] for line in lines[start:]]
    return "\n".join(lines[:start]) + "\n", "\n".join(output) + "\n"


def _example(block: Block, marker: Marker) -> Example:
    """The example a marked block holds: its commands, and its output when written inside."""
    options = marker.options
    example = Example(block, marker.kind, options, block.text)
    if "command" in options:  # the block is the output of the marker's command
        example.source, example.expected = options["command"] + "\n", block.text
    elif options.get("output") == "comments":
        example.source, example.expected = _trailing_comments(block.text)
    elif marker.kind == "serve-log":
        example.source, example.expected = "", block.text
    elif marker.kind == "shell" and block.text.startswith("$ "):
        example.source, example.expected = _split_session(block.text)
    example.ignore_whitespace = options.get("output") == IGNORE_WHITESPACE
    if "before" in options:
        example.source = f"{{ {options['before']}\n}} >/dev/null\n{example.source}"
    return example


def examples(paths: list[Path] = DOCS) -> tuple[list[Example], list[Block], list[str]]:
    """The examples to run, the blocks marked not-run, and the markup problems (a block
    without a marker, an output with no example before it)."""
    found: list[Example] = []
    not_run: list[Block] = []
    problems: list[str] = []
    for path in paths:
        current: Example | None = None
        for block in blocks(path):
            marker = block.marker
            if marker is None:
                why = block.markup_error or "a code block with no marker before it"
                problems.append(f"{block.where}: {why}")
            elif marker.role == "output":
                if current is None or current.expected is not None:
                    problems.append(f"{block.where}: an output with no example before it")
                    continue
                current.expected, current.ignore_whitespace = block.text, bool(marker.kind)
            elif marker.kind == NOT_RUN:
                not_run.append(block)
                current = None
            else:
                current = _example(block, marker)
                found.append(current)
    return found, not_run, problems


# --- comparing -----------------------------------------------------------------------------


def normalise(text: str, replacements: dict[str, str] | None = None) -> str:
    for old, new in (replacements or {}).items():
        text = text.replace(old, new)
    text = ANSI.sub("", text)
    for pattern, placeholder in NORMALISERS:
        text = pattern.sub(placeholder, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _pattern(expected: str, ignore_whitespace: bool) -> re.Pattern[str]:
    """The regular expression the documented output stands for: a line `...` is any lines
    (none included), `...` within a line any text."""
    if ignore_whitespace:
        parts = re.sub(r"\s+", "", expected).split("...")
        return re.compile(".*?".join(re.escape(part) for part in parts), re.DOTALL)
    pieces = []
    for line in expected.splitlines():
        if line.strip() == "...":
            pieces.append(r"(?:[^\n]*\n)*?")
        else:
            inner = r"[^\n]*?".join(re.escape(part) for part in line.split("..."))
            pieces.append(inner + r"\n")
    return re.compile("".join(pieces))


def matches(expected: str, actual: str, *, ignore_whitespace: bool = False) -> bool:
    if ignore_whitespace:
        actual = re.sub(r"\s+", "", actual)
    else:
        actual += "\n"
    return _pattern(expected, ignore_whitespace).fullmatch(actual) is not None


def difference(example: Example, expected: str, actual: str) -> str:
    """A readable failure: where the example is, and a diff of docs against code."""
    diff = difflib.unified_diff(
        expected.splitlines(), actual.splitlines(), "the docs", "the code", lineterm="", n=2
    )
    return f"{example.where}: the {example.kind} example prints otherwise\n" + "\n".join(diff)


# --- running -------------------------------------------------------------------------------


def clean_environment(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without any planner setting (a developer's key, a CI
    variable), plus `extra`."""
    from planner_arm.config import ENV_FIELDS

    dropped = {*ENV_FIELDS, "PLANNER_CONFIG"}
    kept = {
        name: value
        for name, value in os.environ.items()
        if name not in dropped and not name.startswith("PLANNER_")
    }
    return {**kept, **extra}


@dataclass(frozen=True)
class Run:
    output: str
    returncode: int


def workspace(directory: Path) -> Path:
    """A directory that looks like the repository's top (its files linked, `.venv` the
    running interpreter's), so an example's relative paths work and its files land here."""
    for entry in ROOT.iterdir():
        if entry.name not in (".venv", ".git") and not (directory / entry.name).exists():
            (directory / entry.name).symlink_to(entry)
    venv = directory / ".venv"
    if not venv.exists():
        venv.symlink_to(Path(sys.prefix))
    return directory


def run_source(example: Example, base_url: str | None, directory: Path) -> Run:
    """Runs a shell or Python example in `directory` against the service at `base_url`."""
    source = example.source
    if base_url is not None:
        source = DOC_URL.sub(base_url.removeprefix("http://"), source)
    if example.kind == "python":
        command = [sys.executable, "-c", source]
    else:
        strict = "" if example.expected is not None else "set -euo pipefail\n"
        command = ["bash", "-c", strict + source]
    env = clean_environment({"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"})
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        command,
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    return Run(done.stdout, done.returncode)


def prints_an_error(output: str) -> bool:
    """Whether a line of `output` is one of the service's error bodies."""
    for line in output.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and {"error", "detail"} <= value.keys():
            return True
    return False


# --- scripts/setup.sh ----------------------------------------------------------------------

SETUP_SCRIPT = ROOT / "scripts" / "setup.sh"
SHELL_VALUE = re.compile(r"\$\((?:[^()]|\([^()]*\))*\)|\$\{(\w+)\}|\$(\w+)")


def _template(text: str, assigned: dict[str, list[str]], depth: int = 0) -> str:
    """A shell string as a regular expression: a variable the script assigns stands for one
    of its values, any other `$var`, `${var}` or `$(...)` for any text."""
    pieces, last = [], 0
    for found in SHELL_VALUE.finditer(text):
        pieces.append(re.escape(text[last : found.start()]))
        name = found.group(1) or found.group(2)
        values = assigned.get(name or "", []) if depth < 2 else []
        pieces.append(
            "(?:" + "|".join(_template(v, assigned, depth + 1) for v in values) + ")"
            if values
            else ".+"
        )
        last = found.end()
    return "".join(pieces) + re.escape(text[last:])


def setup_lines() -> list[re.Pattern[str]]:
    """What scripts/setup.sh can print: one pattern per `echo "setup: ..."` line."""
    assigned: dict[str, list[str]] = {}
    echoed = []
    for line in SETUP_SCRIPT.read_text(encoding="utf-8").splitlines():
        assignment = re.match(r'\s*(\w+)="(.*)"\s*$', line)
        if assignment:
            assigned.setdefault(assignment.group(1), []).append(assignment.group(2))
        echo = re.search(r'echo "(setup: .*)"(?:\s*>&2)?\s*$', line)
        if echo:
            echoed.append(echo.group(1))
    return [re.compile(_template(text, assigned)) for text in echoed]


def unknown_setup_lines(lines: list[str]) -> list[str]:
    """The lines of `lines` that scripts/setup.sh cannot print."""
    patterns = setup_lines()
    return [line for line in lines if not any(p.fullmatch(line) for p in patterns)]


# --- the services the examples talk to -----------------------------------------------------

# Every service of the examples: stopped at once, no request rate (a page of examples is
# faster than one anonymous caller's 20 a second).
COMMON_ENV = {"DRAIN_SECONDS": "0", "PLANNER_TENANTS__REQUESTS_PER_SECOND": "0"}


class Resources:
    """What a service's settings may need, started on first use: the stub model, Redis."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.stub: StubLLM | None = None
        self.redis: RedisServer | None = None
        self.otlp: OTLPReceiver | None = None

    def stub_url(self) -> str:
        if self.stub is None:
            self.stub = StubLLM().start()
        return self.stub.base_url

    def redis_url(self) -> str:
        if self.redis is None:
            self.redis = RedisServer(self.directory).start()
        return self.redis.url

    def otlp_endpoint(self) -> str:
        if self.otlp is None:
            self.otlp = OTLPReceiver(keep=False).__enter__()
        return self.otlp.endpoint

    def stop(self) -> None:
        if self.otlp is not None:
            self.otlp.__exit__(None, None, None)
        if self.stub is not None:
            self.stub.stop()
        if self.redis is not None:
            self.redis.stop()


# `service=<name>` of a marker: the settings of the service the example talks to.
SERVICE_ENVS: dict[str, Callable[[Resources], dict[str, str]]] = {
    "no-model": lambda _: {},
    "stub-model": lambda r: {"OPENAI_BASE_URL": r.stub_url(), "OPENAI_API_KEY": "sk-test"},
    "redis": lambda r: {"PLANNER_STORE_URL": r.redis_url()},
    "otlp": lambda r: {"OTEL_EXPORTER_OTLP_ENDPOINT": r.otlp_endpoint()},
}


@dataclass
class Started:
    url: str
    process: subprocess.Popen[str]
    lines: queue.Queue[str]
    startup_log: list[str]

    @property
    def replacements(self) -> dict[str, str]:
        """The service's own address written as the docs write it."""
        return {self.url.removeprefix("http://"): f"127.0.0.1:{DOC_PORT}"}


class Services:
    """The services of a run of the examples: one process per settings name, started when an
    example first names it and stopped at the end."""

    def __init__(self, directory: Path) -> None:
        self.resources = Resources(directory)
        self.shared: dict[str, Started] = {}
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, name: str, **env: str) -> Started:
        """A new service with the settings `name` and `env` on top."""
        if name not in SERVICE_ENVS:
            raise MarkupError(f"no service named {name!r}: one of {sorted(SERVICE_ENVS)}")
        port = free_port()
        startup_log: list[str] = []
        settings = {**COMMON_ENV, **SERVICE_ENVS[name](self.resources), **env}
        process, lines, _ = start_service(
            port, settings, base_env=clean_environment({}), startup_log=startup_log
        )
        self.processes.append(process)
        return Started(f"http://127.0.0.1:{port}", process, lines, startup_log)

    def url(self, name: str) -> str:
        if name not in self.shared:
            self.shared[name] = self.start(name, LOG_FORMAT="json")
        return self.shared[name].url

    def stop(self) -> None:
        stop_services(self.processes)
        self.resources.stop()


def serve_log(example: Example, services: Services) -> str:
    """What the service logs when it starts (with `service=` and `format=`, console by
    default), and when `plan=` is given, what it logs for one plan of that goal (with a
    `traceparent=` header, if given)."""
    options = example.options
    started = services.start(
        options.get("service", "no-model"), LOG_FORMAT=options.get("format", "console")
    )
    log = list(started.startup_log)
    wait_for_line(started.lines, "Uvicorn running on", log)
    if "plan" in options:
        headers = {"traceparent": options["traceparent"]} if "traceparent" in options else {}
        with httpx.Client(base_url=started.url, timeout=10) as client:
            client.post("/plan", json={"goal": options["plan"]}, headers=headers)
        wait_for_line(started.lines, "plan_created", log)
    if "tail" in options:
        log = log[-int(options["tail"]) :]
    text = LEADING_TIMESTAMP.sub("", ANSI.sub("", "".join(log)))
    return normalise(text, started.replacements)


def run(example: Example, services: Services, directory: Path) -> tuple[str, str | None]:
    """Runs `example`: (what it printed, normalised; a problem other than its output)."""
    if example.kind == "serve-log":
        return serve_log(example, services), None
    name = example.options.get("service")
    url = services.url(name) if name else None
    done = run_source(example, url, directory)
    replacements = services.shared[name].replacements if name else {}
    printed = normalise(done.output, replacements)
    if example.expected is None and (done.returncode != 0 or prints_an_error(done.output)):
        return printed, f"{example.where}: exit {done.returncode}, printed:\n{done.output}"
    return printed, None


def check(example: Example, services: Services, directory: Path) -> str | None:
    """None when `example` prints what the docs say it prints, else why not."""
    printed, problem = run(example, services, directory)
    if problem is not None or example.expected is None:
        return problem
    expected_lines = example.expected.splitlines()
    if example.kind == "serve-log":
        setup = [line for line in expected_lines if line.startswith("setup: ")]
        unknown = unknown_setup_lines(setup)
        if unknown:
            return f"{example.where}: scripts/setup.sh never prints {unknown}"
        expected_lines = expected_lines[len(setup) :]
    expected = normalise("\n".join(expected_lines))
    if matches(expected, printed, ignore_whitespace=example.ignore_whitespace):
        return None
    return difference(example, expected, printed)


def program_and_output(doc: Path, heading: str) -> tuple[str, str]:
    """The first python block and the first text block under `heading` (a whole heading
    line, `## Trying it`) of `doc`, up to the next heading of its level: a program the docs
    show whole and what it prints."""
    level = heading.split(" ", 1)[0]
    section = doc.read_text().split(f"\n{heading}\n", 1)[1].split(f"\n{level} ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.DOTALL)
    code = next(text for kind, text in blocks if kind == "python")
    printed = next(text for kind, text in blocks if kind == "text")
    return code, printed
