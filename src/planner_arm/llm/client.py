"""The model client: a thin client over `openai.AsyncOpenAI` that speaks in our own types and
errors, plain or streamed.

The SDK's own retries are off (`max_retries=0`): the planner's retry policy is the only retry
loop, so a bad key is never tried three times and a hang never outlives the request deadline.

The SDK itself is reached through `llm/sdk.py`, imported in a worker thread (`SdkLoader`):
started once the service is ready, awaited by a call that comes before it is done. Nothing on
the way to readiness pays for it, and the rule-based answer never does.

Streamed (`stream=True`), the text deltas go to a sink as they arrive and the server reports
the usage in its last chunk when it can; the deltas are joined into the same `Completion` a
plain call returns, so the planner reads the answer the same way either way.

With tracing on, each call is one span (`chat <model>`) with the OpenTelemetry GenAI
attributes: the model asked and the one that answered, the tokens, the finish reason, or the
error's code. With it off, no span is made at all.

Once the SDK is imported, one rehearsal runs its whole request and response path, plain and
streamed, against an in-process transport (`sdk.rehearse_model_call`), so the first real
request does not build the SDK's parsers or httpx's asyncio backend.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

import httpx
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from planner_arm.config import Settings
from planner_arm.errors import (
    LLMError,
    LLMRateLimited,
    LLMRejected,
    LLMTransientError,
    LLMUnsupportedFormat,
)

# One message of a conversation: {"role": ..., "content": ...}.
Message = dict[str, str]


# A provider's refusal of streaming itself (not of the request): asked without it instead.
STREAM_WORDS = re.compile(r"\bstream", re.IGNORECASE)


class AnswerSink(Protocol):
    """Who watches an answer being written."""

    def begin(self, model: str) -> None:
        """A new answer starts: whatever text came before belongs to an abandoned one."""

    def text(self, delta: str) -> None:
        """The next piece of the answer's text."""


# Providers quote part of a bad key back in their error text; none of it may reach a log.
_KEY_LIKE = re.compile(r"\b(sk|key|api[-_]?key)[-_][A-Za-z0-9_*\-]{6,}", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z0-9_\-]{4,}")
_CONTEXT_LENGTH = re.compile(r"context.length|maximum context|too many tokens", re.IGNORECASE)
_FORMAT_WORDS = re.compile(r"response_format|json_object|json_schema|json mode", re.IGNORECASE)

# Where the SDK sends calls when no base URL is configured.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Used when a base URL is set but no key: local servers (vLLM, Ollama) ignore it.
_PLACEHOLDER_KEY = "not-needed"


@dataclass(frozen=True)
class Completion:
    content: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    usage_reported: bool
    latency_seconds: float
    # The model the server says answered (a provider may name a dated version of the one asked).
    response_model: str | None = None
    # Cut off at the token limit. A field, set once: the reader in a worker thread reads it.
    truncated: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "truncated", self.finish_reason == "length")


@dataclass(frozen=True)
class AnswerSchema:
    """The JSON Schema an answer must follow, named: sent as `response_format: json_schema`
    where the model takes it (`model.response_format`). The caller writes it: a plan's, a
    tool plan's, a step input's."""

    name: str
    schema: dict[str, Any]


def redact(text: str, secret: str | None) -> str:
    """Removes the key, any piece of it (providers quote "sk-ab...wxyz"), and anything
    shaped like a key from a provider's message."""
    if secret:
        text = text.replace(secret, "[redacted]")
        text = _TOKEN.sub(lambda m: "[redacted]" if m.group(0) in secret else m.group(0), text)
    return _KEY_LIKE.sub("[redacted]", text)


def _retry_after_seconds(headers: httpx.Headers) -> float | None:
    """`retry-after-ms` (OpenAI's), else `retry-after` in seconds or as an HTTP date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _map_status_error(exc: Any, key: str | None) -> LLMError:
    """Our error for the SDK's `APIStatusError` `exc`."""
    status = exc.status_code
    detail = redact(f"HTTP {status}: {exc.message}", key)
    if status == 429:
        return LLMRateLimited(detail, retry_after=_retry_after_seconds(exc.response.headers))
    if status >= 500 or status in (408, 409):
        return LLMTransientError(detail, code="server_error", status=status)
    if status == 401:
        return LLMRejected(detail, code="auth_failed", status=status)
    if status == 403:
        return LLMRejected(detail, code="forbidden", status=status)
    if status == 404:
        return LLMRejected(detail, code="model_not_found", status=status)
    if status in (400, 422) and _CONTEXT_LENGTH.search(exc.message):
        return LLMRejected(detail, code="context_length_exceeded", status=status)
    if status in (400, 422) and _FORMAT_WORDS.search(exc.message):
        return LLMUnsupportedFormat(detail, status=status)
    return LLMRejected(detail, code="bad_request", status=status)


def build_http_client(settings: Settings) -> httpx.AsyncClient:
    """The process's one connection pool to the LLM server, sized from config."""
    pool = settings.connection
    return httpx.AsyncClient(
        limits=httpx.Limits(
            max_connections=pool.max_connections,
            max_keepalive_connections=pool.max_keepalive_connections,
            keepalive_expiry=pool.keepalive_expiry_seconds,
        ),
        timeout=httpx.Timeout(
            settings.planning.timeout_seconds, connect=pool.connect_timeout_seconds
        ),
    )


def _import_sdk() -> ModuleType:
    from planner_arm.llm import sdk

    return sdk


class SdkLoader:
    """`llm/sdk.py`, and with it the openai SDK, imported once in a worker thread of its own:
    `start` begins it (the lifespan does, once the service is ready), `get` awaits it from any
    event loop, starting it if nobody has."""

    def __init__(self) -> None:
        self._module: ModuleType | None = None
        self._future: concurrent.futures.Future[ModuleType] | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._future is not None:
                return
            self._future = concurrent.futures.Future()
        threading.Thread(target=self._load, name="sdk-import", daemon=True).start()

    def _load(self) -> None:
        assert self._future is not None
        try:
            self._future.set_result(_import_sdk())
        except BaseException as error:  # handed to whoever awaits it
            self._future.set_exception(error)

    @property
    def module(self) -> ModuleType | None:
        """The SDK's module once a `get` has had it; None before."""
        return self._module

    async def get(self) -> ModuleType:
        if self._module is None:
            self.start()
            assert self._future is not None
            self._module = await asyncio.wrap_future(self._future)
        return self._module


class LLMClient:
    """One pooled connection to an OpenAI-compatible server for the whole process."""

    def __init__(
        self,
        settings: Settings,
        http_client: httpx.AsyncClient | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self._settings = settings
        # None when tracing is off: no span is made, nor its attributes.
        self._tracer = tracer
        self._key = settings.api_key.get_secret_value() if settings.api_key else None
        self._http = http_client or build_http_client(settings)
        self.sdk = SdkLoader()
        # The SDK's client, built on the first call (the SDK is imported by then).
        self._client: Any = None
        # Models whose server refused `response_format`; asked without it from then on.
        self._no_response_format: set[str] = set()
        # Models whose server refused `stream`; asked without it from then on.
        self._no_stream: set[str] = set()
        url = httpx.URL(settings.model.base_url or DEFAULT_BASE_URL)
        default_port = 443 if url.scheme == "https" else 80
        self._server: dict[str, AttributeValue] = {
            "server.address": url.host,
            "server.port": url.port or default_port,
        }

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()  # the SDK's client closes the pool too
        else:
            await self._http.aclose()

    async def warm_up(self) -> None:
        """The SDK imported (in its thread) and rehearsed: the first real call then builds
        nothing."""
        sdk = await self.sdk.get()
        await sdk.rehearse_model_call()

    async def _sdk_client(self) -> tuple[ModuleType, Any]:
        """The SDK and its client (built on the first call), once the import is done."""
        sdk = await self.sdk.get()
        if self._client is None:
            base_url = self._settings.model.base_url
            self._client = sdk.new_client(self._key or _PLACEHOLDER_KEY, base_url, self._http)
        return sdk, self._client

    def _response_format(
        self, model: str, answer_schema: AnswerSchema | None
    ) -> dict[str, Any] | None:
        kind = self._settings.model.response_format
        if kind == "none" or model in self._no_response_format:
            return None
        if kind == "json_schema" and answer_schema is not None:
            return {
                "type": "json_schema",
                "json_schema": {
                    "name": answer_schema.name,
                    "schema": answer_schema.schema,
                    "strict": False,
                },
            }
        return {"type": "json_object"}

    async def complete(
        self,
        model: str,
        messages: Sequence[Message],
        *,
        timeout: float,  # noqa: ASYNC109 - the SDK's own timeout is set from it too
        sink: AnswerSink | None = None,
        answer_schema: AnswerSchema | None = None,
    ) -> Completion:
        """One chat completion, bounded by `timeout` seconds however the server behaves.

        `answer_schema` is sent as `response_format` in json_schema mode (without one, the
        call asks for a JSON object).

        With a `sink`, the answer is streamed and each piece of text goes to the sink as it
        arrives; a server that refuses streaming is asked again without it (remembered), and
        the sink gets the whole text at once."""
        if self._tracer is None:
            return await self._complete(
                model, messages, timeout=timeout, sink=sink, answer_schema=answer_schema
            )
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.system": "openai",  # the older name of the provider, for older backends
            "gen_ai.request.model": model,
            "gen_ai.request.max_tokens": self._settings.model.max_tokens,
            "gen_ai.request.temperature": self._settings.model.temperature,
            **self._server,
        }
        with self._tracer.start_as_current_span(
            f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            try:
                completion = await self._complete(
                    model, messages, timeout=timeout, sink=sink, answer_schema=answer_schema
                )
            except LLMError as error:
                span.set_attribute("error.type", error.code)
                span.set_status(Status(StatusCode.ERROR, error.detail))
                raise
            except asyncio.CancelledError:
                # The request's deadline, or its caller, cut the call short.
                span.set_attribute("error.type", "cancelled")
                raise
            if span.is_recording():
                _describe_answer(span, completion)
            return completion

    async def _complete(
        self,
        model: str,
        messages: Sequence[Message],
        *,
        timeout: float,  # noqa: ASYNC109 - the SDK's own timeout is set from it too
        sink: AnswerSink | None = None,
        answer_schema: AnswerSchema | None = None,
    ) -> Completion:
        response_format = self._response_format(model, answer_schema)
        options: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "temperature": self._settings.model.temperature,
            "max_tokens": self._settings.model.max_tokens,
        }
        if response_format is not None:
            options["response_format"] = response_format
        streaming = sink is not None and model not in self._no_stream
        if sink is not None:
            sink.begin(model)
        started = time.perf_counter()
        try:
            # httpx's read timeout is per chunk, so a server that drips bytes could outlive
            # it; this bound is on the whole call, the wait for the SDK's import included.
            async with asyncio.timeout(timeout):
                return await self._call(options, sink, streaming, started, timeout)
        except Exception as exc:
            sdk = self.sdk.module
            if sdk is None:  # the SDK's import was not done yet
                if not isinstance(exc, TimeoutError):
                    raise
                detail = f"no answer within {timeout:.2f}s (the SDK was still loading)"
                raise LLMTransientError(detail, code="timeout") from exc
            errors = sdk.openai
            if isinstance(exc, errors.APIStatusError):
                if streaming and exc.status_code in (400, 422) and STREAM_WORDS.search(exc.message):
                    self._no_stream.add(model)
                    remaining = timeout - (time.perf_counter() - started)
                    return await self._complete(
                        model, messages, timeout=remaining, sink=sink, answer_schema=answer_schema
                    )
                raise self._status_error(exc, model, response_format) from exc
            if isinstance(exc, TimeoutError | errors.APIError | httpx.HTTPError):
                raise self._failure(exc, timeout, errors) from exc
            raise

    async def _call(
        self,
        options: dict[str, Any],
        sink: AnswerSink | None,
        streaming: bool,
        started: float,
        timeout: float,  # noqa: ASYNC109 - the SDK's own timeout is set from it
    ) -> Completion:
        """One call through the SDK; streamed, each piece of text goes to `sink` as it comes,
        else the whole text does."""
        sdk, client = await self._sdk_client()
        if streaming:
            assert sink is not None
            content, finish_reason, usage, latency, answered_by = await sdk.read_stream(
                client, options, sink.text, started, timeout=timeout
            )
            return _completion(content, finish_reason, usage, latency, answered_by)
        response = await sdk.create_completion(client, options, timeout=timeout)
        latency = time.perf_counter() - started
        content, finish_reason = _answer(response)
        if sink is not None and content:
            sink.text(content)
        return _completion(content, finish_reason, response.usage, latency, response.model)

    def _status_error(
        self, exc: Any, model: str, response_format: dict[str, Any] | None
    ) -> LLMError:
        error = _map_status_error(exc, self._key)
        if not isinstance(error, LLMUnsupportedFormat):
            return error
        if response_format is None:
            # Nothing left to drop: the same request would fail again.
            return LLMRejected(error.detail, code="bad_request", status=error.status)
        self._no_response_format.add(model)
        return error

    def _failure(self, exc: Exception, timeout: float, errors: ModuleType) -> LLMError:
        """The error for a call that got no usable answer (an HTTP error status aside);
        `errors` is the SDK's module, whose exception classes these are."""
        if isinstance(exc, TimeoutError | errors.APITimeoutError):
            return LLMTransientError(f"no answer within {timeout:.2f}s", code="timeout")
        if isinstance(exc, errors.APIConnectionError):
            detail = redact(f"connection failed: {exc.__cause__ or exc}", self._key)
            return LLMTransientError(detail, code="connection")
        if isinstance(exc, errors.APIError):
            detail = redact(f"unusable response: {exc.message}", self._key)
            return LLMTransientError(detail, code="bad_response")
        # A stream cut off mid-answer: the SDK lets the transport's error through.
        detail = redact(f"the answer's stream broke: {exc}", self._key)
        return LLMTransientError(detail, code="stream_broken")


def _answer(response: Any) -> tuple[str | None, str | None]:
    """The first choice's text (or the model's refusal) and its finish reason."""
    choice = response.choices[0] if response.choices else None
    if choice is None:
        return None, None
    return choice.message.content or getattr(choice.message, "refusal", None), choice.finish_reason


def _completion(
    content: str | None,
    finish_reason: str | None,
    usage: Any,
    latency: float,
    answered_by: str | None,
) -> Completion:
    return Completion(
        content=content,
        finish_reason=finish_reason,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        usage_reported=usage is not None,
        latency_seconds=latency,
        response_model=answered_by or None,
    )


def _describe_answer(span: trace.Span, completion: Completion) -> None:
    """The GenAI attributes of an answered call: who answered, how it ended, the tokens."""
    if completion.response_model:
        span.set_attribute("gen_ai.response.model", completion.response_model)
    if completion.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [completion.finish_reason])
    if completion.usage_reported:
        span.set_attribute("gen_ai.usage.input_tokens", completion.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", completion.completion_tokens)
