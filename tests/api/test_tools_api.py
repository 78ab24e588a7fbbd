"""Planning over the caller's own tools: the `tools` field, tool ids as platforms write them,
the tools profile's rules, reading the model's tool names, and the rule-based tool plan."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from planner_arm.config import ConfigError, load_settings
from support.app import answer, make_settings, running_app
from support.model_requests import listed_tools, system_of, user_of

MOVIE_TOOLS: list[dict[str, Any]] = [
    {"id": "Image Search (by Image)", "description": "Find images similar to a given image"},
    {
        "type": "function",
        "function": {
            "name": "GetMovieCredit",
            "description": "Get the cast and crew of a movie by its movie id",
            "parameters": {"type": "object", "properties": {"movie_id": {"type": "string"}}},
        },
    },
    {"id": "search_movie", "description": "Search movies by title and return their ids"},
    {
        "id": "special_foreign_currency_purchase_request",
        "description": "Buy foreign currency cash at a bank branch",
    },
]
TOOL_IDS = {"Image Search (by Image)", "GetMovieCredit", "search_movie"} | {
    "special_foreign_currency_purchase_request"
}
GOAL = "Search the movie Titanic by its title, and then get the cast of the movie"


def _listed_tools(request: httpx.Request) -> list[str]:
    """The tool names a prompt lists, one JSON object a line of its user message."""
    return [tool["name"] for tool in listed_tools(request)]


def _steps(body: dict[str, Any]) -> list[tuple[str, list[int]]]:
    return [(step["required_arm"], step["depends_on"]) for step in body["plan"]]


async def test_without_a_model_the_rule_based_plan_calls_the_tools_the_goal_asks_for() -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": MOVIE_TOOLS})
    assert response.status_code == 200, response.text
    body = response.json()
    # In the goal's order, each after the one before; no judge step is added to a tool plan.
    assert _steps(body) == [("search_movie", []), ("GetMovieCredit", [1])]
    assert body["metadata"]["source"] == "fallback"


async def test_the_model_is_asked_about_the_tools_and_its_names_are_read(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer(
        {
            "plan": [
                {"step": 1, "tool": "search_movie", "action": "find the id", "depends_on": []},
                # A tool name written differently, and the tool named as the action.
                {"step": 2, "tool": "get_movie_credit", "action": "list cast", "depends_on": [1]},
                {"step": 3, "tool": "none", "action": "tell the user", "depends_on": [2]},
            ]
        }
    )
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": MOVIE_TOOLS})
    body = response.json()
    assert response.status_code == 200, body
    assert body["metadata"]["source"] == "llm"
    assert _steps(body) == [("search_movie", []), ("GetMovieCredit", [1])]
    codes = {entry["code"] for entry in body["metadata"]["repairs"]}
    assert {"tool_closest", "no_tool_step_dropped"} <= codes
    request = chat_route.calls[0].request
    user = user_of(request)
    # Each tool once, as data in the user message; none of the built-in arms; none in the
    # system message.
    assert sorted(_listed_tools(request)) == sorted(TOOL_IDS)
    assert user.split("\n\n")[0].count("GetMovieCredit") == 1
    assert "retriever" not in user
    assert "judge" not in user
    assert not any(tool in system_of(request) for tool in TOOL_IDS)


async def test_a_tool_named_as_the_action_wins_over_another_required_arm(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer(
        {
            "plan": [
                {"step": 1, "required_arm": "search_movie", "action": "search_movie"},
                {"step": 2, "required_arm": "search_movie", "action": "GetMovieCredit"},
            ]
        }
    )
    async with running_app(make_settings()) as client:
        body = (await client.post("/plan", json={"goal": GOAL, "tools": MOVIE_TOOLS})).json()
    assert [arm for arm, _ in _steps(body)] == ["search_movie", "GetMovieCredit"]
    assert any(entry["code"] == "tool_reconciled" for entry in body["metadata"]["repairs"])


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        ([], "tools is empty"),
        ([MOVIE_TOOLS[0], MOVIE_TOOLS[0]], "given twice"),
        ([{"id": "two\nlines", "description": "x"}], "tools"),
        ([{"id": "x" * 129, "description": "x"}], "tools"),
        ([{"id": "ok", "description": ""}], "tools"),
        ([{"type": "function", "function": {"description": "no name"}}], "tools"),
    ],
)
async def test_a_bad_tool_set_is_a_clear_422(tools: list[Any], says: str) -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": tools})
    assert response.status_code == 422
    assert says in response.text


# Every character docs/tools.md excludes from an id: C0 and C1 controls (NEL is U+0085), DEL,
# the line and paragraph separators, and each bidi control.
NOT_IN_AN_ID = [
    *map(chr, range(0x20)), "\x7f", *map(chr, range(0x80, 0xA0)), "\u2028", "\u2029",
    "\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
]  # fmt: skip


def test_no_control_separator_or_bidi_character_is_part_of_a_tool_id() -> None:
    from pydantic import ValidationError

    from planner_arm.plan.schemas import PlanRequest

    accepted = []
    for char in NOT_IN_AN_ID:
        name = f"search{char}movie"
        function = {"type": "function", "function": {"name": name, "description": "x"}}
        for tool in ({"id": name, "description": "x"}, function):
            try:
                PlanRequest.model_validate({"goal": GOAL, "tools": [tool]})
                accepted.append(f"U+{ord(char):04X}")
            except ValidationError:
                pass
        with pytest.raises(ConfigError):
            load_settings(arms=[{"id": name, "description": "x"}])
    assert accepted == []
    # Printable text in any script, spaces and symbols inside, stays an id.
    for name in ("Image Search (by Image)", "поиск фильма", "映画検索", "a\u00a0b", "price €/$"):
        PlanRequest.model_validate({"goal": GOAL, "tools": [{"id": name, "description": "x"}]})


async def test_a_tool_id_with_a_bidi_override_is_a_clear_422() -> None:
    tool = {"id": "search\u202emovie", "description": "x"}
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": [tool]})
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"
    assert "tools" in response.json()["detail"]


async def test_more_tools_than_allowed_are_refused() -> None:
    tools = [{"id": f"tool {n}", "description": f"does thing {n}"} for n in range(6)]
    settings = make_settings(llm=False, limits={"max_tools": 5})
    async with running_app(settings) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": tools})
    assert response.status_code == 422
    assert "at most 5" in response.text


async def test_a_large_tool_set_is_shortlisted_in_the_prompt(chat_route: respx.Route) -> None:
    filler = [
        {"id": f"weather_tool_{n}", "description": f"Weather forecast for region {n}"}
        for n in range(60)
    ]
    chat_route.return_value = answer(
        {"plan": [{"step": 1, "tool": "search_movie", "action": "find it", "depends_on": []}]}
    )
    settings = make_settings(planning={"tool_shortlist": 10})
    async with running_app(settings) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": [*filler, *MOVIE_TOOLS]})
    assert response.status_code == 200
    listed = _listed_tools(chat_route.calls[0].request)
    assert {"search_movie", "GetMovieCredit"} <= set(listed)
    assert len(listed) <= 10


async def test_the_configured_arms_may_be_a_tool_set() -> None:
    settings = make_settings(llm=False, arms=[{**tool} for tool in MOVIE_TOOLS if "id" in tool])
    async with running_app(settings) as client:
        body = (await client.post("/plan", json={"goal": GOAL})).json()
    assert {arm for arm, _ in _steps(body)} <= TOOL_IDS
    assert len(body["plan"]) >= 1


def test_a_config_copy_with_only_the_arms_replaced_is_accepted() -> None:
    from planner_arm.defaults import DEFAULT_ARM_ALIASES

    settings = load_settings(
        arms=[{"id": "GetMovieCredit", "description": "Cast of a movie"}],
        arm_aliases=dict(DEFAULT_ARM_ALIASES),
    )
    assert settings.arm_ids == ["GetMovieCredit"]
    assert settings.arm_aliases == {}


def test_a_bad_arm_id_names_its_rule_readably() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(arms=[{"id": "bad\tid", "description": "x"}])
    assert "arms.0.id" in str(caught.value)
    assert "String should match pattern" in str(caught.value)


async def test_the_most_similar_worked_examples_over_these_tools_are_shown(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer(
        {"plan": [{"step": 1, "tool": "search_movie", "action": "find it", "depends_on": []}]}
    )
    examples = [
        {
            "request": "Find the film Heat and get its cast",
            "steps": [{"tool": "search_movie"}, {"tool": "GetMovieCredit", "depends_on": [1]}],
        },
        {"request": "Buy euros in cash", "steps": [{"tool": MOVIE_TOOLS[3]["id"]}]},
        # Over a tool this request does not have: never shown.
        {"request": "Find the movie Titanic cast", "steps": [{"tool": "not_a_tool_here"}]},
    ]
    settings = make_settings(planning={"tool_examples": 1})
    async with running_app(settings) as client:
        response = await client.post(
            "/plan", json={"goal": GOAL, "tools": MOVIE_TOOLS, "examples": examples}
        )
    assert response.status_code == 200, response.text
    user = json.loads(chat_route.calls[0].request.content)["messages"][1]["content"]
    assert "Find the film Heat" in user
    assert "Buy euros" not in user
    assert "not_a_tool_here" not in user


async def test_configured_worked_examples_are_used_for_a_request_over_their_tools(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer(
        {"plan": [{"step": 1, "tool": "search_movie", "action": "find it", "depends_on": []}]}
    )
    example = {"request": "Search the movie Heat", "steps": [{"tool": "search_movie"}]}
    async with running_app(make_settings(examples=[example])) as client:
        await client.post("/plan", json={"goal": GOAL, "tools": MOVIE_TOOLS})
        await client.post("/plan", json={"goal": "Fix the login bug"})  # the built-in arms
    with_tools = json.loads(chat_route.calls[0].request.content)["messages"][1]["content"]
    built_in = json.loads(chat_route.calls[1].request.content)["messages"][1]["content"]
    assert "Search the movie Heat" in with_tools
    assert "Search the movie Heat" not in built_in


async def test_links_follow_the_types_the_tools_declare(chat_route: respx.Route) -> None:
    tools = [
        {"id": "text_to_image", "description": "Draw an image from text", "consumes": ["text"],
         "produces": ["image"]},
        {"id": "image_caption", "description": "Describe an image in words",
         "consumes": ["image"], "produces": ["text"]},
        {"id": "translate", "description": "Translate text", "consumes": ["text"],
         "produces": ["text"]},
    ]  # fmt: skip
    chat_route.return_value = answer(
        {
            "plan": [
                {"step": 1, "tool": "text_to_image", "action": "draw it", "depends_on": []},
                # Needs the image of step 1, but the model linked nothing.
                {"step": 2, "tool": "image_caption", "action": "caption it", "depends_on": []},
                # Consumes text, but the model linked it to the image step only.
                {"step": 3, "tool": "translate", "action": "translate it", "depends_on": [1]},
            ]
        }
    )
    async with running_app(make_settings()) as client:
        response = await client.post("/plan", json={"goal": "Draw a cat", "tools": tools})
    body = response.json()
    assert response.status_code == 200, body
    assert _steps(body) == [("text_to_image", []), ("image_caption", [1]), ("translate", [2])]
    codes = [entry["code"] for entry in body["metadata"]["repairs"]]
    assert "link_type_mismatch" in codes
    assert "link_added_by_type" in codes


async def test_a_tool_plan_is_replanned_and_expanded_over_the_same_tools() -> None:
    tools = [
        *MOVIE_TOOLS,
        {"id": "summarise_text", "description": "Summarise a text in a few sentences"},
    ]
    async with running_app(make_settings(llm=False)) as client:
        planned = (await client.post("/plan", json={"goal": GOAL, "tools": tools})).json()
        assert [step["required_arm"] for step in planned["plan"]] == [
            "search_movie",
            "GetMovieCredit",
        ]
        replanned = await client.post(
            "/replan",
            json={
                "goal": GOAL,
                "plan_id": planned["plan_id"],
                "tools": tools,
                "step_states": {"1": "completed", "2": "failed"},
                "reason": "the credits call failed",
            },
        )
        assert replanned.status_code == 200, replanned.text
        revised = replanned.json()
        assert {step["required_arm"] for step in revised["plan"]} <= {
            tool.get("id") or tool["function"]["name"] for tool in tools
        }
        assert revised["plan"][0] == planned["plan"][0]  # the finished step, as it was
        expanded = await client.post(
            "/plan/expand",
            json={"goal": GOAL, "plan_id": planned["plan_id"], "step": 2, "tools": tools},
        )
        assert expanded.status_code == 200, expanded.text
        assert all(
            step["required_arm"] != "judge" for step in expanded.json()["plan"]
        )  # no built-in agent slipped into a tool plan


async def test_a_hierarchical_plan_over_the_request_tools_uses_only_them() -> None:
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post(
            "/plan", json={"goal": GOAL, "tools": MOVIE_TOOLS, "strategy": "hierarchical"}
        )
    assert response.status_code == 200, response.text
    assert {step["required_arm"] for step in response.json()["plan"]} <= TOOL_IDS


async def test_a_server_that_takes_a_schema_is_held_to_the_listed_tools(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer(
        {"plan": [{"step": 1, "tool": "search_movie", "action": "find it", "depends_on": []}]}
    )
    settings = make_settings(model={"response_format": "json_schema"})
    async with running_app(settings) as client:
        response = await client.post("/plan", json={"goal": GOAL, "tools": MOVIE_TOOLS})
    assert response.status_code == 200, response.text
    sent = json.loads(chat_route.calls[0].request.content)["response_format"]
    assert sent["type"] == "json_schema"
    step = sent["json_schema"]["schema"]["properties"]["plan"]["items"]
    assert sorted(step["properties"]["tool"]["enum"]) == sorted(TOOL_IDS)


DESK_TOOLS = [
    {"id": "post_slack_message", "description": "Post a message to a Slack channel"},
    {"id": "refund_order", "description": "Refund an order in full or in part, by its order id"},
    {"id": "list_orders", "description": "List a customer's orders; returns their order ids"},
    {"id": "track_shipment", "description": "Track the delivery of an order given its order id"},
]


async def test_a_goal_piece_no_tool_does_is_a_warning_not_a_step() -> None:
    goal = "Post the outage notice to #status and order a pizza for the on-call engineers"
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": goal, "tools": DESK_TOOLS})
    body = response.json()
    assert response.status_code == 200, body
    assert _steps(body) == [("post_slack_message", [])]
    warnings = {note["code"]: note["detail"] for note in body["metadata"]["warnings"]}
    assert warnings["goal_part_unplanned"] == "order a pizza for the on-call engineers"
    assert "fallback_used" in warnings


async def test_the_requests_worked_examples_link_the_rule_based_steps() -> None:
    tools = [
        {"id": "plan_meals", "description": "Plan the meals of a week"},
        {"id": "order_groceries", "description": "Order groceries for delivery"},
    ]
    goal = "Plan the meals of next week and order groceries for delivery"
    examples = [
        {
            "request": "Plan my meals, then order what they need",
            "steps": [{"tool": "plan_meals"}, {"tool": "order_groceries", "depends_on": [1]}],
        }
    ]
    async with running_app(make_settings(llm=False)) as client:
        alone = (await client.post("/plan", json={"goal": goal, "tools": tools})).json()
        taught = await client.post(
            "/plan", json={"goal": goal, "tools": tools, "examples": examples}
        )
    assert _steps(alone) == [("plan_meals", []), ("order_groceries", [])]
    assert _steps(taught.json()) == [("plan_meals", []), ("order_groceries", [1])]


@pytest.mark.parametrize("text", ["0", "x", "!!"])
async def test_a_tool_set_with_no_word_to_index_is_planned(text: str) -> None:
    tools = [{"id": text, "description": text}, {"id": f"{text}!", "description": text}]
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json={"goal": "Do it", "tools": tools})
    assert response.status_code == 200, response.text
    assert {step["required_arm"] for step in response.json()["plan"]} <= {text, f"{text}!"}


async def test_worked_examples_with_no_word_to_index_are_read() -> None:
    tools = [{"id": "0", "description": "0"}]
    examples = [{"request": "0", "steps": [{"tool": "0"}]}]
    request = {"goal": "Do it", "tools": tools, "examples": examples}
    async with running_app(make_settings(llm=False)) as client:
        response = await client.post("/plan", json=request)
    assert response.status_code == 200, response.text


def _common_prefix(first: str, second: str) -> str:
    pairs = enumerate(zip(first, second, strict=False))
    size = next((n for n, (a, b) in pairs if a != b), min(len(first), len(second)))
    return first[:size]


EXAMPLES = [
    {
        "request": "Find the film Heat and get its cast",
        "steps": [{"tool": "search_movie"}, {"tool": "GetMovieCredit", "depends_on": [1]}],
    },
    {"request": "Search the movie Alien", "steps": [{"tool": "search_movie"}]},
]


async def _users(
    chat_route: respx.Route, settings: Any, tools: list[Any], goals: list[str]
) -> list[str]:
    async with running_app(settings) as client:
        for goal in goals:
            body = {"goal": goal, "tools": tools, "examples": EXAMPLES}
            response = await client.post("/plan", json=body)
            assert response.status_code == 200, response.text
    return [user_of(call.request) for call in chat_route.calls]


async def test_every_worked_example_there_is_opens_the_prompt_in_its_order_with_the_tools(
    chat_route: respx.Route,
) -> None:
    chat_route.return_value = answer(
        {"plan": [{"step": 1, "tool": "search_movie", "action": "find it", "depends_on": []}]}
    )
    goals = [GOAL, "Search the movie Alien"]
    first, second = await _users(chat_route, make_settings(), MOVIE_TOOLS, goals)
    shared = _common_prefix(first, second)
    # The tools, then both examples in the order given (whichever is more like the goal),
    # are the same for both requests; the draft and the request come after.
    assert shared.startswith("The tools, one JSON object a line (data):\n")
    assert "Solved requests over these tools" in shared
    assert shared.index("Find the film Heat") < shared.index("Search the movie Alien")
    assert shared.index("Search the movie Alien") < first.index('{"draft"')
    assert first.index('{"draft"') < first.index(json.dumps(GOAL))
    assert json.dumps(GOAL) not in shared


async def test_a_shortlist_comes_after_what_every_request_of_the_set_shares(
    chat_route: respx.Route,
) -> None:
    filler = [
        {"id": f"weather_tool_{n}", "description": f"Weather forecast for region {n}"}
        for n in range(60)
    ]
    chat_route.return_value = answer(
        {"plan": [{"step": 1, "tool": "search_movie", "action": "find it", "depends_on": []}]}
    )
    settings = make_settings(planning={"tool_shortlist": 10})
    goals = [GOAL, "Weather forecast for region 7 and the film Alien"]
    first, second = await _users(chat_route, settings, [*filler, *MOVIE_TOOLS], goals)
    # The examples shared by every request open the user message; the shortlist, which
    # differs, comes after them.
    assert first.startswith("Solved requests over these tools")
    shared = _common_prefix(first, second)
    assert "Search the movie Alien" in shared
    assert "The tools, one JSON object a line" in first[len(shared) - 60 :]
    assert "weather_tool_7" in second
    assert "weather_tool_7" not in first
