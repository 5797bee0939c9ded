"""Fail-closed codecs (SPEC §4.1): round trips, field rules, and hostile input."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weft_django.ownership.codec import (
    MAX_ENGINE_ID_LENGTH,
    MAX_EPOCH_EXCLUSIVE,
    HolderRecord,
    MarkerRecord,
    decode_epoch,
    decode_holder,
    decode_holder_row,
    decode_marker,
    decode_marker_row,
    encode_epoch,
    encode_holder,
    encode_marker,
    holder_row_absent,
    is_valid_epoch,
    is_valid_timestamp,
)

engine_ids = st.text(min_size=1, max_size=MAX_ENGINE_ID_LENGTH)
epochs = st.integers(min_value=1, max_value=MAX_EPOCH_EXCLUSIVE - 1)
timestamps = st.integers(min_value=0, max_value=2**53 - 1)
holders = st.builds(
    HolderRecord, engine_id=engine_ids, epoch=epochs, expires_at=timestamps, claimed_at=timestamps
)
markers = st.builds(
    MarkerRecord, mode=st.sampled_from(["lease", "workflow-lease"]), established_at=timestamps
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=30,
)
field_values = st.one_of(
    st.integers(min_value=-3, max_value=3),
    st.integers(min_value=2**53 - 3, max_value=2**53 + 1),
    st.integers(),
    st.booleans(),
    st.floats(),
    st.none(),
    st.text(max_size=3),
    st.text(min_size=MAX_ENGINE_ID_LENGTH, max_size=MAX_ENGINE_ID_LENGTH + 1),
    st.lists(st.integers(), max_size=2),
)
# Every holder key present, each value valid or garbage (about 1 in 16 dicts is
# a valid holder), plus sometimes an extra key that must be ignored.
holder_like = st.fixed_dictionaries(
    {
        "engine_id": engine_ids | field_values,
        "epoch": epochs | field_values,
        "expires_at": timestamps | field_values,
        "claimed_at": timestamps | field_values,
    },
    optional={"x": field_values},
)

GOOD = HolderRecord(engine_id="engine-a", epoch=7, expires_at=2_000, claimed_at=1_000)
GOOD_DICT: dict[str, object] = dataclasses.asdict(GOOD)


def assert_holder_rules(h: HolderRecord) -> None:
    assert type(h.engine_id) is str and 1 <= len(h.engine_id) <= MAX_ENGINE_ID_LENGTH
    assert type(h.epoch) is int and 1 <= h.epoch < MAX_EPOCH_EXCLUSIVE
    for ts in (h.expires_at, h.claimed_at):
        assert type(ts) is int and 0 <= ts < 2**53


# ----------------------------------------------------------------- round trips


@given(holders)
def test_holder_round_trip_every_form(h: HolderRecord) -> None:
    text = encode_holder(h)
    assert decode_holder(text) == h
    assert decode_holder(text.encode()) == h
    assert decode_holder(bytearray(text.encode())) == h
    assert decode_holder(json.loads(text)) == h
    assert decode_holder_row(h.engine_id, h.epoch, h.expires_at, h.claimed_at) == h


@given(markers)
def test_marker_round_trip_every_form(m: MarkerRecord) -> None:
    text = encode_marker(m)
    assert decode_marker(text) == m
    assert decode_marker(text.encode()) == m
    assert decode_marker(json.loads(text)) == m
    assert decode_marker_row(m.mode, m.established_at) == m


@given(epochs)
def test_epoch_round_trip(n: int) -> None:
    raw = encode_epoch(n)
    assert len(raw) == 8
    assert decode_epoch(raw) == n
    assert decode_epoch(bytearray(raw)) == n
    assert decode_epoch(memoryview(raw)) == n


def test_holder_encoding_is_compact_and_ordered() -> None:
    expected = '{"engine_id":"engine-a","epoch":7,"expires_at":2000,"claimed_at":1000}'
    assert encode_holder(GOOD) == expected
    expected = '{"mode":"workflow-lease","established_at":5}'
    assert encode_marker(MarkerRecord("workflow-lease", 5)) == expected


def test_epoch_bytes_are_big_endian() -> None:
    assert encode_epoch(1) == b"\x00" * 7 + b"\x01"
    assert encode_epoch(0x0102030405060708) == bytes(range(1, 9))
    assert encode_epoch(0) == b"\x00" * 8
    assert encode_epoch(2**64 - 1) == b"\xff" * 8


# ------------------------------------------------------------------ boundaries


@pytest.mark.parametrize(
    ("epoch", "ok"),
    [(1, True), (0, False), (-1, False), (2**53 - 2, True), (2**53 - 1, False), (2**60, False)],
)
def test_epoch_boundaries(epoch: int, ok: bool) -> None:
    assert is_valid_epoch(epoch) is ok
    if epoch >= 0:
        assert (decode_epoch(encode_epoch(epoch)) == epoch) is ok
    assert (decode_holder({**GOOD_DICT, "epoch": epoch}) is not None) is ok
    assert (decode_holder_row("e", epoch, 1, 1) is not None) is ok
    if ok:
        encode_holder(HolderRecord("e", epoch, 1, 1))
    else:
        with pytest.raises(ValueError, match="epoch"):
            encode_holder(HolderRecord("e", epoch, 1, 1))


@pytest.mark.parametrize(
    ("ts", "ok"), [(0, True), (2**53 - 1, True), (2**53, False), (-1, False), (10**20, False)]
)
def test_timestamp_boundaries(ts: int, ok: bool) -> None:
    assert is_valid_timestamp(ts) is ok
    for field in ("expires_at", "claimed_at"):
        assert (decode_holder({**GOOD_DICT, field: ts}) is not None) is ok
    assert (decode_marker({"mode": "lease", "established_at": ts}) is not None) is ok
    assert (decode_marker_row("lease", ts) is not None) is ok


def test_decode_epoch_rejects_wrong_length_zero_and_out_of_range() -> None:
    for size in (0, 1, 7, 9, 16):
        assert decode_epoch(b"\x01" * size) is None
    assert decode_epoch(b"\x00" * 8) is None
    assert decode_epoch((2**53 - 1).to_bytes(8, "big")) is None
    assert decode_epoch((2**53 - 2).to_bytes(8, "big")) == 2**53 - 2
    assert decode_epoch(b"\xff" * 8) is None
    assert decode_epoch(None) is None
    assert decode_epoch(cast(Any, "12345678")) is None
    assert decode_epoch(cast(Any, 5)) is None


@pytest.mark.parametrize("bad", [-1, 2**64, True, False, 1.0, "1", None])
def test_encode_epoch_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        encode_epoch(cast(Any, bad))


def test_engine_id_length_limits() -> None:
    at_limit = "e" * MAX_ENGINE_ID_LENGTH
    assert decode_holder({**GOOD_DICT, "engine_id": at_limit}) is not None
    assert decode_holder({**GOOD_DICT, "engine_id": at_limit + "e"}) is None
    assert decode_holder({**GOOD_DICT, "engine_id": ""}) is None
    with pytest.raises(ValueError, match="engine_id"):
        encode_holder(HolderRecord("", 1, 1, 1))
    with pytest.raises(ValueError, match="engine_id"):
        encode_holder(HolderRecord(at_limit + "e", 1, 1, 1))


# ----------------------------------------------------------- fail-closed rules


_NOT_INTS: list[object] = [True, False, 1.0, 7.0, "7", None, [7], {"v": 7}]
_NOT_STRS: list[object] = [7, 0, True, None, 1.5, ["engine"], {"v": "engine"}]
_WRONG_TYPES = [("engine_id", bad) for bad in _NOT_STRS] + [
    (field, bad) for field in ("epoch", "expires_at", "claimed_at") for bad in _NOT_INTS
]


@pytest.mark.parametrize(("field", "bad"), _WRONG_TYPES)
def test_holder_rejects_wrong_types(field: str, bad: object) -> None:
    assert decode_holder({**GOOD_DICT, field: bad}) is None
    assert decode_holder(json.dumps({**GOOD_DICT, field: bad})) is None


@pytest.mark.parametrize("field", ["engine_id", "epoch", "expires_at", "claimed_at"])
def test_holder_rejects_missing_field(field: str) -> None:
    partial = {k: v for k, v in GOOD_DICT.items() if k != field}
    assert decode_holder(partial) is None
    assert decode_holder(json.dumps(partial)) is None


def test_holder_ignores_extra_fields_and_rejects_camel_case() -> None:
    assert decode_holder({**GOOD_DICT, "extra": [1, 2], "engineId": "x"}) == GOOD
    camel = {"engineId": "engine-a", "epoch": 7, "expiresAt": 2000, "claimedAt": 1000}
    assert decode_holder(camel) is None


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "null",
        "[]",
        '"text"',
        "7",
        "{",
        '{"engine_id":"e","epoch":1.0,"expires_at":1,"claimed_at":1}',
        '{"engine_id":"e","epoch":1e0,"expires_at":1,"claimed_at":1}',
        '{"engine_id":"e","epoch":1,"expires_at":NaN,"claimed_at":1}',
        b"\xff\xfe",
        b'{"engine_id":"\xc3"}',
        "\ufeff" + json.dumps(GOOD_DICT),
        "[" * 100_000 + "]" * 100_000,
        '{"engine_id":"e","epoch":' + "9" * 5000 + ',"expires_at":1,"claimed_at":1}',
    ],
)
def test_holder_malformed_json_is_none(raw: object) -> None:
    assert decode_holder(cast(Any, raw)) is None
    assert decode_marker(cast(Any, raw)) is None


@pytest.mark.parametrize("raw", [7, 7.5, ["a"], ("a",), {1, 2}, object(), memoryview(b"{}")])
def test_decoders_reject_unexpected_input_types(raw: object) -> None:
    assert decode_holder(cast(Any, raw)) is None
    assert decode_marker(cast(Any, raw)) is None


def test_hostile_mapping_is_none() -> None:
    class Hostile(dict[str, object]):
        def get(self, key: str, default: object = None) -> object:
            raise RuntimeError("boom")

    assert decode_holder(Hostile(GOOD_DICT)) is None
    assert decode_marker(Hostile({"mode": "lease", "established_at": 1})) is None


@pytest.mark.parametrize(
    "marker",
    [
        {"mode": "none", "established_at": 1},
        {"mode": "LEASE", "established_at": 1},
        {"mode": "lease", "established_at": -1},
        {"mode": "lease", "established_at": True},
        {"mode": "lease", "established_at": 1.0},
        {"mode": "lease"},
        {"established_at": 1},
        {"mode": ["lease"], "established_at": 1},
    ],
)
def test_marker_rejects(marker: dict[str, object]) -> None:
    assert decode_marker(marker) is None
    assert decode_marker(json.dumps(marker)) is None
    row: Any = (marker.get("mode"), marker.get("established_at"))
    assert decode_marker_row(*row) is None


def test_encode_marker_rejects_invalid() -> None:
    with pytest.raises(ValueError, match="mode"):
        encode_marker(MarkerRecord(cast(Any, "none"), 1))
    with pytest.raises(ValueError, match="established_at"):
        encode_marker(MarkerRecord("lease", -1))
    with pytest.raises(ValueError):
        encode_marker(cast(Any, {"mode": "lease", "established_at": 1}))


@pytest.mark.parametrize(
    "record",
    [
        HolderRecord("e", True, 1, 1),
        HolderRecord("e", 1, 1.0, 1),  # type: ignore[arg-type]
        HolderRecord("e", 1, 1, -5),
        HolderRecord(cast(Any, 5), 1, 1, 1),
    ],
)
def test_encode_holder_rejects_invalid(record: HolderRecord) -> None:
    with pytest.raises(ValueError):
        encode_holder(record)


# -------------------------------------------------------------------- row form


def test_holder_row_absent_only_when_all_three_null() -> None:
    assert holder_row_absent(None, None, None) is True
    assert holder_row_absent("e", None, None) is False
    assert holder_row_absent(None, 1, None) is False
    assert holder_row_absent(None, None, 1) is False
    assert holder_row_absent("", 0, 0) is False


@pytest.mark.parametrize(
    "cols",
    [
        (None, 0, None, None),
        (None, 5, None, None),
        ("e", 5, None, None),
        ("e", 5, 10, None),
        ("e", 5, None, 10),
        (None, 5, 10, 10),
        ("e", 0, 10, 10),
        ("e", None, 10, 10),
        ("", 5, 10, 10),
        ("e", 5, -1, 10),
        ("e", True, 10, 10),
    ],
)
def test_holder_row_rejects(cols: tuple[Any, Any, Any, Any]) -> None:
    assert decode_holder_row(*cols) is None


def test_full_rows_decode() -> None:
    assert decode_holder_row("engine-a", 7, 2000, 1000) == GOOD
    assert decode_marker_row("lease", 0) == MarkerRecord("lease", 0)
    assert decode_marker_row(None, None) is None
    assert decode_marker_row("lease", None) is None
    assert decode_marker_row(None, 5) is None


# ------------------------------------------------- properties over random input


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_random_bytes_and_text_never_raise(raw: bytes | str) -> None:
    h = decode_holder(raw)
    assert h is None or decode_holder(encode_holder(h)) == h
    m = decode_marker(raw)
    assert m is None or decode_marker(encode_marker(m)) == m
    if isinstance(raw, bytes):
        v = decode_epoch(raw)
        assert v is None or (len(raw) == 8 and is_valid_epoch(v))


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_random_json_values_never_raise(value: object) -> None:
    for form in (value, json.dumps(value), json.dumps(value).encode()):
        h = decode_holder(cast(Any, form))
        if h is not None:
            assert_holder_rules(h)
        m = decode_marker(cast(Any, form))
        if m is not None:
            assert m.mode in ("lease", "workflow-lease") and is_valid_timestamp(m.established_at)


@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(holder_like)
def test_holder_shaped_dicts_accepted_only_when_valid(obj: dict[str, object]) -> None:
    h = decode_holder(obj)
    expected_ok = (
        isinstance(obj.get("engine_id"), str)
        and 1 <= len(cast(str, obj["engine_id"])) <= MAX_ENGINE_ID_LENGTH
        and is_valid_epoch(obj.get("epoch"))
        and is_valid_timestamp(obj.get("expires_at"))
        and is_valid_timestamp(obj.get("claimed_at"))
    )
    assert (h is not None) is expected_ok
    if h is not None:
        assert_holder_rules(h)
        assert decode_holder(encode_holder(h)) == h


@settings(max_examples=500)
@given(*(valid | field_values for valid in (engine_ids, epochs, timestamps, timestamps)))
def test_random_rows_never_raise(a: Any, b: Any, c: Any, d: Any) -> None:
    h = decode_holder_row(a, b, c, d)
    assert h == decode_holder({"engine_id": a, "epoch": b, "expires_at": c, "claimed_at": d})
    if h is not None:
        assert_holder_rules(h)
        assert not holder_row_absent(a, c, d)


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_encode_epoch_range(n: int) -> None:
    if 0 <= n < 2**64:
        assert int.from_bytes(encode_epoch(n), "big") == n
    else:
        with pytest.raises(ValueError):
            encode_epoch(n)
    assert is_valid_epoch(n) is (1 <= n < MAX_EPOCH_EXCLUSIVE)
