"""The claim protocol of SPEC §4 — fenced per-workflow ownership.

This package depends on the models, the settings and a clock, never on the
workflow runtime above it: the engine is seen through the small
``OwnershipHost`` protocol (``host.py``). Read it top to bottom:
``codec`` → ``transitions`` (pure) → ``batch`` (the one executor) →
``registry`` / ``cooldown`` → ``fence`` / ``fold`` / ``guard`` → ``gates`` →
``lease`` → ``metrics``.
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
