"""The error a stored payload raises when it cannot be read back.

Invariant protected: a payload that does not decode (tampered ciphertext, a
key no longer configured, a missing blob, a blob whose hash does not match)
is never replaced by a guess and never read as ``None``. The error names the
run and the position (which stored value), never the payload itself, so it
can be logged and recorded on the suspended run.
"""

from __future__ import annotations

from weft_django.errors.base import WeftError, error_class


@error_class
class PayloadUnreadable(WeftError):
    """A stored payload of ``run_id`` at ``position`` could not be decoded."""

    code = "payload_unreadable"
    http_status = 500
    run_id: str
    position: str
    reason: str

    def _message(self) -> str:
        return (
            f"The stored payload of run {self.run_id} at {self.position} cannot be read: "
            f"{self.reason}"
        )


__all__ = ["PayloadUnreadable"]
