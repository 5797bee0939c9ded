"""Fail-closed codecs for the durable ownership records (SPEC §4.1 "Codecs").

Why this module exists: every fencing decision in the claim protocol starts
from a record read back from somewhere we do not control byte for byte -- a
``WorkflowClaim`` row, a JSON document in an API response or a Celery
message, the ``OwnershipModeMarker`` singleton. If a corrupt, foreign or
half-written record could be decoded into *something*, an engine could
believe it holds a claim it does not hold, or fail to notice a mode mismatch.
So every decoder here is **fail-closed**: anything that is not exactly a
well-formed record decodes to ``None`` and no decoder ever raises. Callers
treat ``None`` as "holder undecodable" (a wake is discarded, a takeover may
proceed), never as "holder is me".

The invariant the module protects: ``decode(encode(r)) == r`` for every
record ``r`` the decoder would accept, and the encoders refuse (with
``ValueError``) every record the decoder would reject, so this process never
writes a record that another process would read back as ``None``.

Field rules (shared by the JSON and the typed-row forms):

* ``engine_id``: a ``str`` of 1..``MAX_ENGINE_ID_LENGTH`` characters;
* ``epoch``: an ``int`` (never ``bool``, never ``float`` -- ``1.0`` is
  rejected) with ``1 <= epoch < MAX_EPOCH_EXCLUSIVE`` (``2**53 - 1``, so that
  minting ``epoch + 1`` stays a JavaScript-safe integer, as in weft);
* timestamps (``expires_at``, ``claimed_at``, ``established_at``): integer
  milliseconds with ``0 <= t < 2**53``;
* ``mode``: exactly ``"lease"`` or ``"workflow-lease"``.

The 8-byte big-endian epoch codec exists for byte parity with weft's
``wf-owner-epoch:<id>`` values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeGuard, get_args

__all__ = [
    "MAX_ENGINE_ID_LENGTH",
    "MAX_EPOCH_EXCLUSIVE",
    "MAX_TIMESTAMP_EXCLUSIVE",
    "OWNERSHIP_MARKER_MODES",
    "HolderRecord",
    "MarkerRecord",
    "OwnershipMarkerMode",
    "decode_epoch",
    "decode_holder",
    "decode_holder_row",
    "decode_marker",
    "decode_marker_row",
    "encode_epoch",
    "encode_holder",
    "encode_marker",
    "holder_row_absent",
    "is_valid_engine_id",
    "is_valid_epoch",
    "is_valid_timestamp",
]

MAX_EPOCH_EXCLUSIVE: Final[int] = 2**53 - 1
"""Valid epochs satisfy ``1 <= epoch < MAX_EPOCH_EXCLUSIVE`` (weft's ``MAX_SAFE_INTEGER``)."""

MAX_TIMESTAMP_EXCLUSIVE: Final[int] = 2**53
"""Valid timestamps satisfy ``0 <= t < MAX_TIMESTAMP_EXCLUSIVE`` (safe integers)."""

MAX_ENGINE_ID_LENGTH: Final[int] = 200
"""Longest engine id a record may carry (the width of the ``engine_id`` column)."""

_EPOCH_BYTES: Final[int] = 8
_UINT64_LIMIT: Final[int] = 2**64

OwnershipMarkerMode = Literal["lease", "workflow-lease"]
OWNERSHIP_MARKER_MODES: Final[tuple[OwnershipMarkerMode, ...]] = get_args(OwnershipMarkerMode)

# The exceptions a parse of hostile input can raise: bad UTF-8 / JSON
# (ValueError and its subclasses, including the int-digits limit), absurd
# nesting (RecursionError) and odd input types (TypeError).
_PARSE_ERRORS: Final = (ValueError, RecursionError, TypeError, MemoryError)


@dataclass(frozen=True)
class HolderRecord:
    """The holder of one workflow's claim; compared as a whole in preconditions.

    All times are integer milliseconds of the holding engine's clock.
    """

    engine_id: str
    epoch: int
    expires_at: int
    claimed_at: int


@dataclass(frozen=True)
class MarkerRecord:
    """The store-wide ownership-mode marker stamped by the first fencing engine."""

    mode: OwnershipMarkerMode
    established_at: int


# --------------------------------------------------------------------------
# Field predicates
# --------------------------------------------------------------------------


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def is_valid_epoch(v: object) -> bool:
    """True for an ``int`` (not ``bool``) with ``1 <= v < MAX_EPOCH_EXCLUSIVE``."""
    return _is_int(v) and 1 <= v < MAX_EPOCH_EXCLUSIVE


def is_valid_timestamp(v: object) -> bool:
    """True for an ``int`` (not ``bool``) with ``0 <= v < 2**53`` (milliseconds)."""
    return _is_int(v) and 0 <= v < MAX_TIMESTAMP_EXCLUSIVE


def is_valid_engine_id(v: object) -> bool:
    """True for a non-empty ``str`` of at most ``MAX_ENGINE_ID_LENGTH`` characters."""
    return isinstance(v, str) and 0 < len(v) <= MAX_ENGINE_ID_LENGTH


def _is_valid_mode(v: object) -> TypeGuard[OwnershipMarkerMode]:
    return isinstance(v, str) and v in OWNERSHIP_MARKER_MODES


def _holder_from_fields(
    engine_id: object, epoch: object, expires_at: object, claimed_at: object
) -> HolderRecord | None:
    if not (
        isinstance(engine_id, str)
        and is_valid_engine_id(engine_id)
        and _is_int(epoch)
        and is_valid_epoch(epoch)
        and _is_int(expires_at)
        and is_valid_timestamp(expires_at)
        and _is_int(claimed_at)
        and is_valid_timestamp(claimed_at)
    ):
        return None
    # ``int(...)`` normalises int subclasses (e.g. an IntEnum) to plain ints so
    # the record compares and serialises like one built from JSON.
    return HolderRecord(
        engine_id=str(engine_id),
        epoch=int(epoch),
        expires_at=int(expires_at),
        claimed_at=int(claimed_at),
    )


def _marker_from_fields(mode: object, established_at: object) -> MarkerRecord | None:
    if not (_is_valid_mode(mode) and _is_int(established_at)):
        return None
    if not is_valid_timestamp(established_at):
        return None
    return MarkerRecord(mode=mode, established_at=int(established_at))


# --------------------------------------------------------------------------
# JSON plumbing
# --------------------------------------------------------------------------


def _compact_json(obj: dict[str, object]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _parse_object(raw: object) -> Mapping[str, object] | None:
    """Parse ``raw`` into a JSON object; ``None`` for anything else. Never raises."""
    try:
        if raw is None:
            return None
        if isinstance(raw, Mapping):
            return raw
        if isinstance(raw, bytes | bytearray):
            text = bytes(raw).decode("utf-8")  # strict: invalid UTF-8 -> ValueError
        elif isinstance(raw, str):
            text = raw
        else:
            return None
        parsed = json.loads(text)
    except _PARSE_ERRORS:
        return None
    return parsed if isinstance(parsed, dict) else None


def _get(obj: Mapping[str, object], key: str) -> object:
    """``obj.get(key)`` that tolerates hostile mappings. Missing -> ``None``."""
    try:
        return obj.get(key)
    except Exception:
        return None


# --------------------------------------------------------------------------
# Holder
# --------------------------------------------------------------------------


def encode_holder(h: HolderRecord) -> str:
    """Encode a holder as compact JSON with keys in the order
    ``engine_id, epoch, expires_at, claimed_at``.

    Raises ``ValueError`` if the record would not decode (see module docstring).
    """
    if not isinstance(h, HolderRecord):
        raise ValueError(f"encode_holder expects a HolderRecord, got {type(h).__name__}")
    if not is_valid_engine_id(h.engine_id):
        raise ValueError(
            f"holder engine_id must be a non-empty str of at most {MAX_ENGINE_ID_LENGTH} "
            f"characters, got {h.engine_id!r:.80}"
        )
    if not is_valid_epoch(h.epoch):
        raise ValueError(
            f"holder epoch must be an int with 1 <= epoch < {MAX_EPOCH_EXCLUSIVE}, got {h.epoch!r}"
        )
    for name in ("expires_at", "claimed_at"):
        value = getattr(h, name)
        if not is_valid_timestamp(value):
            raise ValueError(
                f"holder {name} must be an int with 0 <= {name} < 2**53, got {value!r}"
            )
    return _compact_json(
        {
            "engine_id": h.engine_id,
            "epoch": int(h.epoch),
            "expires_at": int(h.expires_at),
            "claimed_at": int(h.claimed_at),
        }
    )


def decode_holder(
    raw: str | bytes | bytearray | Mapping[str, object] | None,
) -> HolderRecord | None:
    """Decode a holder from JSON text/bytes or an already-parsed mapping.

    Fail-closed: ``None`` for anything that is not a well-formed holder.
    Extra keys are ignored. Never raises.
    """
    obj = _parse_object(raw)
    if obj is None:
        return None
    return _holder_from_fields(
        _get(obj, "engine_id"),
        _get(obj, "epoch"),
        _get(obj, "expires_at"),
        _get(obj, "claimed_at"),
    )


def holder_row_absent(engine_id: object, expires_at: object, claimed_at: object) -> bool:
    """True only when all three holder columns of a ``WorkflowClaim`` row are NULL.

    A half-null row is *not* absent: it is corrupt (``decode_holder_row`` gives
    ``None`` for it), and the two cases must stay distinguishable for the wake
    guard's ``holder-absent`` versus ``holder-undecodable`` reasons.
    """
    return engine_id is None and expires_at is None and claimed_at is None


def decode_holder_row(
    engine_id: str | None,
    epoch: int | None,
    expires_at: int | None,
    claimed_at: int | None,
) -> HolderRecord | None:
    """Build the holder from a ``WorkflowClaim`` row's typed columns.

    ``None`` when the holder columns are all NULL (no holder), when only some
    are NULL (corrupt), or when any value breaks the field rules -- including a
    row epoch of 0 ("never claimed") next to a non-NULL holder. Never raises.
    """
    try:
        if holder_row_absent(engine_id, expires_at, claimed_at):
            return None
        return _holder_from_fields(engine_id, epoch, expires_at, claimed_at)
    except Exception:  # pragma: no cover - defensive: hostile __eq__/__len__ etc.
        return None


# --------------------------------------------------------------------------
# Marker
# --------------------------------------------------------------------------


def encode_marker(m: MarkerRecord) -> str:
    """Encode the mode marker as compact JSON ``{"mode":..,"established_at":..}``.

    Raises ``ValueError`` if the record would not decode.
    """
    if not isinstance(m, MarkerRecord):
        raise ValueError(f"encode_marker expects a MarkerRecord, got {type(m).__name__}")
    if not _is_valid_mode(m.mode):
        raise ValueError(
            f"marker mode must be one of {', '.join(OWNERSHIP_MARKER_MODES)}, got {m.mode!r:.80}"
        )
    if not is_valid_timestamp(m.established_at):
        raise ValueError(
            f"marker established_at must be an int with 0 <= established_at < 2**53, "
            f"got {m.established_at!r}"
        )
    return _compact_json({"mode": m.mode, "established_at": int(m.established_at)})


def decode_marker(
    raw: str | bytes | bytearray | Mapping[str, object] | None,
) -> MarkerRecord | None:
    """Decode the mode marker; ``None`` for anything malformed (including an
    unknown mode, which this build could not compare meaningfully). Never raises.
    """
    obj = _parse_object(raw)
    if obj is None:
        return None
    return _marker_from_fields(_get(obj, "mode"), _get(obj, "established_at"))


def decode_marker_row(mode: str | None, established_at: int | None) -> MarkerRecord | None:
    """Build the marker from the ``OwnershipModeMarker`` row's columns. Never raises."""
    try:
        return _marker_from_fields(mode, established_at)
    except Exception:  # pragma: no cover - defensive
        return None


# --------------------------------------------------------------------------
# Epoch (8-byte big-endian, byte parity with weft)
# --------------------------------------------------------------------------


def encode_epoch(n: int) -> bytes:
    """Encode ``n`` as 8 big-endian bytes.

    Any unsigned 64-bit value is accepted (``0`` is the "never claimed" epoch);
    ``ValueError`` for a non-int, a ``bool`` or a value outside ``0..2**64-1``.
    """
    if not _is_int(n):
        raise ValueError(f"epoch must be an int, got {type(n).__name__}")
    if not 0 <= n < _UINT64_LIMIT:
        raise ValueError(f"epoch must satisfy 0 <= epoch <= 2**64 - 1, got {n}")
    return int(n).to_bytes(_EPOCH_BYTES, "big", signed=False)


def decode_epoch(raw: bytes | bytearray | memoryview | None) -> int | None:
    """Decode an 8-byte big-endian epoch.

    ``None`` unless ``raw`` is exactly 8 bytes holding a valid epoch
    (``1 <= v < MAX_EPOCH_EXCLUSIVE``). Never raises.
    """
    try:
        if raw is None:
            return None
        if isinstance(raw, memoryview):
            data = raw.tobytes()
        elif isinstance(raw, bytes | bytearray):
            data = bytes(raw)
        else:
            return None
        if len(data) != _EPOCH_BYTES:
            return None
        value = int.from_bytes(data, "big", signed=False)
    except Exception:  # pragma: no cover - defensive: exotic buffer objects
        return None
    return value if is_valid_epoch(value) else None
