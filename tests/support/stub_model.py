"""The stub model: a scriptable OpenAI-compatible chat completions server, and a good plan.

A server on loopback for fault injection tests and the benchmarks; `PLAN` (and `PLAN_JSON`)
is the valid 4-step plan it answers with unless scripted otherwise.

Each chat completion takes the next scripted behaviour, then the default one: a normal reply,
an error status, a hang, a byte-by-byte drip, a dropped connection, a slow reply, or an answer
streamed in delayed chunks (a request with `stream: true` always gets its answer streamed).
It is raw HTTP/1.1 over asyncio streams (keep-alive, Content-Length or chunked request
bodies) on its own event loop in a daemon thread, so synchronous tests and async code can both
drive it:

    with StubLLM(default=Reply()) as stub:
        stub.script(Status(503), Drop())   # the next two calls; then the default
        ...                                # point OPENAI_BASE_URL at stub.base_url
        assert stub.calls == 3

As a process, for benchmarks: `python tests/support/stub_model.py --port P` answers every
call with `Reply()` and prints `ready <base_url>` on stdout once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import json
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, TypeAlias

DEFAULT_MODEL = "gpt-3.5-turbo"

PLAN: dict[str, Any] = {
    "plan": [
        {
            "step": 1,
            "action": "Search the codebase for the authentication logic",
            "required_arm": "retriever",
            "acceptance_criteria": ["auth/login.py located", "Related tests listed"],
            "depends_on": [],
            "estimated_cost_tier": 1,
            "estimated_duration_seconds": 20,
        },
        {
            "step": 2,
            "action": "Write a patch that fixes the token expiry check",
            "required_arm": "coder",
            "acceptance_criteria": ["Patch addresses the root cause"],
            "depends_on": [1],
            "estimated_cost_tier": 3,
            "estimated_duration_seconds": 60,
        },
        {
            "step": 3,
            "action": "Write a regression test for the expiry bug",
            "required_arm": "coder",
            "acceptance_criteria": ["Test fails before the patch", "Test passes after"],
            "depends_on": [1],
            "estimated_cost_tier": 3,
            "estimated_duration_seconds": 40,
        },
        {
            "step": 4,
            "action": "Validate the fix against the goal and the constraints",
            "required_arm": "judge",
            "acceptance_criteria": ["All criteria met", "No schema change"],
            "depends_on": [2, 3],
            "estimated_cost_tier": 2,
            "estimated_duration_seconds": 30,
        },
    ],
    "rationale": "Locate, fix and test in parallel, then validate.",
    "confidence": 0.9,
    "complexity_score": 0.5,
}
PLAN_JSON = json.dumps(PLAN)


def completion(
    content: str | None = PLAN_JSON,
    *,
    finish_reason: str = "stop",
    prompt_tokens: int = 900,
    completion_tokens: int = 300,
    model: str = DEFAULT_MODEL,
) -> dict[str, Any]:
    """An OpenAI chat completion response carrying `content`."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass(frozen=True)
class Reply:
    """A normal completion, after `delay` seconds (waited on the stub's loop)."""

    content: str | None = PLAN_JSON
    finish_reason: str = "stop"
    prompt_tokens: int = 900
    completion_tokens: int = 300
    delay: float = 0.0


@dataclass(frozen=True)
class Status:
    """An error status with an OpenAI-style body `{"error": {"message", "type", "code"}}`."""

    status: int
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    error_type: str | None = None


@dataclass(frozen=True)
class Hang:
    """Never answers; the connection stays open until the client leaves or the stub stops."""


@dataclass(frozen=True)
class Drip:
    """Status line and headers (Content-Length of the whole body) at once, then the body one
    byte every `interval` seconds for `chunks` bytes, then the rest: a per-read timeout never
    fires, only a bound on the whole call ends it."""

    interval: float = 0.2
    chunks: int = 1000


@dataclass(frozen=True)
class Drop:
    """Closes the connection without a response."""


@dataclass(frozen=True)
class Slow:
    """A normal reply after `seconds`."""

    seconds: float


@dataclass(frozen=True)
class Held:
    """A normal reply once the test sets `release`: a call held in flight for exactly as
    long as the test needs, with no timing guess."""

    release: threading.Event


@dataclass(frozen=True)
class Streamed:
    """An answer streamed as server-sent chat.completion.chunk events (what a request with
    `stream: true` gets): `chunk_chars` characters each `interval` seconds, the usage in a
    last chunk when asked for. With `break_after`, the connection closes after that many
    chunks, mid-answer."""

    content: str = PLAN_JSON
    chunk_chars: int = 16
    interval: float = 0.0
    break_after: int | None = None
    prompt_tokens: int = 900
    completion_tokens: int = 300


Behaviour: TypeAlias = Reply | Status | Hang | Drip | Drop | Slow | Held | Streamed

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}
_ERROR_CODES = {
    401: "invalid_api_key",
    404: "model_not_found",
    429: "rate_limit_exceeded",
}
# GET /v1/models: the one model the stub answers as.
_MODELS_BODY = json.dumps(
    {"object": "list", "data": [{"id": DEFAULT_MODEL, "object": "model", "owned_by": "stub"}]}
).encode()


@dataclass
class _Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _head(
    status: int, length: int, keep_alive: bool, headers: dict[str, str] | None = None
) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_reason(status)}",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        "Connection: keep-alive" if keep_alive else "Connection: close",
    ]
    lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _response(
    status: int, body: bytes, keep_alive: bool, headers: dict[str, str] | None = None
) -> bytes:
    return _head(status, len(body), keep_alive, headers) + body


@functools.lru_cache(maxsize=256)
def _reply_body(reply: Reply, model: str) -> bytes:
    """The encoded completion; cached, so a load test does not pay json.dumps per call."""
    body = completion(
        reply.content,
        finish_reason=reply.finish_reason,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        model=model,
    )
    return json.dumps(body).encode()


def _error_body(status: int, message: str, error_type: str | None = None) -> bytes:
    kind = error_type or _ERROR_TYPES.get(status, "server_error" if status >= 500 else "error")
    error = {
        "message": message or _reason(status),
        "type": kind,
        "code": _ERROR_CODES.get(status),
    }
    return json.dumps({"error": error}).encode()


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    """The next request on the connection, or None when the client has closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # closed between requests (or mid-head: nothing to answer either way)
    lines = head.decode("latin-1").lstrip("\r\n").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3:
        raise ValueError(f"bad request line {lines[0]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length", "0") or "0")
        body = await reader.readexactly(length) if length > 0 else b""
    connection = headers.get("connection", "").lower()
    # HTTP/1.1 keeps the connection unless told to close it; HTTP/1.0 only when asked to.
    keep_alive = "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
    return _Request(method.upper(), target.split("?", 1)[0], headers, body, keep_alive)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            # Trailers, if any, end with an empty line.
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)


class StubLLM:
    """An OpenAI-compatible server on loopback whose answers a test scripts.

    `calls` counts the chat completion requests received and `requests` holds their JSON
    bodies (unless `record=False`, for long load runs). `default` may be reassigned at any
    time; `script()` queues behaviours for the next calls.
    """

    def __init__(
        self,
        default: Behaviour | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        record: bool = True,
    ) -> None:
        self.default: Behaviour = default if default is not None else Reply()
        self.host = host
        self.port = port
        self.record = record
        # False: a request with `stream: true` gets a 400, as from a server that cannot stream.
        self.streaming = True
        self.calls = 0
        self.requests: list[dict[str, Any]] = []
        # Set when a chat completion arrives: a test can wait for a call to be in flight.
        self.arrived = threading.Event()
        # Set when a client went away while its streamed answer was still being written.
        self.cut_off = threading.Event()
        # Picks the behaviour by the request's JSON body (None: the script, then the
        # default), so a benchmark can answer one tenant's prompts unlike another's.
        self.choose: Callable[[dict[str, Any]], Behaviour | None] | None = None
        self._script: collections.deque[Behaviour] = collections.deque()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._startup_error: BaseException | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._stopping = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- control, from any thread -------------------------------------------------------

    def start(self) -> StubLLM:
        if self._thread is not None:
            raise RuntimeError("the stub is already started")
        self._thread = threading.Thread(target=self._run, name="stub-llm", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise self._startup_error
        return self

    def stop(self) -> None:
        """Closes the listener and every connection, stops the loop and ends the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            try:
                done.result(timeout=10)
            finally:
                loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = None
        self._server = None
        self._thread = None
        self._stopping = False
        self._started.clear()

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def script(self, *behaviours: Behaviour) -> None:
        """Serve these, in order, to the next calls; then `default` again."""
        with self._lock:
            self._script.extend(behaviours)

    def reset(self) -> None:
        """Forget the calls (`arrived` too), the recorded requests and what is left of the
        script."""
        with self._lock:
            self.calls = 0
            self.arrived.clear()
            self.cut_off.clear()
            self.requests = []
            self._script.clear()

    # -- the server, on its own loop ----------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._serve_connection, self.host, self.port, backlog=1024)
            )
        except BaseException as exc:  # a taken port, say: start() re-raises it
            self._startup_error = exc
            loop.close()
            self._started.set()
            return
        self.port = self._server.sockets[0].getsockname()[1]
        self._loop = loop
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _shutdown(self) -> None:
        self._stopping = True
        server = self._server
        assert server is not None
        loop = asyncio.get_running_loop()
        # Stop accepting first, and let connections accepted already get their task: closing
        # the server under an accept in progress breaks asyncio's bookkeeping (3.11).
        for sock in server.sockets:
            loop.remove_reader(sock.fileno())
        for _ in range(3):
            await _next_loop_iteration()
        server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    def _next(self, body: dict[str, Any]) -> Behaviour:
        with self._lock:
            self.calls += 1
            self.arrived.set()
            if self.record:
                self.requests.append(body)
            chosen = self.choose(body) if self.choose is not None else None
            if chosen is not None:
                return chosen
            return self._script.popleft() if self._script else self.default

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._stopping:
            writer.close()
            return
        self._connections.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                usable = await self._answer(request, reader, writer)
                if not (usable and request.keep_alive):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away or sent something we cannot frame
        except ValueError:
            if not writer.transport.is_closing():
                writer.write(_response(400, _error_body(400, "malformed request"), False))
        except asyncio.CancelledError:
            pass  # stop(): the connection closes below
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(
        self, request: _Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answers one request; False when the connection cannot carry another one."""
        keep_alive = request.keep_alive
        if request.method == "GET" and request.path.endswith("/models"):
            return await _send(writer, _response(200, _MODELS_BODY, keep_alive))
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            body = _error_body(404, f"no route {request.method} {request.path}")
            return await _send(writer, _response(404, body, keep_alive))
        payload = _json_object(request.body)
        if payload is None:
            body = _error_body(400, "the request body is not a JSON object")
            return await _send(writer, _response(400, body, keep_alive))
        if payload.get("stream") and not self.streaming:
            self._next(payload)
            body = _error_body(400, "stream is not supported by this server")
            return await _send(writer, _response(400, body, keep_alive))
        behaviour = self._next(payload)
        return await self._play(behaviour, payload, keep_alive, reader, writer)

    async def _play(
        self,
        behaviour: Behaviour,
        payload: dict[str, Any],
        keep_alive: bool,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answers a chat completion as `behaviour` says; False when the connection cannot
        carry another request."""
        model = str(payload.get("model") or DEFAULT_MODEL)
        if payload.get("stream") and isinstance(behaviour, Reply):
            if behaviour.delay > 0:
                await asyncio.sleep(behaviour.delay)
            behaviour = Streamed(behaviour.content or "", chunk_chars=1 << 20)
        if isinstance(behaviour, Streamed):
            usage = bool((payload.get("stream_options") or {}).get("include_usage"))
            return await self._stream_answer(writer, behaviour, model, keep_alive, usage)
        behaviour = await _waited(behaviour)
        if isinstance(behaviour, Reply):
            if behaviour.delay > 0:
                await asyncio.sleep(behaviour.delay)
            body = _reply_body(behaviour, model)
            return await _send(writer, _response(200, body, keep_alive))
        if isinstance(behaviour, Status):
            body = _error_body(behaviour.status, behaviour.message, behaviour.error_type)
            response = _response(behaviour.status, body, keep_alive, behaviour.headers)
            return await _send(writer, response)
        if isinstance(behaviour, Hang):
            return await _hang(reader)
        if isinstance(behaviour, Drip):
            return await _drip(writer, behaviour, model, keep_alive)
        return False  # Drop: close without a word

    async def _stream_answer(
        self,
        writer: asyncio.StreamWriter,
        answer: Streamed,
        model: str,
        keep_alive: bool,
        usage: bool,
    ) -> bool:
        """Streams `answer`, and sets `cut_off` when the client left before its end."""
        try:
            finished = await _stream(writer, answer, model, keep_alive, usage=usage)
        except ConnectionError:
            finished = False
        if not finished and answer.break_after is None:
            self.cut_off.set()  # the client left before the answer was written
        return finished


def _json_object(body: bytes) -> dict[str, Any] | None:
    """The request body as a JSON object; None when it is not one."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return payload if isinstance(payload, dict) else None


async def _waited(behaviour: Behaviour) -> Behaviour:
    """A Slow or a Held as the Reply it ends in (a Held once the test releases it)."""
    if isinstance(behaviour, Slow):
        return Reply(delay=behaviour.seconds)
    if isinstance(behaviour, Held):
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, behaviour.release.wait, 30)
        return Reply()
    return behaviour


async def _hang(reader: asyncio.StreamReader) -> bool:
    """Answers nothing until the client closes its end."""
    while await reader.read(65536):
        pass
    return False


async def _drip(writer: asyncio.StreamWriter, drip: Drip, model: str, keep_alive: bool) -> bool:
    """The head at once, then the body a byte every `drip.interval` seconds, then the rest."""
    body = _reply_body(Reply(), model)
    if not await _send(writer, _head(200, len(body), keep_alive)):
        return False
    for index in range(min(drip.chunks, len(body))):
        await asyncio.sleep(drip.interval)
        if not await _send(writer, body[index : index + 1]):
            return False
    return await _send(writer, body[drip.chunks :])


def _chunk_event(model: str, choices: list[dict[str, Any]], **extra: Any) -> bytes:
    chunk = {
        "id": "chatcmpl-stub",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": choices,
        **extra,
    }
    data = f"data: {json.dumps(chunk)}\n\n".encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _stream(
    writer: asyncio.StreamWriter, answer: Streamed, model: str, keep_alive: bool, *, usage: bool
) -> bool:
    """Sends `answer` as an SSE stream in chunked transfer encoding."""
    head = [
        "HTTP/1.1 200 OK",
        "Content-Type: text/event-stream",
        "Transfer-Encoding: chunked",
        "Connection: keep-alive" if keep_alive else "Connection: close",
    ]
    if not await _send(writer, ("\r\n".join(head) + "\r\n\r\n").encode()):
        return False
    text = answer.content
    pieces = [text[i : i + answer.chunk_chars] for i in range(0, len(text), answer.chunk_chars)]
    for index, piece in enumerate(pieces):
        if answer.break_after is not None and index >= answer.break_after:
            return False  # the connection closes mid-answer
        if index and answer.interval > 0:
            await asyncio.sleep(answer.interval)
        delta = {"role": "assistant", "content": piece} if index == 0 else {"content": piece}
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        if not await _send(writer, _chunk_event(model, [choice])):
            return False
    last = {"index": 0, "delta": {}, "finish_reason": "stop"}
    tail = _chunk_event(model, [last])
    if usage:
        counts = {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        }
        tail += _chunk_event(model, [], usage=counts)
    done = b"data: [DONE]\n\n"
    tail += f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n"
    return await _send(writer, tail)


async def _next_loop_iteration() -> None:
    """Lets every callback and task already scheduled on the loop run once."""
    step = asyncio.get_running_loop().create_future()
    step.get_loop().call_soon(step.set_result, None)
    await step


async def _send(writer: asyncio.StreamWriter, data: bytes) -> bool:
    """Writes unless the client has gone; True while the connection is usable."""
    if writer.transport.is_closing():
        return False
    if data:
        writer.write(data)
        await writer.drain()
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description="A stub OpenAI-compatible server on loopback.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    # The stub's thread inherits the mask, so only sigwait below sees SIGINT and SIGTERM.
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    stub = StubLLM(Reply(), args.host, args.port, record=False).start()
    print(f"ready {stub.base_url}", flush=True)
    try:
        signal.sigwait(stop_signals)
    finally:
        stub.stop()


if __name__ == "__main__":
    main()
