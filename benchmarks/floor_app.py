"""The floor for the load benchmark: the least any FastAPI service calling the model must do.

    .venv/bin/python benchmarks/floor_app.py --port P     (with OPENAI_BASE_URL set)

One endpoint, `POST /plan`: read the JSON body, send the same system and user messages the
service sends (built by `planner_arm.strategies.prompts` from the same settings) through the same
`openai.AsyncOpenAI(max_retries=0)` over one pooled `httpx.AsyncClient` with the service's
pool limits, and return the answer's text unparsed as `{"content": ...}`. No validation,
parsing, planning, metrics or logging: whatever the service costs beyond this is its own.
Served by uvicorn as the service is: one worker, access log off, log level warning.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
import uvicorn
from fastapi import FastAPI, Request

from planner_arm.config import load_settings
from planner_arm.llm.client import build_http_client
from planner_arm.strategies.prompts.plans import plan_opening, user_prompt


def create_floor_app() -> FastAPI:
    settings = load_settings()
    if settings.model.base_url is None:
        raise SystemExit("floor_app: set OPENAI_BASE_URL (or LLM_BASE_URL) to the stub's URL")
    opening = plan_opening(settings.arms, settings.planning)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        http = build_http_client(settings)  # the service's own pool, sized the same
        app.state.client = openai.AsyncOpenAI(
            api_key=settings.api_key.get_secret_value() if settings.api_key else "not-needed",
            base_url=settings.model.base_url,
            max_retries=0,
            http_client=http,
        )
        try:
            yield
        finally:
            await app.state.client.close()

    app = FastAPI(title="planner-arm floor", lifespan=lifespan)

    @app.post("/plan")
    async def plan(body: dict[str, Any], request: Request) -> dict[str, Any]:
        """Ask the model once, as the service does, and return its text as it came."""
        messages = opening.messages(
            user_prompt(
                str(body.get("goal", "")), body.get("constraints") or [], body.get("context") or {}
            )
        )
        response = await request.app.state.client.chat.completions.create(
            model=settings.model.name,
            messages=messages,
            temperature=settings.model.temperature,
            max_tokens=settings.model.max_tokens,
            response_format={"type": "json_object"},
        )
        return {"content": response.choices[0].message.content}

    @app.get("/ready")
    async def ready() -> dict[str, str]:
        """200 once the lifespan has built the client."""
        return {"status": "ready"}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        create_floor_app(),
        host=args.host,
        port=args.port,
        workers=1,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
