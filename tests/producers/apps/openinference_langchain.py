"""A LangChain app (langchain-core with langchain-openai's ChatOpenAI) instrumented by
openinference-instrumentation-langchain, as its README sets it up."""

import app_harness
from openinference.instrumentation.langchain import LangChainInstrumentor
from scenarios import langchain_conversation

harness = app_harness.start()
LangChainInstrumentor().instrument()
harness.run(langchain_conversation)
