"""Payload codecs: CPU per workflow step with ``Encrypt`` on against off, same run.

One process drives workflows of ``STEPS`` activity steps, each step's
activity taking and returning a ~1 KB payload, through an in-process engine
(``WorkflowTestEnvironment``) on PostgreSQL. Rounds alternate plain and
encrypted (``PAYLOAD_CODECS = ["weft_django.codecs.Encrypt"]``) so both see
the same machine load; CPU is this process's (``time.process_time``: client,
engine, activity, codecs; PostgreSQL's own CPU is not counted and is the
same for both but for the larger rows). The headline: encrypted / plain CPU
per step, target <= 1.15.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from benchmarks import common, stats

TARGET = 1.15
STEPS = 20
PAYLOAD = {"customer": "c-123", "lines": [{"sku": f"s{i}", "qty": i} for i in range(40)]}


def _define() -> None:
    from weft_django import activity, workflow

    @activity(name="bench-pl-echo")
    def echo(value: Any) -> Any:
        return value

    @workflow(name="bench-pl-steps")
    def steps(ctx: Any, data: Any) -> Any:
        value = data
        for _ in range(STEPS):
            value = yield ctx.run(echo, value)
        return value


def _round(env: Any, tag: str, runs: int) -> float:
    from weft_django import client

    started = time.process_time()
    for i in range(runs):
        client.start("bench-pl-steps", PAYLOAD, workflow_id=f"pl-{tag}-{i}")
    env.run_until_idle(timeout=600)
    return (time.process_time() - started) / (runs * STEPS)


def _stored_encrypted(workflow_id: str) -> bool:
    """Whether the run's input is stored as a codec envelope (the mode took effect)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT input::text FROM weft_workflowrun WHERE workflow_id = %s", [workflow_id]
        )
        (text,) = cursor.fetchone()
    return "__weft_codec__" in text


def run(quick: bool, publish: bool = True) -> dict[str, Any]:
    machine = common.Machine()
    url = common.bench_url()
    common.ensure_database(url)
    common.setup_django(url)
    common.reset_tables()
    from cryptography.fernet import Fernet
    from django.test import override_settings

    from weft_django.testing import WorkflowTestEnvironment

    _define()
    key = Fernet.generate_key().decode()
    rounds = 4 if quick else 12
    runs = 5 if quick else 20
    plain: list[float] = []
    encrypted: list[float] = []
    for r in range(rounds):
        for mode in ("plain", "encrypt") if r % 2 == 0 else ("encrypt", "plain"):
            weft: dict[str, Any] = {}
            if mode == "encrypt":
                weft = {"PAYLOAD_CODECS": ["weft_django.codecs.Encrypt"], "ENCRYPTION_KEYS": [key]}
            with override_settings(WEFT=weft):
                env = WorkflowTestEnvironment()
                try:
                    per_step = _round(env, f"{mode}-{r}", runs)
                finally:
                    env.close()
                assert _stored_encrypted(f"pl-{mode}-{r}-0") == (mode == "encrypt"), mode
            (plain if mode == "plain" else encrypted).append(per_step * 1000)
        common.reset_tables()
    plain_ms = stats.percentile(plain, 50) or 1.0
    enc_ms = stats.percentile(encrypted, 50) or 0.0
    ratio = {
        "headline": "CPU per step, Encrypt / no codec (median of rounds)",
        "value": stats.rnd(enc_ms / plain_ms),
        "target": f"<= {TARGET}",
        "met": enc_ms / plain_ms <= TARGET,
    }
    return common.document(
        "payloads",
        mode="quick" if quick else "full",
        figures={"encrypt_cpu_ms_per_step": stats.distribution(encrypted)},
        baseline={"plain_cpu_ms_per_step": stats.distribution(plain)},
        ratio=ratio,
        settings={"steps": STEPS, "runs_per_round": runs, "rounds": rounds, "payload_bytes": 1100},
        machine=machine,
        notes=["process CPU of the driving process (client + in-process engine + codecs)"],
        url=url,
    )


def main(argv: list[str] | None = None) -> int:
    return common.simple_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
