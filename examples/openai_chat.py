"""The real `openai` client, traced by our instrumentor: a chat completion and a streamed one.

    pip install '.[examples]'     # in a clone; else: pip install 'otel-runs-exporter[examples]'
    python examples/openai_chat.py

RunsOpenAIInstrumentor wraps the client's methods; each call becomes an `llm`
run with the messages, the model, the reply and the token usage. A streamed
call's run lasts until the stream is read to the end and records when the
first token came (`new_token` event); with `stream_options={"include_usage":
True}` it gets the usage too. Both calls run under one @traceable parent.

Nothing leaves the machine: the client talks to FakeLLMAPI, a small
OpenAI-compatible server on loopback with canned answers that ships in
otel_runs_exporter.testing. Against the real API, drop the fake and the
base_url and set OPENAI_API_KEY. With OTEL_EXPORTER_RUNS_ENDPOINT unset the
script starts the embedded local service and prints the tree it received; with
it set, it sends there.
"""

try:
    import openai
except ImportError:
    raise SystemExit(
        "This example needs the openai client: pip install '.[examples]' in a clone of the repository, "
        "else pip install 'otel-runs-exporter[examples]'"
    ) from None

from otel_runs_exporter import configure, get_processor, traceable
from otel_runs_exporter.instrumentation.openai import RunsOpenAIInstrumentor
from otel_runs_exporter.testing import local_service_unless_configured, show_runs
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI

MODEL = "gpt-4o-mini"


client: openai.OpenAI  # set below, once the fake API is listening


@traceable(name="ask_twice")
def ask_twice(question: str) -> dict[str, object]:
    messages = [{"role": "system", "content": "Answer in one sentence."}, {"role": "user", "content": question}]
    reply = client.chat.completions.create(model=MODEL, messages=messages)
    streamed = ""
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            streamed += chunk.choices[0].delta.content
    return {"reply": reply.choices[0].message.content, "streamed": streamed}


if __name__ == "__main__":
    with local_service_unless_configured() as service, FakeLLMAPI() as fake_api:
        configure()
        RunsOpenAIInstrumentor().instrument()  # on the global provider configure() set up
        client = openai.OpenAI(base_url=fake_api.openai_base_url, api_key="the-fake-api-ignores-it", max_retries=0)
        print(ask_twice("What is a run?"))
        processor = get_processor()  # None only if configure() could not install it
        if processor is not None and not processor.force_flush():  # deliver now, so the tree printed below is complete
            print("not everything was delivered:", processor.stats())
        show_runs(service, expected=3)
