"""The real openai client instrumented by Logfire as its docs set it up; our processors added as it adds any other.

Logfire makes its own tracer provider (and sets it as the global one), so
``configure()`` cannot add to it: our span processors go in through
``logfire.configure(additional_span_processors=...)``, the way Logfire's docs send
spans to another backend. ``send_to_logfire=False``: no token, nothing leaves the
machine; ``console=False``: the app's stdout is the harness's report.

``MATRIX_LOGFIRE_VERSION`` picks the attribute format ``instrument_openai`` writes:
``2`` (its default, the GenAI attributes) or ``1`` (its ``request_data``/``response_data``).
"""

import os

import app_harness
import logfire
import openai
from scenarios import openai_conversation

harness = app_harness.start(own_provider=False)
logfire.configure(
    send_to_logfire=False, console=False, inspect_arguments=False,
    additional_span_processors=harness.span_processors,
)
client = openai.OpenAI(max_retries=0)
logfire.instrument_openai(client, version=int(os.environ.get("MATRIX_LOGFIRE_VERSION", "2")))
harness.run(lambda: openai_conversation(client))
