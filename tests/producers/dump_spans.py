"""Run one producer app and write the raw spans it made to a JSON file: what a mapping row is written from.

    python tests/producers/dump_spans.py openai_agents /tmp/openai_agents.json
    python tests/producers/dump_spans.py strands_agent /tmp/strands.json OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental

The app runs exactly as its matrix test runs it (its own process, the fake model API,
two local services), with ``MATRIX_DUMP_SPANS`` set: the harness also keeps every
finished span and writes name, scope, kind, parent, attributes, events and status as
the SDK's ``ReadableSpan`` holds them. Arguments after the output path are
``NAME=VALUE`` environment settings for the app.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from producers.matrix import run_app  # noqa: E402

from otel_runs_exporter.server import LocalService  # noqa: E402
from otel_runs_exporter.testing.fake_llm import FakeLLMAPI  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    app, out, *settings = argv
    env = dict(setting.split("=", 1) for setting in settings)
    env["MATRIX_DUMP_SPANS"] = str(Path(out).resolve())
    with FakeLLMAPI() as fake, LocalService(strict=True) as processor, LocalService(strict=True) as exporter:
        run_app(app, fake, processor, exporter, env=env)
    spans = json.loads(Path(out).read_text(encoding="utf-8"))
    print(f"{len(spans)} spans from {app} written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
