"""The calls a producer app makes: the same conversation for every producer of one client library.

Under each flush plan's root span:

1. ``chat#1``: a system and a user message with one tool offered; the fake model calls it.
2. ``chat#2``: the conversation with the tool's result; the fake model answers in text.
3. ``chat#3``: the same question streamed (usage included), so the first chunk marks the first token.
4. ``chat#4``: a call the API refuses with a 500, so the run carries an error.
"""

from __future__ import annotations

import json
from typing import Any

SYSTEM = "Be brief."
QUESTION = "What is the weather in Paris?"
MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-3-5-haiku-latest"
GEMINI_MODEL = "gemini-2.5-flash"
WEATHER = {"city": "fake-city", "forecast": "sunny"}
TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather for a city", "parameters": TOOL_SCHEMA},
    }
]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather for a city", "input_schema": TOOL_SCHEMA}]


def openai_conversation(client: Any) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=OPENAI_TOOLS, temperature=0.2)
    call = first.choices[0].message.tool_calls[0]
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.function.name, "arguments": call.function.arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(WEATHER)},
    ]
    client.chat.completions.create(model=MODEL, messages=messages, tools=OPENAI_TOOLS, temperature=0.2)
    stream = client.chat.completions.create(
        model=MODEL, messages=messages[:2], stream=True, stream_options={"include_usage": True}
    )
    for _ in stream:
        pass
    try:
        client.chat.completions.create(model="error-500", messages=messages[:2])
    except Exception:  # noqa: BLE001 - the refusal is the point
        pass


def anthropic_conversation(client: Any) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    first = client.messages.create(
        model=ANTHROPIC_MODEL, system=SYSTEM, messages=messages, tools=ANTHROPIC_TOOLS, max_tokens=100
    )
    use = next(block for block in first.content if block.type == "tool_use")
    messages += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": json.dumps(WEATHER)}]},
    ]
    client.messages.create(model=ANTHROPIC_MODEL, system=SYSTEM, messages=messages, tools=ANTHROPIC_TOOLS,
                           max_tokens=100)
    with client.messages.stream(model=ANTHROPIC_MODEL, system=SYSTEM, messages=messages[:1], max_tokens=100) as s:
        for _ in s.text_stream:
            pass
    try:
        client.messages.create(model="error-500", messages=messages[:1], max_tokens=100)
    except Exception:  # noqa: BLE001
        pass


def langchain_conversation() -> None:
    """The same conversation through LangChain (langchain-core and langchain-openai's ChatOpenAI).

    1. The tool turn: the prompt template makes the messages, the model bound with the
       ``get_weather`` tool calls it, the tool runs as a LangChain tool, and its result goes back.
    2. ``prompt | model | StrOutputParser()``: a chain whose parser gets the model's message.
    3. The same chain streamed (usage included), so the first chunk marks the first token.
    4. The same chain with a model the API refuses with a 500, so the model and the chain carry an error.
    """
    import os

    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Weather for a city"""
        return json.dumps({**WEATHER, "city": city})

    def model(name: str) -> Any:
        return ChatOpenAI(model=name, temperature=0.2, max_retries=0, stream_usage=True,
                          base_url=os.environ["OPENAI_BASE_URL"], api_key="test")

    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{question}")])
    with_tools = model(MODEL).bind_tools([get_weather])
    messages = prompt.invoke({"question": QUESTION}).to_messages()
    call = with_tools.invoke(messages)
    result = get_weather.invoke(call.tool_calls[0])
    with_tools.invoke([*messages, call, result])

    chain = prompt | model(MODEL) | StrOutputParser()
    chain.invoke({"question": QUESTION})
    for _ in chain.stream({"question": QUESTION}):
        pass
    try:
        (prompt | model("error-500") | StrOutputParser()).invoke({"question": QUESTION})
    except Exception:  # noqa: BLE001 - the refusal is the point
        pass


def weather(city: str) -> dict[str, str]:
    """Weather for a city"""  # an agent framework offers the docstring as the tool's description
    return {**WEATHER, "city": city}


def agent_conversation(agent: Any, failing_agent: Any) -> None:
    """An agent framework's runs, for agents built with ``SYSTEM`` as instructions and :func:`weather` as a tool.

    1. ``run_sync``: a chat that calls the tool, the tool, a chat that answers in text;
    2. the same run streamed (``run_stream_sync``), so its chats mark their first token;
    3. an agent whose model the API refuses with a 500, so the agent and its chat carry an error.
    """
    agent.run_sync(QUESTION)
    with agent.run_stream_sync(QUESTION) as stream:
        for _ in stream.stream_text(delta=True):
            pass
    try:
        failing_agent.run_sync(QUESTION)
    except Exception:  # noqa: BLE001 - the refusal is the point
        pass
