"""The real `anthropic` client, traced by our instrumentor: a message, and a streamed one.

    pip install '.[examples]'     # in a clone; else: pip install 'otel-runs-exporter[examples]'
    python examples/anthropic_messages.py

RunsAnthropicInstrumentor wraps `messages.create` (also with `stream=True`) and
`messages.stream(...)`; each call becomes an `llm` run with the system prompt,
the messages, the reply and the token usage (cache reads included). A streamed
call's run lasts until the stream is finished and records when the first token
came (`new_token` event). Both calls run under one @traceable parent.

The anthropic SDK (2.x) can trace its own calls; our instrumentor then steps
aside so a call is traced once. This example turns the SDK's tracing off
(ANTHROPIC_OPEN_TELEMETRY=false) to show ours, which records message content.

Nothing leaves the machine: the client talks to FakeLLMAPI, a small
Anthropic-compatible server on loopback with canned answers that ships in
otel_runs_exporter.testing. With OTEL_EXPORTER_RUNS_ENDPOINT unset the script
starts the embedded local service and prints the tree it received; with it
set, it sends there.
"""

import os

try:
    import anthropic
except ImportError:
    raise SystemExit(
        "This example needs the anthropic client: pip install '.[examples]' in a clone of the repository, "
        "else pip install 'otel-runs-exporter[examples]'"
    ) from None

from otel_runs_exporter import configure, get_processor, traceable
from otel_runs_exporter.instrumentation.anthropic import RunsAnthropicInstrumentor
from otel_runs_exporter.testing import local_service_unless_configured, show_runs
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

MODEL = "claude-haiku-4-5"
SYSTEM = "Answer in one sentence."

client: anthropic.Anthropic  # set below, once the fake API is listening


@traceable(name="ask_twice")
def ask_twice(question: str) -> dict[str, object]:
    messages = [{"role": "user", "content": question}]
    reply = client.messages.create(model=MODEL, max_tokens=256, system=SYSTEM, messages=messages)
    with client.messages.stream(model=MODEL, max_tokens=256, system=SYSTEM, messages=messages) as stream:
        streamed = "".join(stream.text_stream)
    return {"reply": reply.content[0].text, "streamed": streamed}


if __name__ == "__main__":
    os.environ["ANTHROPIC_OPEN_TELEMETRY"] = "false"
    with local_service_unless_configured() as service, FakeLLMAPI() as fake_api:
        configure()
        RunsAnthropicInstrumentor().instrument()  # on the global provider configure() set up
        client = anthropic.Anthropic(base_url=fake_api.anthropic_base_url, api_key="the-fake-api-ignores-it", max_retries=0)
        print(ask_twice("What is a run?"))
        processor = get_processor()  # None only if configure() could not install it
        if processor is not None and not processor.force_flush():  # deliver now, so the tree printed below is complete
            print("not everything was delivered:", processor.stats())
        show_runs(service, expected=3)
