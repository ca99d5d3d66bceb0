"""Bytes on the wire and in memory: zstd when the service offers it, sealed batches in an outage."""

from __future__ import annotations

import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest
from hypothesis import given, settings, strategies as st

from core.test_transport import KEY, make_runs
from otel_runs_exporter._clock import FakeClock
from otel_runs_exporter._codec import codec, memory_codec
from otel_runs_exporter._delivery import Delivery
from otel_runs_exporter._encode import encode_run, multipart_body
from otel_runs_exporter._seal import seal, split_multipart
from otel_runs_exporter._settings import resolve
from otel_runs_exporter._stats import Ledger
from otel_runs_exporter._transport import Transport
from otel_runs_exporter.server import LocalService

zstandard = pytest.importorskip("zstandard")


def _settings(url: str, **more):
    return resolve({"endpoint": url, "api_key": KEY, **more}, env={})


# --- compression=auto ---------------------------------------------------------------


def test_auto_asks_info_once_then_sends_zstd(service):
    t = Transport(_settings(service.url))
    assert len(t.send(make_runs(3), time.monotonic() + 5).delivered) == 3
    assert len(t.send(make_runs(2, trace=2), time.monotonic() + 5).delivered) == 2
    log = service.requests()
    assert [(r["method"], r["path"]) for r in log] == [("GET", "/info"), ("POST", "/runs/multipart"), ("POST", "/runs/multipart")]
    assert [r["content_encoding"] for r in log[1:]] == ["zstd", "zstd"] and t.wire_codec == "zstd"
    assert len(service.runs()) == 5 and service.violations() == []


def test_explicit_none_never_asks_info(service):
    t = Transport(_settings(service.url, compression="none"))
    assert len(t.send(make_runs(2), time.monotonic() + 5).delivered) == 2
    assert [(r["path"], r["content_encoding"]) for r in service.requests()] == [("/runs/multipart", None)]


class _Plain(BaseHTTPRequestHandler):
    """A service whose /info says nothing of zstd, or that refuses zstd bodies it advertised."""

    info: dict | None = {"version": "x"}
    refuse_zstd = False
    seen: list = []
    bodies: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).seen.append(("GET", self.path, None))
        if self.info is None:
            self._answer(404, b"{}")
        else:
            self._answer(200, orjson.dumps(self.info))

    def do_POST(self):
        type(self).bodies.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        encoding = self.headers.get("Content-Encoding")
        type(self).seen.append(("POST", self.path, encoding))
        self._answer(415 if encoding and self.refuse_zstd else 202, b"{}")

    def _answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def plain():
    _Plain.seen, _Plain.bodies = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("info", [{"version": "x"}, {"instance_flags": {"zstd_compression_enabled": False}}, None])
def test_auto_sends_plain_bodies_when_info_does_not_offer_zstd(plain, info):
    _Plain.info, _Plain.refuse_zstd = info, False
    t = Transport(_settings(plain))
    for trace in (1, 2):
        assert len(t.send(make_runs(2, trace=trace), time.monotonic() + 5).delivered) == 2
    assert _Plain.seen == [("GET", "/info", None), ("POST", "/runs/multipart", None), ("POST", "/runs/multipart", None)]


def _words(seed: int) -> Any:
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    return lambda n: " ".join(rng.choice(vocabulary) for _ in range(n))


def test_a_request_is_compressed_for_the_size_of_its_runs(plain):
    # The multipart path too (it once passed one run for the whole body, so a batch of small
    # runs took the large runs' compressor): what the service receives is what each would make.
    _Plain.info, _Plain.refuse_zstd = {"instance_flags": {"zstd_compression_enabled": True}}, False
    text, zstd = _words(3), codec("zstd")
    assert zstd is not None and zstd.compress_large is not None
    t = Transport(_settings(plain))
    small = [encode_run("post", {"id": f"s{i}", "dotted_order": f"d{i}", "inputs": {"q": text(30)}}) for i in range(300)]
    large = [encode_run("post", {"id": f"l{i}", "dotted_order": f"e{i}", "inputs": {"doc": text(4000)}}) for i in range(6)]
    for runs in (small, large):
        assert len(t.send(runs, time.monotonic() + 5).delivered) == len(runs)
    (small_body, large_body) = _Plain.bodies
    assert small_body == zstd.compress(zstd.decompress(small_body)) != zstd.compress_large(zstd.decompress(small_body))
    assert large_body == zstd.compress_large(zstd.decompress(large_body)) != zstd.compress(zstd.decompress(large_body))


def test_auto_stops_compressing_when_the_advertised_zstd_is_refused(plain):
    _Plain.info, _Plain.refuse_zstd = {"instance_flags": {"zstd_compression_enabled": True}}, True
    t = Transport(_settings(plain))
    assert len(t.send(make_runs(2), time.monotonic() + 5).delivered) == 2
    assert _Plain.seen == [("GET", "/info", None), ("POST", "/runs/multipart", "zstd"), ("POST", "/runs/multipart", None)]
    assert t.wire_codec == "none"


def test_auto_asks_again_later_when_info_was_unreachable(plain):
    # Down at the first send: plain bodies meanwhile, /info asked again a minute later.
    _Plain.info, _Plain.refuse_zstd = {"instance_flags": {"zstd_compression_enabled": True}}, False
    clock = FakeClock()
    t = Transport(_settings("http://127.0.0.1:9"), clock=clock)
    t.send(make_runs(1), clock.now() + 0.5)
    assert t.wire_codec == "none"
    t._http.base = plain  # the same transport, now reaching a service that answers
    t._http.reset_backoff()
    t.send(make_runs(1), clock.now() + 5)
    assert _Plain.seen == [("POST", "/runs/multipart", None)]  # not asked again yet
    clock.advance(61)
    t.send(make_runs(1, trace=3), clock.now() + 5)
    assert _Plain.seen[1:] == [("GET", "/info", None), ("POST", "/runs/multipart", "zstd")]


# --- sealed batches ------------------------------------------------------------------

runs_strategy = st.lists(
    st.tuples(st.sampled_from(["post", "patch"]), st.booleans(), st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3)),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(runs_strategy, st.sampled_from(["zstd", "gzip", "deflate"]), st.text(alphabet="ab-", min_size=1, max_size=3))
def test_a_sealed_batch_opens_to_the_same_runs(items, codec_name, boundary):
    runs = [
        encode_run(op, {"id": f"r{i}", "dotted_order": f"d{i}", "inputs": inputs, "outputs": inputs}, completes=completes)
        for i, (op, completes, inputs) in enumerate(items)
    ]
    sealed = seal(runs, boundary, codec(codec_name))
    assert sealed.ops == len(runs) and sealed.completing == sum(r.completes for r in runs)
    back = sealed.open()
    assert [(r.op, r.run_id, r.parts, r.completes, r.dotted_order) for r in back] == [
        (r.op, r.run_id, r.parts, r.completes, r.dotted_order) for r in runs
    ]
    assert [n for n, _ in split_multipart(sealed.body(), sealed.boundary)] == [n for r in runs for n, _ in r.parts]


def _delivery(url: str, clock: FakeClock, **more) -> Delivery:
    s = _settings(url, export_timeout_s=1.0, max_export_batch_size=50, **more)
    return Delivery(s, Transport(s, clock=clock))


def test_an_outage_holds_compressed_batches_and_sends_each_once_after(service):
    service.faults.update(outage=True)
    clock = FakeClock()
    delivery, ledger = _delivery(service.url, clock), Ledger()
    runs = make_runs(400, payload="some text that repeats " * 8)
    ledger.admit(len(runs))
    plain_bytes = sum(r.size for r in runs)
    for run in runs[:50]:
        assert delivery.add(run)
    outcome = delivery.send_next(clock.now() + 1)  # refused until the deadline: sealed, kept
    ledger.record(outcome)
    assert outcome.retry_later and delivery.sealing
    for run in runs[50:]:
        assert delivery.add(run)
    # 8 batches of 50, each sealed as it filled: a tenth of the runs' own size, or less.
    assert len(delivery) == 8 and delivery.bytes_held < plain_bytes / 10
    service.faults.update(outage=False)
    while (outcome := delivery.send_next(clock.now() + 5)) is not None:
        ledger.record(outcome)
    stats = ledger.snapshot()
    assert stats.delivered == 400 and stats.queued == 0 and not stats.dropped
    assert not delivery.sealing and delivery.bytes_held == 0
    posts = [r for r in service.requests() if r["path"] == "/runs/multipart" and r["status"] == 202]
    assert len(posts) == 8 and {r["content_encoding"] for r in posts} == {"zstd"}
    assert len(service.runs()) == 400 and service.duplicate_posts() == {} and service.violations() == []


def test_a_sealed_batch_refused_in_part_is_opened_and_bisected(service):
    service.faults.update(outage=True)
    clock = FakeClock()
    delivery = _delivery(service.url, clock)
    runs = make_runs(40)
    for run in runs:
        delivery.add(run)
    assert delivery.send_next(clock.now() + 1).retry_later
    service.faults.update(outage=False, reject_run_ids={runs[17].run_id})
    outcome = delivery.send_next(clock.now() + 5)
    assert len(outcome.delivered) == 39 and [r.run_id for r in outcome.dropped["rejected"]] == [runs[17].run_id]
    assert len(service.runs()) == 39


def test_a_sealed_batch_falls_back_to_basic_tracing():
    with LocalService(multipart=False, strict=True) as svc:
        svc.faults.update(outage=True)
        clock = FakeClock()
        delivery = _delivery(svc.url, clock, compression="none")
        for run in make_runs(5):
            delivery.add(run)
        assert delivery.send_next(clock.now() + 1).retry_later
        svc.faults.update(outage=False)
        outcome = delivery.send_next(clock.now() + 5)
        assert len(outcome.delivered) == 5 and delivery.transport.mode == "basic"
        assert len(svc.runs()) == 5 and svc.violations() == []


def test_past_the_byte_cap_sealing_makes_room_before_anything_is_dropped(service):
    # A slow service: nothing came back yet, but the backlog reached the cap.
    clock = FakeClock()
    runs = make_runs(300, payload="filler " * 40)
    cap = sum(r.size for r in runs[:100])
    delivery = _delivery(service.url, clock, max_queue_bytes=cap)
    assert all(delivery.add(run) for run in runs)  # three times the cap, all held
    assert delivery.bytes_held <= cap
    assert sum(r.ops for r in delivery._backlog if hasattr(r, "ops")) + sum(
        1 for r in delivery._backlog if not hasattr(r, "ops")
    ) == 300


def test_memory_codec_is_zstd_when_installed():
    assert memory_codec().name == "zstd"


def test_a_batch_of_large_runs_is_compressed_for_large_runs_and_opens_the_same():
    # Runs averaging 16 KiB or more take the compressor with the smaller hash table
    # (_codec's comment says why); either way the body opens to the same runs.
    text, zstd = _words(7), codec("zstd")
    assert zstd is not None and zstd.compress_large is not None
    large = [encode_run("post", {"id": f"r{i}", "dotted_order": f"d{i}", "inputs": {"doc": text(4000)}}) for i in range(8)]
    small = [encode_run("post", {"id": f"s{i}", "dotted_order": f"e{i}", "inputs": {"q": text(20)}}) for i in range(8)]
    for runs, takes_large in ((large, True), (small, False)):
        body = multipart_body(runs, "b0")[1]
        chosen = zstd.compress_runs(body, len(runs))
        assert chosen == (zstd.compress_large(body) if takes_large else zstd.compress(body))
        if takes_large:
            assert chosen != zstd.compress(body)  # the two compressors do differ on such a body
        sealed = seal(runs, "b0", zstd)
        assert sealed.data == chosen and sealed.body() == body
        assert [r.parts for r in sealed.open()] == [r.parts for r in runs]


def test_a_batch_refused_for_our_rate_goes_back_open_and_rides_with_what_came_since(service):
    # A 429 on a paced send is not an outage: nothing is sealed or spooled, and the
    # next request carries the refused runs together with the newer ones.
    service.faults.update(status_sequence=[429], retry_after=None)
    clock = FakeClock()
    delivery, ledger = _delivery(service.url, clock), Ledger()
    runs = make_runs(30)
    ledger.admit(len(runs))
    for run in runs[:10]:
        delivery.add(run)
    outcome = delivery.send_next(clock.now() + 5, paced=True)
    ledger.record(outcome)
    assert outcome.retry_later and outcome.throttled and not outcome.spooled
    assert not delivery.sealing and len(delivery) == 10
    for run in runs[10:]:
        delivery.add(run)
    assert not delivery.sealing and len(delivery) == 30  # still 30 runs, none sealed
    ledger.record(delivery.send_next(clock.now() + 5, paced=True))
    assert ledger.snapshot().delivered == 30
    statuses = [(r["status"], len(r["run_ids"])) for r in service.requests() if r["path"] == "/runs/multipart"]
    assert statuses == [(429, 0), (202, 30)]


def test_the_processor_holds_an_outage_sealed_and_delivers_it_once(service):
    # End to end: spans keep coming while the service is down; what waits is sealed
    # (a few hundred bytes a run at most, against ~1.5 KB as encoded runs), and all of
    # it arrives once when the service is back.
    from core.helpers import processor_provider

    service.faults.update(outage=True, retry_after=None)
    provider, processor = processor_provider(service.url, export_timeout_s=0.3, max_export_batch_size=100)
    tracer = provider.get_tracer("outage")
    names = []
    for i in range(3000):
        with tracer.start_as_current_span(f"held-{i}", attributes={"input.value": f"question {i}", "n": i}):
            pass
        names.append(f"held-{i}")
        if i % 100 == 0:
            time.sleep(0.005)
    worker = processor._worker
    deadline = time.monotonic() + 20
    while (worker._queue or not worker._delivery.sealing) and time.monotonic() < deadline:
        time.sleep(0.05)
    held = worker._delivery.bytes_held
    assert not worker._queue and worker._delivery.sealing
    assert 0 < held < 3000 * 300, held
    service.faults.update(outage=False)
    assert processor.force_flush(30_000)
    stats = processor.stats()
    assert stats.delivered == stats.created == 3000 and not stats.dropped
    assert sorted(r["name"] for r in service.runs()) == sorted(names)
    assert service.duplicate_posts() == {}
    provider.shutdown()


def test_a_slow_answer_past_the_export_timeout_is_waited_for_not_sent_twice(service):
    # The service takes 0.8 s to answer (it stores first when it answers at all);
    # the export timeout is 0.3 s. The worker's request, once sent, runs to its
    # answer: cut off at 0.3 s it was sent again and every run stored twice.
    from core.helpers import processor_provider

    service.faults.update(rate_slow=1.0, slow_seconds=0.8)
    provider, processor = processor_provider(service.url, export_timeout_s=0.3, compression="none")
    tracer = provider.get_tracer("slow")
    for i in range(20):
        with tracer.start_as_current_span(f"slow-{i}"):
            pass
    time.sleep(2.5)  # the worker's own cycles send them (a flush would bring its longer deadline)
    assert processor.force_flush(20_000)
    assert len(service.runs()) == 20 and service.duplicate_posts() == {}
    assert processor.stats().delivered == 20
    provider.shutdown()


def test_what_the_spool_refuses_at_shutdown_stays_as_it_was(service, tmp_path, monkeypatch):
    # Sealed batches stay sealed and the byte count stays true, so the runs are still sent.
    service.faults.update(outage=True)
    clock = FakeClock()
    delivery = _delivery(service.url, clock, spool_dir=str(tmp_path))
    runs = make_runs(120)
    for run in runs[:50]:
        delivery.add(run)
    monkeypatch.setattr(delivery.spool, "write", lambda runs, **_: list(runs))  # the disk refuses all (as on OSError)
    assert delivery.send_next(clock.now() + 1).retry_later and delivery.sealing
    for run in runs[50:]:
        delivery.add(run)  # 50 sealed as they filled a batch, 20 still open at the back
    before = (len(delivery), delivery.bytes_held)
    assert not delivery.spool_all().spooled
    assert (len(delivery), delivery.bytes_held) == before
    assert [type(item).__name__ for item in delivery._backlog] == ["SealedBatch"] * 2 + ["EncodedRun"] * 20
    service.faults.update(outage=False)
    ledger = Ledger()
    ledger.admit(120)
    while (outcome := delivery.send_next(clock.now() + 5)) is not None:
        ledger.record(outcome)
    assert ledger.snapshot().delivered == 120 and delivery.bytes_held == 0
    assert len(service.runs()) == 120 and service.duplicate_posts() == {}
