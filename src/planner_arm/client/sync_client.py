"""`PlannerClient`: the service's every endpoint as a typed, blocking method, on httpx."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx

import planner_arm.client.calls as calls
import planner_arm.client.wire as wire
from planner_arm.client.calls import Call, PlanLike, StepStateLike
from planner_arm.client.errors import PlannerError, error_from_body
from planner_arm.client.events import ERROR, SSE_TYPE, PlanEvent, read_events
from planner_arm.client.retry import RetryPolicy
from planner_arm.plan.endpoint_schemas import (
    CapabilitiesResponse,
    HealthResponse,
    SpecializeResponse,
    ValidateResponse,
)
from planner_arm.plan.schemas import Budget, PlanResponse, PlanStep, Strategy


class PlannerClient:
    """A blocking client of a planner-arm service.

    ```python
    with PlannerClient("http://localhost:8080") as planner:
        plan = planner.plan("Fix authentication bug and add tests")
    ```

    `api_key` is sent as `Authorization: Bearer`. `timeout` bounds each try; `retries` more
    tries follow a 429, a 503 or no answer, after the service's `Retry-After`, all within
    `total_timeout` seconds. Give `http_client` (then left open) or `transport` to choose how
    requests travel; `sleep` and `clock` (monotonic seconds) are for tests.
    """

    def __init__(
        self,
        base_url: str = wire.DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        timeout: float = wire.DEFAULT_TIMEOUT_SECONDS,
        retries: int = 2,
        total_timeout: float = 120.0,
        http_client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self._policy = RetryPolicy(retries=retries, total_seconds=total_timeout)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(transport=transport)
        self._sleep = sleep
        self._clock = clock

    def __enter__(self) -> PlannerClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client, unless it was the caller's."""
        if self._owns_http:
            self._http.close()

    def plan(
        self,
        goal: str,
        constraints: Sequence[str] | None = None,
        context: Mapping[str, Any] | None = None,
        *,
        strategy: Strategy | None = None,
        budget: Budget | Mapping[str, Any] | None = None,
        specialize: bool = False,
        use_cache: bool = True,
        idempotency_key: str | None = None,
        max_depth: int | None = None,
        request_id: str | None = None,
    ) -> PlanResponse:
        """POST /plan: a validated, executable plan for `goal`."""
        body = calls.plan_fields(
            goal, constraints, context, strategy=strategy, max_depth=max_depth, budget=budget,
            specialize=specialize, use_cache=use_cache, request_id=request_id,
        )  # fmt: skip
        return self._answer(calls.plan_call(body, idempotency_key), PlanResponse)

    def stream(
        self,
        goal: str,
        constraints: Sequence[str] | None = None,
        context: Mapping[str, Any] | None = None,
        *,
        strategy: Strategy | None = None,
        budget: Budget | Mapping[str, Any] | None = None,
        specialize: bool = False,
        use_cache: bool = True,
        idempotency_key: str | None = None,
        max_depth: int | None = None,
        request_id: str | None = None,
    ) -> Iterator[PlanEvent]:
        """POST /plan as server-sent events, each as it comes: `plan.started`, `step`s,
        `plan.reset`s, and last `plan` (its `.plan` is the whole answer). An `error` event
        is raised as the `PlannerError` /plan would have answered. The request is sent when
        iteration starts."""
        body = calls.plan_fields(
            goal, constraints, context, strategy=strategy, max_depth=max_depth, budget=budget,
            specialize=specialize, use_cache=use_cache, request_id=request_id,
        )  # fmt: skip
        return self._events(calls.plan_call(body, idempotency_key))

    def replan(
        self,
        goal: str,
        *,
        previous: PlanLike | None = None,
        plan_id: str | None = None,
        step_states: Mapping[int, StepStateLike] | Mapping[str, StepStateLike] | None = None,
        replan_steps: Sequence[int] | None = None,
        reason: str | None = None,
        constraints: Sequence[str] | None = None,
        context: Mapping[str, Any] | None = None,
        strategy: Strategy | None = None,
        budget: Budget | Mapping[str, Any] | None = None,
        max_replans: int | None = None,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> PlanResponse:
        """POST /replan: the plan revised, its finished steps kept. Give exactly one of
        `previous` (the whole plan) and `plan_id` (a stored plan). `step_states` maps a step
        number (int or str) to a `StepState`, its JSON, or just its status."""
        body = calls.plan_fields(
            goal, constraints, context, strategy=strategy, budget=budget, request_id=request_id
        )
        call = calls.replan_call(
            body, previous=previous, plan_id=plan_id, step_states=step_states,
            replan_steps=replan_steps, reason=reason, max_replans=max_replans,
            idempotency_key=idempotency_key,
        )  # fmt: skip
        return self._answer(call, PlanResponse)

    def validate(
        self, steps: Sequence[PlanStep | Mapping[str, Any]], fix: bool = False
    ) -> ValidateResponse:
        """POST /plan/validate: every problem of an edited plan (no model call); with `fix`,
        what /plan would mend is mended and listed in `warnings`."""
        return self._answer(calls.validate_call(steps, fix), ValidateResponse)

    def get(self, plan_id: str) -> PlanResponse:
        """GET /plan/{plan_id}: a stored plan, as it was answered."""
        return self._answer(calls.get_call(plan_id), PlanResponse)

    def expand(
        self,
        goal: str,
        *,
        step: int,
        previous: PlanLike | None = None,
        plan_id: str | None = None,
        constraints: Sequence[str] | None = None,
        context: Mapping[str, Any] | None = None,
        strategy: Strategy | None = None,
        budget: Budget | Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> PlanResponse:
        """POST /plan/expand: a new version of the plan with `step` replaced by its
        sub-plan. Give exactly one of `previous` and `plan_id`."""
        body = calls.plan_fields(
            goal, constraints, context, strategy=strategy, budget=budget, request_id=request_id
        )
        call = calls.expand_call(
            body, step=step, previous=previous, plan_id=plan_id, idempotency_key=idempotency_key
        )
        return self._answer(call, PlanResponse)

    def specialize(
        self,
        step: int,
        *,
        previous: PlanLike | None = None,
        plan_id: str | None = None,
        goal: str | None = None,
    ) -> SpecializeResponse:
        """POST /plan/specialize: the typed input of `step`'s arm. Give exactly one of
        `previous` and `plan_id`."""
        call = calls.specialize_call(step, previous=previous, plan_id=plan_id, goal=goal)
        return self._answer(call, SpecializeResponse)

    def health(self) -> HealthResponse:
        """GET /health: liveness, the model's and the store's state."""
        return self._answer(Call("GET", "/health"), HealthResponse)

    def capabilities(self) -> CapabilitiesResponse:
        """GET /capabilities: the arms, limits, deadline and measured latency."""
        return self._answer(Call("GET", "/capabilities"), CapabilitiesResponse)

    def _answer(self, call: Call, model: type[wire.Answer]) -> wire.Answer:
        response = self._send(call, stream=False)
        return wire.parse_answer(response, model)

    def _events(self, call: Call) -> Iterator[PlanEvent]:
        response = self._send(call, stream=True)
        try:
            if not wire.is_event_stream(response):
                response.read()
                yield wire.plan_as_event(response)
                return
            for event in read_events(response.iter_lines()):
                if event.event == ERROR:
                    raise error_from_body(None, event.data)
                yield event
        except httpx.RequestError as error:
            raise wire.transport_error(error) from error
        finally:
            response.close()

    def _send(self, call: Call, *, stream: bool) -> httpx.Response:
        """The call's 2xx answer (open, when `stream`), after the retries it is worth."""
        key = call.idempotency_key
        if key is None and call.method == "POST":
            key = wire.new_idempotency_key()
        accept = SSE_TYPE if stream else "application/json"
        started = self._clock()
        attempt = 0
        while True:
            remaining = self._policy.total_seconds - (self._clock() - started)
            timeout = max(0.001, min(self._timeout, remaining))
            request = wire.build_request(
                self._http, self.base_url, call, key, self._api_key, timeout, accept
            )
            cause: Exception | None = None
            error: PlannerError
            try:
                response = self._http.send(request, stream=stream)
            except httpx.RequestError as failure:
                error, cause = wire.transport_error(failure), failure
            else:
                if response.is_success:
                    return response
                response.read()
                response.close()
                error = wire.answer_error(response)
            remaining = self._policy.total_seconds - (self._clock() - started)
            wait = self._policy.wait_before(attempt, error, remaining)
            if wait is None:
                raise error from cause
            self._sleep(wait)
            attempt += 1
