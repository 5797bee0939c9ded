"""The claim protocol of SPEC §4 — fenced per-workflow ownership.

This package is the protocol and only the protocol. It depends on the
models, the settings, the kernel and the vendor seam ``weft_django.db``
(where every hand-written statement lives), never on the workflow
runtime above it: the engine is seen through the small ``OwnershipHost``
protocol (``host.py``). Read it top to bottom:

``codec`` (fail-closed decoding) → ``ops`` (conditions and writes, as data)
→ ``transitions`` (pure builders) → ``batch`` (the one executor) →
``results`` / ``renewal_gate`` → ``registry`` (the claim book, with its
takeover cooldown) → ``fence`` (the one fenced commit) → ``fold`` (acquire with the
enabling write) → ``guard`` (the wake guard) → ``gates`` (start-up) →
``lease`` (store-wide mode) → ``metrics`` (with ``metrics_snapshot``).
Beside the chain: ``slots`` (queue slots fenced by claim generation),
``presence`` (an engine's session as its liveness), ``loss`` and ``host``.
"""

from weft_django.conf import WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER

#: A claim is expired only once ``expires_at + 2 × renew_interval < now``.
WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER = 2
#: A reclaim pass tries a takeover CAS at most this many times per workflow.
TAKEOVER_MAX_ATTEMPTS = 5

__all__ = [
    "TAKEOVER_MAX_ATTEMPTS",
    "WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER",
    "WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER",
]
