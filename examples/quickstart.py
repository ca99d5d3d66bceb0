"""Quickstart: your own app, traced. One configure() call, a decorated function and an OpenAI call.

    pip install '.[serve,examples]'    # in a clone; else: pip install 'otel-runs-exporter[serve,examples]'
    otel-runs serve &                  # the local service, and its viewer at http://127.0.0.1:1984
    export OTEL_EXPORTER_RUNS_ENDPOINT=http://127.0.0.1:1984 OPENAI_API_KEY='<your OpenAI key>'
    python examples/quickstart.py

configure() sends every OpenTelemetry span of the app as a run, and with
instrument=True the OpenAI and Anthropic clients' calls too (messages, model,
tokens). answer() becomes a chain run with the model call under it. The runs
go where OTEL_EXPORTER_RUNS_ENDPOINT says (the hosted service by default, with
OTEL_EXPORTER_RUNS_API_KEY), and are delivered at exit at the latest. The
README's quickstart is this file, below this docstring.
"""

from openai import OpenAI

from otel_runs_exporter import configure, traceable

configure(project="quickstart", instrument=True)  # where to: OTEL_EXPORTER_RUNS_ENDPOINT, _API_KEY
client = OpenAI()  # OPENAI_API_KEY; OPENAI_BASE_URL for another OpenAI-compatible server


@traceable
def answer(question: str) -> str:
    reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
    return reply.choices[0].message.content or ""


print(answer("What is a run?"))
