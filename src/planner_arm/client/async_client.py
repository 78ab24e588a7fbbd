"""`AsyncPlannerClient`: the service's every endpoint (`calls`) as a typed coroutine."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeVar, overload

import httpx
from pydantic import BaseModel

import planner_arm.client.calls as calls
import planner_arm.client.wire as wire
from planner_arm.client.calls import Call
from planner_arm.client.errors import error_from_body
from planner_arm.client.events import ERROR, SSE_TYPE, PlanEvent, SSEReader
from planner_arm.client.retry import RetryPolicy, Tries

P = ParamSpec("P")
A = TypeVar("A", bound=BaseModel)


class Sent(Generic[P, A]):
    """A coroutine method that sends the call `build(*args)` describes and returns its answer."""

    def __init__(self, build: Callable[P, Call[A]]) -> None:
        self._build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, client: None, owner: type[AsyncPlannerClient]) -> Sent[P, A]: ...
    @overload
    def __get__(
        self, client: AsyncPlannerClient, owner: type[AsyncPlannerClient]
    ) -> Callable[P, Awaitable[A]]: ...
    def __get__(
        self, client: AsyncPlannerClient | None, owner: type[AsyncPlannerClient]
    ) -> Sent[P, A] | Callable[P, Awaitable[A]]:
        if client is None:
            return self

        @functools.wraps(self._build)
        async def send(*args: P.args, **kwargs: P.kwargs) -> A:
            call = self._build(*args, **kwargs)
            return wire.parse_answer(await client._send(call, stream=False), call)

        return send


class Streamed(Generic[P]):
    """A method that sends the call `build(*args)` describes and yields its events as they come."""

    def __init__(self, build: Callable[P, Call[Any]], doc: str) -> None:
        self._build = build
        self.__doc__ = doc

    @overload
    def __get__(self, client: None, owner: type[AsyncPlannerClient]) -> Streamed[P]: ...
    @overload
    def __get__(
        self, client: AsyncPlannerClient, owner: type[AsyncPlannerClient]
    ) -> Callable[P, AsyncIterator[PlanEvent]]: ...
    def __get__(
        self, client: AsyncPlannerClient | None, owner: type[AsyncPlannerClient]
    ) -> Streamed[P] | Callable[P, AsyncIterator[PlanEvent]]:
        if client is None:
            return self

        @functools.wraps(self._build)
        def stream(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[PlanEvent]:
            return client._events(self._build(*args, **kwargs))

        stream.__doc__ = self.__doc__
        return stream


class AsyncPlannerClient:
    """An asyncio client of a planner-arm service.

    ```python
    async with AsyncPlannerClient("http://localhost:8080") as planner:
        plan = await planner.plan("Fix authentication bug and add tests")
    ```

    `api_key` is sent as `Authorization: Bearer`. `timeout` bounds each try; `retries` more
    tries follow a 429, a 503 or no answer, after the service's `Retry-After`, all within
    `total_timeout` seconds. Give `http_client` (then left open) or `transport` to choose how
    requests travel; `sleep` and `clock` (monotonic seconds) are for tests.
    """

    plan = Sent(calls.plan)
    stream = Streamed(calls.plan, calls.STREAM_DOC)
    replan = Sent(calls.replan)
    validate = Sent(calls.validate)
    get = Sent(calls.get)
    expand = Sent(calls.expand)
    specialize = Sent(calls.specialize)
    health = Sent(calls.health)
    capabilities = Sent(calls.capabilities)

    def __init__(
        self,
        base_url: str = wire.DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        timeout: float = wire.DEFAULT_TIMEOUT_SECONDS,
        retries: int = 2,
        total_timeout: float = 120.0,
        http_client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self._policy = RetryPolicy(retries=retries, total_seconds=total_timeout)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(transport=transport)
        self._sleep = sleep
        self._clock = clock

    async def __aenter__(self) -> AsyncPlannerClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client, unless it was the caller's."""
        if self._owns_http:
            await self._http.aclose()

    async def _events(self, call: Call[Any]) -> AsyncIterator[PlanEvent]:
        response = await self._send(call, stream=True)
        try:
            if not wire.is_event_stream(response):
                await response.aread()
                yield wire.plan_as_event(response)
                return
            reader = SSEReader()
            async for line in response.aiter_lines():
                event = reader.feed(line)
                if event is None:
                    continue
                if event.event == ERROR:
                    raise error_from_body(None, event.data)
                yield event
        except httpx.RequestError as error:
            raise wire.transport_error(error) from error
        finally:
            await response.aclose()

    async def _send(self, call: Call[Any], *, stream: bool) -> httpx.Response:
        """The call's 2xx answer (open, when `stream`), after the retries it is worth."""
        key = wire.idempotency_key(call)
        accept = SSE_TYPE if stream else "application/json"
        tries = Tries(self._policy, self._timeout, self._clock)
        while True:
            request = wire.build_request(
                self._http, self.base_url, call, key, self._api_key, tries.timeout(), accept
            )
            try:
                response = await self._http.send(request, stream=stream)
            except httpx.RequestError as failure:
                await self._sleep(tries.wait_after(wire.transport_error(failure), failure))
                continue
            if response.is_success:
                return response
            await response.aread()
            await response.aclose()
            await self._sleep(tries.wait_after(wire.answer_error(response)))
