"""A node's identity carries its pool size into the pool processes.

Invariant protected: what a pool process knows of its node (engine id, pool,
size) survives the fork through the environment, and an identity written
before a field existed still reads.
"""

from __future__ import annotations

from weft_django.transports.celery import identity as node_identity


def test_the_identity_carries_the_pool_size_across_the_fork() -> None:
    ident = node_identity.NodeIdentity("e", "n@h", "prefork", 1, concurrency=4)
    assert node_identity.NodeIdentity.from_env(ident.to_env()) == ident
    legacy = '{"e": "e", "n": "n@h", "p": "prefork", "m": 1}'
    parsed = node_identity.NodeIdentity.from_env(legacy)
    assert parsed is not None and parsed.concurrency == 1
