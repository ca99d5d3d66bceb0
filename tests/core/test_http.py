"""The HTTP client's retry matrix (the table in ``_http_client``'s docstring), on a scripted network.

No socket: ``core.network.ScriptedNetwork`` answers, a ``FakeClock`` takes the
waits. ``test_transport.py`` pins the same rows against the real local service.
"""

from __future__ import annotations

import doctest
import threading
import time
from email.utils import formatdate

import pytest
import requests

from core.network import ScriptedNetwork, answer
from otel_runs_exporter import _http_client as _http
from otel_runs_exporter._clock import FakeClock
from otel_runs_exporter._http_client import BODY_LIMIT, Backoff, HttpClient, RetryLater

BASE = "http://service.test/api"


def client(network: ScriptedNetwork, **kwargs) -> tuple[HttpClient, FakeClock]:
    clock = kwargs.pop("clock", FakeClock())
    return HttpClient(network, BASE, timeout_s=10.0, clock=clock, **kwargs), clock


def test_doctests():
    assert doctest.testmod(_http).failed == 0


def test_a_request_reaches_the_network_as_given():
    net = ScriptedNetwork.replies(200)
    http, _ = client(net)
    resp = http.request("POST", "/runs", 60.0, body=b"{}", headers={"Content-Type": "application/json"}, params={"a": 1})
    assert resp.status_code == 200
    (sent,) = net.requests
    assert (sent.method, sent.url, sent.body, dict(sent.headers), sent.params) == (
        "POST",
        BASE + "/runs",
        b"{}",
        {"Content-Type": "application/json"},
        {"a": 1},
    )
    assert sent.timeout == 10.0 and not sent.stream
    assert (http.counts.requests, http.counts.failed, http.counts.retried) == (1, 0, 0)


@pytest.mark.parametrize("failure", [408, 429, 500, 502, 503, 504, 599, requests.ConnectionError(), requests.Timeout()])
def test_what_is_worth_retrying_is_retried_with_equal_jitter(failure):
    net = ScriptedNetwork.replies(failure, failure, failure)
    http, clock = client(net)
    assert http.request("GET", "/x", 600.0).status_code == 202
    assert len(net.requests) == 4 and http.counts.retried == 3
    for attempt, wait in enumerate(clock.waits):
        step = Backoff().step(attempt)
        assert step / 2 <= wait <= step, (attempt, wait)


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422, 501])
def test_other_answers_are_returned_for_the_caller_to_judge(status):
    net = ScriptedNetwork.replies(status)
    http, clock = client(net)
    assert http.request("POST", "/x", 600.0).status_code == status
    assert len(net.requests) == 1 and clock.waits == [] and http.counts.failed == 1


def test_retry_after_in_seconds_and_as_a_date_is_a_floor_on_the_wait():
    in_a_minute = formatdate(timeval=time.time() + 60, usegmt=True)
    net = ScriptedNetwork.replies(answer(503, headers={"Retry-After": "20"}), answer(429, headers={"Retry-After": in_a_minute}))
    http, clock = client(net)
    assert http.request("GET", "/x", 600.0).status_code == 202
    assert clock.waits[0] == 20.0 and 58 <= clock.waits[1] <= 60


def test_429_backs_off_even_without_retry_after_and_every_wait_is_capped():
    net = ScriptedNetwork.replies(429, answer(503, headers={"Retry-After": str(10**9)}))
    http, clock = client(net, max_wait_s=30.0)
    assert http.request("GET", "/x", 600.0).status_code == 202
    assert 0.25 <= clock.waits[0] <= 0.5 and clock.waits[1] == 30.0
    assert http.counts.throttled == 1 and http.slow_downs == 1


def test_at_the_deadline_the_last_answer_comes_back_with_retry_later():
    net = ScriptedNetwork(lambda request: answer(503, headers={"Retry-After": "4"}))
    http, clock = client(net)
    with pytest.raises(RetryLater) as info:
        http.request("GET", "/x", 10.0)
    assert info.value.response is not None and info.value.response.status_code == 503
    assert not info.value.interrupted and clock.waits == [4.0, 4.0] and clock.now() < 10.0


def test_a_backoff_past_the_deadline_gets_one_last_try_just_before_it():
    net = ScriptedNetwork.replies(500)
    http, clock = client(net, backoff=Backoff(base_s=30.0, max_s=30.0))
    assert http.request("GET", "/x", 10.0).status_code == 202
    assert clock.waits == [10.0 - Backoff.last_try_margin_s]


def test_an_answer_then_only_timeouts_up_to_the_deadline_still_gives_that_answer():
    """The last try starts just before the deadline and may be cut short by it: the caller is told the
    last answer the call got (the API client's ServerError), not that nothing ever answered."""
    calls = []

    def first_503_then_timeouts(request):
        calls.append(request)
        if len(calls) == 1:
            return answer(503)
        raise requests.Timeout("read timed out")

    net = ScriptedNetwork(first_503_then_timeouts)
    http, _ = client(net)
    with pytest.raises(RetryLater) as info:
        http.request("GET", "/x", 10.0)
    assert info.value.response is not None and info.value.response.status_code == 503
    assert len(calls) > 2 and not info.value.interrupted


def test_no_answer_at_the_deadline_is_retry_later_without_a_response():
    def refused(request):
        raise requests.ConnectionError("connection refused")

    net = ScriptedNetwork(refused)
    http, _ = client(net)
    with pytest.raises(RetryLater) as info:
        http.request("GET", "/x", 10.0)
    assert info.value.response is None and len(net.requests) > 1


def test_the_backoff_is_kept_between_calls_and_reset_by_a_success():
    # A caller that comes back after RetryLater does not start the schedule over.
    net = ScriptedNetwork.replies(503, 503)
    http, clock = client(net)
    with pytest.raises(RetryLater):
        http.request("GET", "/x", clock.now() + 0.2)  # the first wait (0.25-0.5 s) passes this deadline
    assert len(net.requests) == 1 and clock.waits == []
    assert http.request("GET", "/x", clock.now() + 60).status_code == 202
    first, second = clock.waits
    assert 0.25 <= first <= 0.5  # the wait the first call could not take, taken before any request
    assert 0.5 <= second <= 1.0  # then the schedule's second step, not its first again
    assert http.request("GET", "/x", clock.now() + 60).status_code == 202 and len(clock.waits) == 2


def test_a_paced_429_comes_back_at_once_and_its_retry_after_holds_the_next_request():
    net = ScriptedNetwork.replies(answer(429, headers={"Retry-After": "7"}))
    http, clock = client(net)
    with pytest.raises(RetryLater) as info:
        http.request("POST", "/x", 60.0, paced=True)
    assert info.value.response.status_code == 429 and clock.waits == []
    assert http.slow_downs == 1 and http.slow_down_wait_s == 7.0
    assert http.request("POST", "/x", 60.0).status_code == 202 and clock.waits == [7.0]


def test_an_answer_saying_no_request_is_left_is_a_slow_down_too():
    net = ScriptedNetwork.replies(answer(202, headers={"RateLimit": '"runs";r=0;t=3'}))
    http, _ = client(net)
    assert http.request("POST", "/x", 60.0).status_code == 202
    assert http.slow_downs == 1 and http.slow_down_wait_s == 3.0


def test_without_retry_a_retryable_answer_is_returned_and_no_answer_is_retry_later_at_once():
    http, clock = client(ScriptedNetwork.replies(503))
    assert http.request("POST", "/x", 60.0, retry=False).status_code == 503
    net = ScriptedNetwork.replies(requests.ConnectionError())
    http, clock = client(net)
    with pytest.raises(RetryLater):
        http.request("POST", "/x", 60.0, retry=False)
    assert len(net.requests) == 1 and clock.waits == []


def test_the_wake_event_cuts_a_backoff_wait_short():
    wake = threading.Event()
    net = ScriptedNetwork.replies(503)
    http, _ = client(net, wake=wake)
    wake.set()
    with pytest.raises(RetryLater) as info:
        http.request("GET", "/x", 60.0)
    assert info.value.interrupted and len(net.requests) == 1


def test_redirects_are_followed_within_the_origin_only():
    same = answer(307, headers={"Location": "/api/v2/runs?x=1"})
    elsewhere = answer(302, headers={"Location": "https://other.test/steal"})
    net = ScriptedNetwork.replies(same, elsewhere)
    http, _ = client(net)
    assert http.request("POST", "/runs", 60.0, body=b"b", params={"p": 1}).status_code == 302  # not followed
    assert [(r.url, r.params, r.body) for r in net.requests] == [
        (BASE + "/runs", {"p": 1}, b"b"),
        ("http://service.test/api/v2/runs?x=1", None, b"b"),  # the Location carries its own query
    ]


def test_a_redirect_loop_ends_after_five():
    net = ScriptedNetwork(lambda request: answer(308, headers={"Location": request.url + "/again"}))
    http, _ = client(net)
    assert http.request("GET", "/x", 60.0).status_code == 308 and len(net.requests) == 6


def test_a_bounded_read_keeps_a_small_body_whole_and_cuts_a_large_one():
    net = ScriptedNetwork.replies(answer(422, b"why"), answer(400, b"x" * (BODY_LIMIT * 4)))
    http, _ = client(net)
    small = http.request_bounded("POST", "/x", 60.0)
    large = http.request_bounded("POST", "/x", 60.0)
    assert (small.status_code, small.body, small.truncated) == (422, b"why", False)
    assert (large.status_code, len(large.body), large.truncated) == (400, BODY_LIMIT, True)
    assert all(r.stream for r in net.requests)


def test_the_client_closes_its_network():
    net = ScriptedNetwork.replies()
    http, _ = client(net)
    http.close()
    assert net.closed


def test_the_schedule_is_the_retry_backoff_setting_or_the_default():
    from otel_runs_exporter import ConfigError
    from otel_runs_exporter._http_client import backoff_of
    from otel_runs_exporter._settings import resolve

    assert backoff_of(resolve({}, env={})) == Backoff() == Backoff(0.5, 30.0)
    assert backoff_of(resolve({"retry_backoff": (0.01, 0.2)}, env={})) == Backoff(0.01, 0.2)
    assert backoff_of(resolve({"retry_backoff": "1,60"}, env={})) == Backoff(1.0, 60.0)
    for bad in ("1", "2,1", "0,5", "a,b"):
        with pytest.raises(ConfigError, match="argument retry_backoff"):
            resolve({"retry_backoff": bad}, env={})


# --- at exit: a refused connection gets the exit budget (``HttpClient.at_exit``) ---------------


def refused() -> requests.ConnectionError:
    # As requests raises it: the OS error inside its wrappers.
    return requests.ConnectionError(ConnectionRefusedError(111, "Connection refused"))


def test_at_exit_a_refused_connection_is_retried_only_for_the_exit_budget():
    net = ScriptedNetwork.replies(*[refused()] * 50)
    http, clock = client(net)
    http.at_exit(3.0)
    with pytest.raises(RetryLater):
        http.request("POST", "/runs", 600.0)
    assert 2 <= len(net.requests) and clock.now() <= 3.0 and http.unreachable
    # The budget is spent: the next batch is not tried at all.
    tried = len(net.requests)
    with pytest.raises(RetryLater):
        http.request("POST", "/runs", 600.0)
    assert len(net.requests) == tried


def test_at_exit_without_a_budget_a_refused_request_is_tried_once():
    net = ScriptedNetwork.replies(refused(), refused())
    http, clock = client(net)
    http.at_exit(0.0)
    with pytest.raises(RetryLater):
        http.request("POST", "/runs", 600.0)
    assert len(net.requests) == 1 and clock.waits == []


@pytest.mark.parametrize(
    "failure", [503, requests.ConnectTimeout("timed out"), requests.ConnectionError("connection reset by peer")]
)
def test_at_exit_a_service_that_answers_or_does_not_refuse_keeps_the_whole_deadline(failure):
    net = ScriptedNetwork.replies(*[failure] * 5)
    http, clock = client(net)
    http.at_exit(0.0)
    assert http.request("POST", "/runs", 600.0).status_code == 202
    assert len(net.requests) == 6 and clock.now() > 3.0 and http.unreachable is None


def test_a_refusal_then_an_answer_gets_the_whole_deadline_again():
    net = ScriptedNetwork.replies(refused(), 503, 503, 503, 503)
    http, clock = client(net)
    http.at_exit(1.0)
    assert http.request("POST", "/runs", 600.0).status_code == 202
    assert clock.now() > 1.0


def test_at_exit_a_backoff_grown_against_refusals_is_dropped_for_one_try_at_once():
    net = ScriptedNetwork.replies(*[refused()] * 50)
    http, clock = client(net)
    with pytest.raises(RetryLater):
        http.request("POST", "/runs", 40.0)  # before exit: backing off for the whole deadline
    tried, waited = len(net.requests), len(clock.waits)
    http.at_exit(0.0)
    with pytest.raises(RetryLater):
        http.request("POST", "/runs", clock.now() + 600.0)
    assert len(net.requests) == tried + 1 and len(clock.waits) == waited  # tried at once, not after the backoff
