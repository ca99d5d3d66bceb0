"""The real google-genai client on the Gemini API, traced by opentelemetry-instrumentation-google-genai.

Set up as its README says: ``GoogleGenAiSdkInstrumentor().instrument()``; the test module
sets ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (without it, no content). The
client reads the fake API's address from ``GOOGLE_GEMINI_BASE_URL`` (the harness sets it).

Under each flush plan:

1. a chat (``chats.create(...).send_message``, where the SDK recommends its automatic function
   calling) with a system instruction and ``get_weather`` as a Python function: the SDK runs
   the function when the model calls it and sends its result back, so one message makes two
   model requests;
2. ``generate_content_stream``: the answer arrives word by word;
3. a model the API refuses with a 500: the call raises.
"""

import app_harness
from google import genai
from google.genai import types
from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor
from scenarios import GEMINI_MODEL, QUESTION, SYSTEM, weather

harness = app_harness.start(log_events=True)  # event_only content arrives as log records
GoogleGenAiSdkInstrumentor().instrument()
client = genai.Client(api_key="test")


def get_weather(city: str) -> dict:
    """Weather for a city"""
    return weather(city)


def scenario() -> None:
    chat = client.chats.create(
        model=GEMINI_MODEL,
        config=types.GenerateContentConfig(system_instruction=SYSTEM, tools=[get_weather], temperature=0.2),
    )
    chat.send_message(QUESTION)
    client.models.generate_content(
        model=GEMINI_MODEL, contents=QUESTION,
        config=types.GenerateContentConfig(system_instruction=SYSTEM, tools=[get_weather], temperature=0.2),
    )
    for _ in client.models.generate_content_stream(
        model=GEMINI_MODEL, contents=QUESTION, config=types.GenerateContentConfig(system_instruction=SYSTEM),
    ):
        pass
    try:
        client.models.generate_content(model="error-500", contents=QUESTION)
    except Exception:  # noqa: BLE001 - the refusal is the point
        pass


harness.run(scenario)
