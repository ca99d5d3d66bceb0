"""The worker's promises: what force_flush reports, how a wrong address is told, the fake clock seam."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from otel_runs_exporter import RunsSpanExporter, RunsSpanProcessor
from otel_runs_exporter._clock import FakeClock
from otel_runs_exporter.server import LocalService
from opentelemetry.sdk.trace import TracerProvider

from core.helpers import created, processor_provider


def _spans(provider: TracerProvider, n: int, prefix: str = "s") -> None:
    tracer = provider.get_tracer("t")
    for i in range(n):
        with tracer.start_as_current_span(f"{prefix}{i}"):
            pass


def _on_fake_clock(service, **settings):
    """A processor whose waits run on a FakeClock; a long schedule delay, so only flushes send."""
    clock = FakeClock()
    processor = RunsSpanProcessor(endpoint=service.url, api_key="k", schedule_delay_s=30, clock=clock, **settings)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    created.append(provider)
    return clock, provider, processor


def test_force_flush_is_false_when_the_key_is_refused():
    with LocalService(api_key="the-right-key", strict=True) as svc:
        provider, processor = processor_provider(svc.url, api_key="a-wrong-key")
        _spans(provider, 2)
        assert processor.force_flush(5000) is False
        stats = processor.stats()
        assert dict(stats.dropped) == {"unauthorized": 2} and stats.settled() and stats.created == 2


def test_force_flush_is_false_when_a_run_is_rejected(service):
    provider, processor = processor_provider(service.url)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("poison") as span:
        service.faults.reject_run_ids = {processor.run_ids(span.get_span_context().span_id).run_id}
    with tracer.start_as_current_span("fine"):
        pass
    assert processor.force_flush(5000) is False
    stats = processor.stats()
    assert dict(stats.dropped) == {"rejected": 1} and stats.delivered == 1 and stats.settled()
    # Nothing new to send and nothing lost since: the next flush is a success.
    assert processor.force_flush(5000) is True


def test_a_wrong_base_path_is_told_once_and_counted(service, caplog):
    wrong = service.url + "/v1/traces"  # an OTLP path pasted as the base address: 404 on both endpoints
    provider, processor = processor_provider(wrong)
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        for _ in range(3):
            _spans(provider, 4)
            assert processor.force_flush(5000) is False
    lines = [r.getMessage() for r in caplog.records if "404" in r.getMessage()]
    assert len(lines) == 1, lines
    assert wrong in lines[0] and "OTEL_EXPORTER_RUNS_ENDPOINT" in lines[0] and "base address" in lines[0]
    stats = processor.stats()
    assert dict(stats.dropped) == {"not_found": 12} and stats.settled()
    # One probe of each endpoint per batch, not one request per run.
    assert stats.requests <= 3 * 2 + 1


def test_flush_keeps_sending_through_retryable_failures_until_its_deadline(service):
    # 12 refusals, each asking for 5 s: minutes of waiting with the real backoff schedule
    # (its steps grow to 30 s), taken on a fake clock.
    service.faults.update(status_sequence=[503, 429] * 6, retry_after=5.0)
    clock, provider, processor = _on_fake_clock(service)
    _spans(provider, 5)
    began = time.monotonic()
    assert processor.force_flush(600_000) is True
    assert time.monotonic() - began < 10  # no real minute slept
    assert sum(clock.waits) >= 60 and min(w for w in clock.waits if w > 0) >= 5.0  # Retry-After honoured
    stats = processor.stats()
    assert stats.delivered == 5 and stats.retried == 12 and stats.settled()
    assert sorted(r["name"] for r in service.runs()) == [f"s{i}" for i in range(5)]


@pytest.mark.parametrize("failures, flushed", [(1, True), (2, False)])
def test_a_backoff_past_the_deadline_still_gets_one_last_try_before_it(service, failures, flushed):
    # Backoff waits of 15-30 s against a 10 s flush: the next retry would come after the
    # deadline. The flush used to give up at once, with 9 s still to go; it tries once more
    # a second before the deadline, and gives up only if that fails too.
    from otel_runs_exporter._http_client import Backoff

    service.faults.update(status_sequence=[500] * failures, retry_after=None)
    clock, provider, processor = _on_fake_clock(service, retry_backoff=(30.0, 30.0))
    _spans(provider, 3)
    assert processor.force_flush(10_000) is flushed
    assert [w for w in clock.waits if w > 0] == [pytest.approx(10 - Backoff.last_try_margin_s)]
    stats = processor.stats()
    assert (stats.delivered, stats.queued) == ((3, 0) if flushed else (0, 3))


def test_flush_past_its_deadline_is_false_and_keeps_the_runs(service):
    service.faults.update(outage=True, retry_after=5.0)
    clock, provider, processor = _on_fake_clock(service)
    _spans(provider, 3)
    assert processor.force_flush(12_000) is False
    assert processor.stats().queued == 3  # not dropped: they wait for the service
    service.faults.update(outage=False)
    assert processor.force_flush(60_000) is True
    assert processor.stats().delivered == 3 and processor.stats().settled()


def test_exporter_path_reports_drops_from_force_flush_too():
    with LocalService(api_key="the-right-key", strict=True) as svc:
        exporter = RunsSpanExporter(endpoint=svc.url, api_key="a-wrong-key")
        provider = TracerProvider()
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider.add_span_processor(SimpleSpanProcessor(exporter))
        created.append(provider)
        _spans(provider, 2)
        assert exporter.force_flush(2000) is True  # nothing pending: each export already reported
        stats = exporter.stats()
        assert dict(stats.dropped) == {"unauthorized": 2} and stats.settled() and stats.created == 2


def _bad_spool_dir(tmp_path, how: str) -> tuple[str, str]:
    """A spool directory the exporter must not use, and what its refusal says."""
    if how in ("without permission", "owned by another user") and (os.geteuid() == 0) != (how == "owned by another user"):
        pytest.skip("root reads and writes whatever the permissions say; only root can give a directory away")
    if how == "below a file":
        blocker = tmp_path / "a-file"
        blocker.write_text("x")
        return str(blocker / "below-a-file"), "cannot be"
    bad = tmp_path / "spool"
    bad.mkdir()
    if how == "without permission":
        bad.chmod(0o500)
        return str(bad), "not writable"
    if how == "owned by another user":
        bad.chmod(0o700)
        os.chown(bad, 4242, -1)
        return str(bad), "owned by uid 4242"
    bad.chmod({"writable by all": 0o777, "group-writable": 0o770, "others-writable (sticky)": 0o1757}[how])
    return str(bad), "only its owner can write to"


_BAD_SPOOL_DIRS = ["below a file", "without permission", "owned by another user", "writable by all", "group-writable", "others-writable (sticky)"]


@pytest.mark.parametrize("how", _BAD_SPOOL_DIRS)
def test_a_spool_dir_passed_explicitly_that_others_could_write_is_a_config_error(tmp_path, how):
    from otel_runs_exporter import ConfigError

    bad, says = _bad_spool_dir(tmp_path, how)
    # configure(spool_dir=...) hands its arguments to this constructor (it is not called here: it sets globals).
    with pytest.raises(ConfigError) as err:
        RunsSpanProcessor(endpoint="http://127.0.0.1:9", spool_dir=bad)
    assert "spool_dir" in str(err.value) and bad in str(err.value) and says in str(err.value)


@pytest.mark.parametrize("how", _BAD_SPOOL_DIRS)
def test_a_spool_dir_from_the_environment_that_others_could_write_warns_and_runs_without_a_spool(
    monkeypatch, tmp_path, caplog, how
):
    bad, says = _bad_spool_dir(tmp_path, how)
    monkeypatch.setenv("OTEL_EXPORTER_RUNS_SPOOL_DIR", bad)
    with caplog.at_level(logging.WARNING, logger="otel_runs_exporter"):
        processor = RunsSpanProcessor(endpoint="http://127.0.0.1:9", api_key="k")
    try:
        assert processor.settings.spool_dir is None
        warned = [r.getMessage() for r in caplog.records if "OTEL_EXPORTER_RUNS_SPOOL_DIR" in r.getMessage()]
        assert len(warned) == 1 and bad in warned[0] and says in warned[0] and "without a spool" in warned[0]
    finally:
        processor.shutdown(timeout_millis=100)


def test_a_spool_dir_the_exporter_creates_is_private_to_its_user(tmp_path):
    target = tmp_path / "made" / "spool"
    processor = RunsSpanProcessor(endpoint="http://127.0.0.1:9", api_key="k", spool_dir=str(target))
    processor.shutdown(timeout_millis=100)
    assert processor.settings.spool_dir == str(target) and target.stat().st_mode & 0o777 == 0o700


def _bad_path(tmp_path, var: str, how: str) -> str:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    if how == "below a file":
        return str(blocker / "below-a-file")
    if how == "missing":
        return str(tmp_path / "missing.pem")
    if how == "a directory":
        return str(tmp_path)
    locked = tmp_path / "locked.pem"
    locked.write_text("x")
    locked.chmod(0)
    return str(locked)


@pytest.mark.parametrize(
    "var, how",
    [
        ("OTEL_EXPORTER_RUNS_CERTIFICATE", "missing"),
        ("OTEL_EXPORTER_RUNS_CERTIFICATE", "a directory"),
        ("OTEL_EXPORTER_RUNS_CERTIFICATE", "without permission"),
        ("OTEL_EXPORTER_RUNS_CLIENT_CERTIFICATE", "missing"),
        ("OTEL_EXPORTER_RUNS_CLIENT_KEY", "missing"),
        ("OTEL_EXPORTER_RUNS_CLIENT_KEY", "without permission"),
    ],
)
def test_bad_paths_from_the_environment_leave_the_app_untraced_saying_why(monkeypatch, tmp_path, caplog, var, how):
    """How the service is trusted has no safe default: no processor sends anything, one error names the file."""
    from otel_runs_exporter import ConfigError, _settings

    if how == "without permission" and os.geteuid() == 0:
        pytest.skip("root reads and writes whatever the permissions say")
    _settings._bad_env_log.reset()  # once per variable per hour: each case here is said anew
    bad = _bad_path(tmp_path, var, how)
    monkeypatch.setenv(var, bad)
    with caplog.at_level(logging.ERROR, logger="otel_runs_exporter"):
        processor = RunsSpanProcessor(endpoint="http://127.0.0.1:9")
    assert processor.settings.disabled and processor.stats().created == 0
    (line,) = [r.getMessage() for r in caplog.records if var in r.getMessage()]
    assert bad in line and "expected a readable PEM file" in line and "untraced" in line
    # Passed in code, the same value is a mistake where it is written.
    monkeypatch.delenv(var)
    setting = var.removeprefix("OTEL_EXPORTER_RUNS_").lower()
    with pytest.raises(ConfigError, match=bad.replace("\\", "\\\\")):
        RunsSpanProcessor(endpoint="http://127.0.0.1:9", **{setting: bad})


# --- pacing under a rate limit (the rule itself: test_pacing.py) ---


def _until(condition, timeout: float = 20.0) -> None:
    """Wait for the worker to get somewhere (a bound on waiting, not on how fast)."""
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, "the worker never got there"
        time.sleep(0.01)


def test_a_429_on_the_regular_flush_grows_the_interval_and_keeps_the_runs(service, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="otel_runs_exporter._pacing")
    service.faults.update(status_sequence=[429], retry_after=None)
    provider, processor = processor_provider(service.url, max_schedule_delay_s=1.0, spool_dir=str(tmp_path))
    _spans(provider, 5)
    # Sent again by a regular flush: no force_flush here.
    _until(lambda: processor.stats().delivered == 5)
    stats = processor.stats()
    assert stats.throttled == 1 and stats.delivered == 5
    assert stats.spooled == 0  # a throttled batch is kept in memory, not written to the spool
    assert 0.05 < stats.interval_s <= 0.1  # doubled once, then a step or two back per success
    statuses = [r["status"] for r in service.requests() if r["path"] == "/runs/multipart"]
    assert statuses[0] == 429 and 202 in statuses
    assert [r.getMessage() for r in caplog.records if "429" in r.getMessage()] != []


def test_force_flush_skips_the_grown_interval_and_waits_out_retry_after_only(service):
    # One 429 asking for 3000 s: regular flushes are now at least 3000 s apart (real time).
    # force_flush does not wait for that; it waits only the Retry-After, on the fake clock.
    service.faults.update(status_sequence=[429], retry_after=3000)
    clock = FakeClock()
    provider, processor = processor_provider(
        service.url, clock=clock, max_schedule_delay_s=3600, export_timeout_s=4000
    )
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("early"):
        pass
    _until(lambda: processor.stats().throttled == 1)
    stats = processor.stats()
    assert stats.interval_s == 3000.0 and stats.queued == 1
    with tracer.start_as_current_span("late"):
        pass
    result: list[bool] = []
    flusher = threading.Thread(target=lambda: result.append(processor.force_flush(3_600_000)), daemon=True)
    flusher.start()
    flusher.join(60)  # had it waited for the interval, this would be 3000 s
    assert result == [True]
    assert clock.waits == [3000.0]
    assert sorted(r["name"] for r in service.wait_for_runs(2)) == ["early", "late"]
    assert processor.stats().throttled == 1


def test_exporter_path_reports_429s_and_no_interval(service):
    service.faults.update(status_sequence=[429], retry_after=None)
    exporter = RunsSpanExporter(endpoint=service.url, api_key="k")
    provider = TracerProvider()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider.add_span_processor(SimpleSpanProcessor(exporter))
    created.append(provider)
    _spans(provider, 1)
    assert provider.force_flush(10_000)
    stats = exporter.stats()
    assert stats.throttled == 1 and stats.delivered == 1 and stats.interval_s is None
