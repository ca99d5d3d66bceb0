"""The id and dotted_order rules (spec 2.3), as pure properties."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_runs_exporter._ids import (
    DEFAULT_SCHEME,
    MAX_DEPTH,
    MAX_DOTTED_ORDER_CHARS,
    SCHEMES,
    DottedOrderTooDeep,
    GivenIds,
    GivenIdsError,
    child_ids,
    continued_ids,
    format_entry,
    ids_from_dotted_order,
    given_run_ids,
    make_run_id,
    parse_dotted_order,
    root_ids,
    run_id_otlp,
    run_id_str,
    run_id_v7,
)

trace_ids = st.integers(min_value=1, max_value=2**128 - 1)
span_ids = st.integers(min_value=1, max_value=2**64 - 1)
# 2001 .. 2100, nanoseconds
times = st.integers(min_value=978_307_200 * 10**9, max_value=4_102_444_800 * 10**9)


@given(trace_ids, span_ids, times)
def test_v7_is_a_deterministic_uuid7_carrying_the_start_time(trace_id, span_id, start):
    rid = run_id_v7(trace_id, span_id, start)
    assert rid == run_id_v7(trace_id, span_id, start)
    assert rid.version == 7 and rid.variant == "specified in RFC 4122"
    assert rid.int >> 80 == start // 1_000_000  # unix milliseconds in the top 48 bits
    sub_ms = (rid.int >> 64) & 0xFFF
    assert sub_ms == ((start // 1000) % 1000) * 4096 // 1000


@given(trace_ids, span_ids, times, times)
def test_v7_ids_sort_by_start_time(trace_id, span_id, t1, t2):
    a, b = run_id_v7(trace_id, span_id, t1), run_id_v7(trace_id, span_id + 1 if span_id < 2**64 - 1 else 1, t2)
    if t1 // 1000 < t2 // 1000:
        # Microsecond precision: 4096 steps per millisecond can merge two microseconds, never reorder them.
        assert a.int >> 64 <= b.int >> 64


def test_v7_differs_across_traces_and_spans():
    start = 1_700_000_000_000_000_000
    ids = {run_id_v7(t, s, start) for t in range(1, 30) for s in range(1, 30)}
    assert len(ids) == 29 * 29


def test_otlp_scheme_right_aligns_the_span_id():
    assert run_id_otlp(5, 0xABCDEF, 0) == UUID("00000000-0000-0000-0000-000000abcdef")
    assert make_run_id("otlp", 5, 0xABCDEF, 0) == run_id_otlp(5, 0xABCDEF, 0)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@given(trace_ids, span_ids, times)
def test_every_scheme_gives_the_same_id_as_a_string_and_as_a_uuid(scheme, trace_id, span_id, start):
    """The hot path's string (no UUID object) and the UUID agree, for every row of the one table."""
    assert run_id_str(SCHEMES[scheme], trace_id, span_id, start) == str(make_run_id(scheme, trace_id, span_id, start))


def test_the_table_is_the_one_the_setting_and_the_hot_path_read():
    """The setting accepts exactly the table's names, and the options carry the chosen row."""
    from otel_runs_exporter import ConfigError
    from otel_runs_exporter._convert import ConvertOptions
    from otel_runs_exporter._settings import resolve

    assert DEFAULT_SCHEME in SCHEMES and resolve(env={}).id_scheme == DEFAULT_SCHEME
    assert ConvertOptions().id_scheme is SCHEMES[DEFAULT_SCHEME]
    for name, rule in SCHEMES.items():
        settings = resolve(env={"OTEL_EXPORTER_RUNS_ID_SCHEME": name.upper()})
        assert ConvertOptions.from_settings(settings).id_scheme is rule
    with pytest.raises(ConfigError, match="one of " + ", ".join(SCHEMES)):
        resolve({"id_scheme": "v4"}, env={})


def test_entry_format_is_the_spec_layout():
    rid = "018bcfe5-68e3-7000-8000-000000000001"
    assert format_entry(1_700_000_000_000_001_999, rid) == "20231114T221320000001Z" + rid


@given(st.lists(st.tuples(span_ids, times), min_size=1, max_size=12))
def test_dotted_order_chain_follows_the_rules(chain):
    """trace_id = first UUID, parent = UUID before last, last = own id, times never go back."""
    ids = None
    for span_id, start in chain:
        rid = run_id_v7(7, span_id, start)
        ids = root_ids(rid, start) if ids is None else child_ids(ids, rid, start)
        entries = parse_dotted_order(ids.dotted_order)
        assert str(entries[0][1]) == ids.trace_id
        assert str(entries[-1][1]) == ids.run_id
        if len(entries) > 1:
            assert str(entries[-2][1]) == ids.parent_run_id
        else:
            assert ids.parent_run_id is None
        stamps = [t for t, _ in entries]
        assert stamps == sorted(stamps)
        assert ids.depth == len(entries)
        # start_time always matches its own entry
        assert format_entry(ids.start_time_ns, ids.run_id) == ids.dotted_order.split(".")[-1]


def test_child_that_starts_before_its_parent_is_raised_to_the_parent_start():
    parent = root_ids(run_id_v7(1, 1, 2_000_000_000_000), 2_000_000_000_000)
    child = child_ids(parent, run_id_v7(1, 2, 1_000_000_000_000), 1_000_000_000_000)
    assert child.start_time_ns == parent.start_time_ns
    assert child.dotted_order.split(".")[1].startswith(parent.dotted_order[:22])


def test_parse_rejects_bad_entries_with_a_reason():
    import pytest

    from otel_runs_exporter._ids import DottedOrderError

    for bad in ("", "20231114T221320Z018bcfe5-68e3-7000-8000-000000000001", "20231114T221320000001Z123"):
        with pytest.raises(DottedOrderError, match="dotted_order|entry"):
            parse_dotted_order(bad)


def _chain_to(depth: int, start: int = 1_700_000_000_000_000_000):
    ids = root_ids(run_id_v7(3, 1, start), start)
    for span_id in range(2, depth + 1):
        ids = child_ids(ids, run_id_v7(3, span_id, start + span_id), start + span_id)
    return ids


def test_a_dotted_order_past_the_depth_limit_is_refused_before_it_is_read():
    deepest = _chain_to(MAX_DEPTH)
    assert len(deepest.dotted_order) == MAX_DOTTED_ORDER_CHARS  # the longest there is: the limit is exact
    assert len(parse_dotted_order(deepest.dotted_order)) == MAX_DEPTH
    assert ids_from_dotted_order(deepest.dotted_order).depth == MAX_DEPTH
    entry = deepest.dotted_order.split(".")[-1]
    with pytest.raises(DottedOrderTooDeep, match=f"{MAX_DEPTH + 1} entries .* the limit is {MAX_DEPTH} entries"):
        parse_dotted_order(deepest.dotted_order + "." + entry)
    # The 18.9 MB value (320k entries): refused on its length, by counting, not by parsing each entry.
    with pytest.raises(DottedOrderTooDeep, match=f"320000 entries \\(18879999 characters\\); the limit is {MAX_DEPTH}"):
        parse_dotted_order(".".join([entry] * 320_000))


def test_a_run_under_a_parent_at_the_depth_limit_starts_a_new_trace_naming_it():
    parent = _chain_to(MAX_DEPTH)._replace(project="elsewhere")
    start = parent.start_time_ns - 5  # as a root it keeps its own start: there is no parent entry to follow
    rid = str(run_id_v7(3, 999, start))
    ids = continued_ids(parent, rid, start)
    assert ids.run_id == ids.trace_id == rid and ids.parent_run_id is None and ids.depth == 1
    assert ids.dotted_order == format_entry(start, rid) and ids.start_time_ns == start
    assert ids.depth_limit_parent == (parent.run_id, parent.trace_id) and ids.project == "elsewhere"
    # its children continue the new trace
    assert child_ids(ids, run_id_v7(3, 1000, start), start).depth == 2


# --- ids given by the langsmith.* attributes ------------------------------------------

ROOT = "018bcfe5-68e3-7000-8000-000000000001"
MID = "018bcfe5-68e3-7000-8000-000000000002"
OWN = "018bcfe5-68e3-7000-8000-000000000003"
T0, T1, T2 = "20231114T221320000001Z", "20231114T221320000500Z", "20231114T221321123456Z"
GIVEN_DOTTED = f"{T0}{ROOT}.{T1}{MID}.{T2}{OWN}"
# What we would have computed without the attributes: a root of its own tree.
COMPUTED = root_ids(run_id_v7(9, 9, 1_800_000_000_000_000_000), 1_800_000_000_000_000_000)


def test_a_given_dotted_order_places_the_run_and_sets_its_start():
    ids = given_run_ids(GivenIds(trace_id=ROOT, span_id=OWN, parent_id=MID, dotted_order=GIVEN_DOTTED), COMPUTED)
    assert ids[:5] == (OWN, ROOT, MID, GIVEN_DOTTED, 1_700_000_001_123_456_000) and ids.project is None
    # start_time must be the run's own entry (the service checks it), whatever the span's clock said
    assert format_entry(ids.start_time_ns, ids.run_id) == GIVEN_DOTTED.split(".")[-1]


def test_the_dotted_order_alone_is_enough_and_ids_are_made_canonical():
    shouted = f"{T0}{ROOT.upper()}.{T1}{MID.upper()}.{T2}{OWN.upper()}"
    ids = given_run_ids(GivenIds(dotted_order=shouted), COMPUTED)
    assert (ids.run_id, ids.trace_id, ids.parent_run_id, ids.dotted_order) == (OWN, ROOT, MID, GIVEN_DOTTED)
    root = given_run_ids(GivenIds(span_id=ROOT.replace("-", ""), dotted_order=f"{T0}{ROOT}", parent_id=""), COMPUTED)
    assert (root.run_id, root.trace_id, root.parent_run_id) == (ROOT, ROOT, None)


def test_children_of_a_given_run_extend_its_dotted_order():
    ids = given_run_ids(GivenIds(dotted_order=GIVEN_DOTTED), COMPUTED)
    child = child_ids(ids, run_id_v7(1, 2, 0), 0)  # a child clock behind the given start is raised to it
    assert child.dotted_order.startswith(GIVEN_DOTTED + ".") and child.parent_run_id == OWN
    assert child.trace_id == ROOT and child.start_time_ns == ids.start_time_ns


def test_a_span_id_alone_replaces_only_the_run_id():
    root = given_run_ids(GivenIds(span_id=OWN), COMPUTED)
    assert root == root_ids(OWN, COMPUTED.start_time_ns)
    parent = root_ids(ROOT, 1_000)
    computed_child = child_ids(parent, run_id_v7(1, 2, 2_000), 2_000)
    child = given_run_ids(GivenIds(span_id=OWN), computed_child)
    assert (child.run_id, child.trace_id, child.parent_run_id) == (OWN, ROOT, ROOT)
    assert child.dotted_order == parent.dotted_order + "." + format_entry(2_000, OWN)


# A chain we computed: ROOT, then MID, then the span itself (its own id computed, not OWN).
CHAIN_ROOT = root_ids(ROOT, 1_000_000)
CHAIN_MID = child_ids(CHAIN_ROOT, MID, 2_000_000)
COMPUTED_LEAF = child_ids(CHAIN_MID, run_id_v7(3, 3, 3_000_000), 3_000_000)


def test_a_span_id_alone_becomes_the_run_id_and_its_children_extend_it():
    ids = given_run_ids(GivenIds(span_id=OWN), COMPUTED_LEAF)
    assert (ids.run_id, ids.trace_id, ids.parent_run_id) == (OWN, ROOT, MID)
    assert ids.dotted_order == CHAIN_MID.dotted_order + "." + format_entry(3_000_000, OWN)
    child = child_ids(ids, run_id_v7(4, 4, 4_000_000), 4_000_000)
    assert child.parent_run_id == OWN and child.dotted_order.startswith(ids.dotted_order + ".")


def test_a_parent_id_alone_nests_the_run_under_a_run_above_it():
    ids = given_run_ids(GivenIds(parent_id=ROOT.upper()), COMPUTED_LEAF)
    assert (ids.run_id, ids.trace_id, ids.parent_run_id) == (COMPUTED_LEAF.run_id, ROOT, ROOT)
    assert ids.dotted_order == CHAIN_ROOT.dotted_order + "." + format_entry(3_000_000, COMPUTED_LEAF.run_id)
    assert ids.start_time_ns == COMPUTED_LEAF.start_time_ns
    # Its own parent is no news: the computed ids stand as they are.
    assert given_run_ids(GivenIds(parent_id=MID), COMPUTED_LEAF) is COMPUTED_LEAF
    # With a given run id as well.
    both = given_run_ids(GivenIds(span_id=OWN, parent_id=ROOT), COMPUTED_LEAF)
    assert (both.run_id, both.parent_run_id) == (OWN, ROOT)
    assert both.dotted_order == CHAIN_ROOT.dotted_order + "." + format_entry(3_000_000, OWN)


def test_a_trace_id_alone_is_honoured_when_it_is_the_runs_trace():
    assert given_run_ids(GivenIds(trace_id=ROOT), COMPUTED_LEAF) is COMPUTED_LEAF
    # A root with a given run id is its own trace, so that trace id agrees too.
    root = given_run_ids(GivenIds(trace_id=OWN, span_id=OWN), COMPUTED)
    assert (root.run_id, root.trace_id, root.parent_run_id) == (OWN, OWN, None)
    moved = given_run_ids(GivenIds(trace_id=ROOT, parent_id=ROOT), COMPUTED_LEAF)
    assert (moved.trace_id, moved.parent_run_id) == (ROOT, ROOT)


def test_the_project_stays_with_a_run_placed_in_its_known_tree():
    above = CHAIN_MID._replace(project="p")
    leaf = child_ids(above, run_id_v7(3, 3, 3_000_000), 3_000_000)
    assert (leaf.project, leaf.project_id) == ("p", None)
    assert given_run_ids(GivenIds(span_id=OWN, parent_id=ROOT), leaf).project == "p"
    assert given_run_ids(GivenIds(dotted_order=GIVEN_DOTTED), leaf).project is None  # placed elsewhere


def test_nothing_given_keeps_the_computed_ids():
    assert given_run_ids(GivenIds(), COMPUTED) is COMPUTED
    assert given_run_ids(GivenIds("", "", "", ""), COMPUTED) is COMPUTED


@pytest.mark.parametrize(
    ("given", "attribute", "reason"),
    [
        (GivenIds(span_id="run-7"), "langsmith.span.id", "not a UUID"),
        (GivenIds(span_id=12345), "langsmith.span.id", "not a UUID"),
        (GivenIds(dotted_order="not-a-dotted-order"), "langsmith.span.dotted_order", "entry 0"),
        (GivenIds(dotted_order=7), "langsmith.span.dotted_order", "not a string"),
        (GivenIds(span_id=MID, dotted_order=GIVEN_DOTTED), "langsmith.span.dotted_order", "last entry"),
        (GivenIds(trace_id=MID, dotted_order=GIVEN_DOTTED), "langsmith.trace.id", "first id"),
        (GivenIds(trace_id="t", dotted_order=GIVEN_DOTTED), "langsmith.trace.id", "not a UUID"),
        (GivenIds(parent_id=ROOT, dotted_order=GIVEN_DOTTED), "langsmith.span.parent_id", "entry before the last"),
        (GivenIds(parent_id=ROOT, dotted_order=f"{T0}{OWN}"), "langsmith.span.parent_id", "root"),
        (GivenIds(parent_id=MID, span_id=OWN), "langsmith.span.parent_id", "needs langsmith.span.dotted_order"),
        (GivenIds(parent_id=MID), "langsmith.span.parent_id", "not a run this span is known to be under"),
        (GivenIds(parent_id=OWN, span_id=OWN), "langsmith.span.parent_id", "own id"),
        (GivenIds(parent_id="p-1"), "langsmith.span.parent_id", "not a UUID"),
        (GivenIds(trace_id=ROOT, span_id=OWN), "langsmith.trace.id", "needs langsmith.span.dotted_order"),
        (GivenIds(trace_id=ROOT), "langsmith.trace.id", "is not the trace the run is in"),
        (GivenIds(trace_id=7), "langsmith.trace.id", "not a UUID"),
        (GivenIds(dotted_order=f"{T1}{ROOT}.{T0}{OWN}"), "langsmith.span.dotted_order", "earlier"),
        # A run its own ancestor: the service refused it and its valid children with it.
        (GivenIds(dotted_order=f"{T0}{OWN}.{T1}{OWN}"), "langsmith.span.dotted_order", "repeats the id"),
    ],
)
def test_unusable_ids_are_refused_naming_the_attribute(given, attribute, reason):
    with pytest.raises(GivenIdsError, match=reason) as caught:
        given_run_ids(given, COMPUTED)
    assert caught.value.attribute == attribute and str(caught.value).startswith(attribute)


@given(st.lists(st.tuples(span_ids, times), min_size=1, max_size=8, unique_by=lambda link: link[0]))
def test_given_ids_round_trip_any_chain_we_build(chain):
    """Ids we computed, handed back as attributes, give the same RunIds (to the microsecond of the entries)."""
    ids = None
    for span_id, start in chain:
        rid = run_id_v7(7, span_id, start)
        ids = root_ids(rid, start) if ids is None else child_ids(ids, rid, start)
    given = GivenIds(ids.trace_id, ids.run_id, ids.parent_run_id, ids.dotted_order)
    assert given_run_ids(given, COMPUTED) == ids._replace(start_time_ns=ids.start_time_ns // 1000 * 1000)


def test_ids_given_alone_never_put_a_run_above_itself():
    with pytest.raises(GivenIdsError, match="a run above this one") as caught:
        given_run_ids(GivenIds(span_id=MID), COMPUTED_LEAF)
    assert caught.value.attribute == "langsmith.span.id"
    with pytest.raises(GivenIdsError, match="the run's own id"):
        given_run_ids(GivenIds(parent_id=COMPUTED_LEAF.run_id), COMPUTED_LEAF)  # itself, as computed
