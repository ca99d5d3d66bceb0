// A Node.js app traced with the OpenTelemetry JS SDK, sending its spans as OTLP to the local service.
//
// Nothing here knows about runs: the OTel SDK's own OTLP exporter reads where to send from the
// standard variables, and the service turns the spans into runs:
//
//   pip install 'otel-runs-exporter[otlp]'            # the service reads this SDK's protobuf bodies with it
//   otel-runs serve                                   # http://127.0.0.1:1984
//   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:1984/otel/v1/traces \
//   OTEL_EXPORTER_OTLP_HEADERS="x-api-key=...,Langsmith-Project=node-demo" \
//   npm start
//
// The trace is GenAI-shaped (OTel's GenAI conventions): an agent, a chat model call with its
// messages and token usage, and the tool the model asked for. It prints the trace id.

"use strict";

const { trace, SpanKind, SpanStatusCode } = require("@opentelemetry/api");
const { BatchSpanProcessor, NodeTracerProvider } = require("@opentelemetry/sdk-trace-node");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
const { resourceFromAttributes } = require("@opentelemetry/resources");

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "weather-agent-node" }),
  // The exporter takes its address and headers from OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_HEADERS.
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register(); // the context manager that makes a span started inside another its child
const tracer = trace.getTracer("weather-agent", "1.0.0");

const question = "What is the weather in Paris?";

function chat(messages, output, inputTokens, outputTokens) {
  return tracer.startActiveSpan("chat gpt-4o-mini", { kind: SpanKind.CLIENT }, (span) => {
    span.setAttributes({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
      "gen_ai.request.temperature": 0.2,
      "gen_ai.usage.input_tokens": inputTokens,
      "gen_ai.usage.output_tokens": outputTokens,
      "gen_ai.input.messages": JSON.stringify(messages),
      "gen_ai.output.messages": JSON.stringify([output]),
    });
    span.end();
    return output;
  });
}

function getWeather(city) {
  return tracer.startActiveSpan("execute_tool get_weather", (span) => {
    span.setAttributes({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "get_weather",
      "gen_ai.tool.call.id": "call_1",
    });
    const result = { city, forecast: "sunny", celsius: 24 };
    span.end();
    return result;
  });
}

const traceId = tracer.startActiveSpan("invoke_agent weather", (agent) => {
  agent.setAttributes({ "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather" });
  const user = { role: "user", parts: [{ type: "text", content: question }] };
  const call = chat(
    [user],
    {
      role: "assistant",
      parts: [{ type: "tool_call", id: "call_1", name: "get_weather", arguments: { city: "Paris" } }],
      finish_reason: "tool_call",
    },
    42,
    12,
  );
  const weather = getWeather(call.parts[0].arguments.city);
  chat(
    [user, call, { role: "tool", parts: [{ type: "tool_call_response", id: "call_1", response: weather }] }],
    { role: "assistant", parts: [{ type: "text", content: "It is sunny in Paris, 24 °C." }], finish_reason: "stop" },
    71,
    11,
  );
  agent.setStatus({ code: SpanStatusCode.OK });
  agent.end();
  return agent.spanContext().traceId;
});

provider.shutdown().then(
  () => console.log(traceId),
  (error) => {
    console.error(`could not send the trace: ${error}`);
    process.exitCode = 1;
  },
);
