"""``python -m benchmarks all|<name> --quick|--full`` (names: ``BENCHMARKS``, ``EXTRA``).

Each benchmark runs in its own process (``python -m benchmarks.<name>``),
creates and migrates the PostgreSQL database ``weft_bench`` itself and
prints ONE JSON document; ``all`` runs them one after the other and then
writes ``benchmarks/out/summary.json`` (the headline ratio of each against
its target). ``--max-load L`` waits (up to ``--max-wait`` seconds) until the
1-minute load average is below ``L`` before starting: the machine is shared.

Never part of the test suite: pytest's ``testpaths`` is ``tests/`` only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from benchmarks import common

BENCHMARKS = ("claims", "renewal", "throughput", "latency", "runtime", "peers", "schedules")
#: Runnable by name, not part of ``all``: a full memory run (100,000 workflows
#: through one engine) takes longer than the rest together. ``updates``: the
#: update round trip against signal + query polling; ``events``: an event's
#: set -> get_event against a polling loop (issue #18).
#: ``queues``: start -> complete through a queue against no queue (issue #16).
#: ``replay_check``: live runs/s the deploy gate replays (issue #20).
#: ``bulk``: runs/s of cancel_many / retry_many by filter (issue #20).
#: ``many_engines``: idle cost per engine at 1 and 50 engines, and the spread
#: of a burst across them (issue #21; boots 2 × 51 engine processes).
#: ``scale``: eight operations at 100,000 parked workflows against 1,000 (issue #21).
#: ``payloads``: CPU per step with the Encrypt codec against none.
#: ``tasks``: Django tasks through WeftTaskBackend against django-tasks-db (issue #37).
EXTRA = (
    "memory",
    "updates",
    "events",
    "queues",
    "replay_check",
    "bulk",
    "many_engines",
    "scale",
    "tasks",
    "payloads",
)


def wait_for_load(max_load: float, max_wait: float) -> list[float]:
    deadline = time.monotonic() + max_wait
    while os.getloadavg()[0] >= max_load and time.monotonic() < deadline:
        print(
            f"# waiting: 1-minute load average {os.getloadavg()[0]:.2f} >= {max_load}",
            file=sys.stderr,
            flush=True,
        )
        time.sleep(30)
    return common.loadavg()


def headline(doc: dict[str, Any]) -> dict[str, Any]:
    ratio = doc.get("ratio", {})
    if "value" in ratio:
        return {k: ratio[k] for k in ("headline", "value", "target", "met") if k in ratio}
    return ratio.get("headline", {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("which", choices=("all", *BENCHMARKS, *EXTRA))
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes (the default)")
    size.add_argument("--full", action="store_true", help="the published sizes")
    parser.add_argument("--no-publish", action="store_true", help="keep PNGs out of docs/img")
    parser.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="wait until the 1-minute load average is below this",
    )
    parser.add_argument("--max-wait", type=float, default=1200, help="seconds (with --max-load)")
    args = parser.parse_args(argv)

    names = BENCHMARKS if args.which == "all" else (args.which,)
    flags = ["--full" if args.full else "--quick"] + (["--no-publish"] if args.no_publish else [])
    started = time.monotonic()
    load_start = wait_for_load(args.max_load, args.max_wait) if args.max_load else common.loadavg()
    failed: list[str] = []
    summary: dict[str, Any] = {
        "mode": "full" if args.full else "quick",
        "load_average_start": load_start,
        "benchmarks": {},
    }
    for name in names:
        t0 = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{name}", *flags], cwd=common.REPO_ROOT
        )
        entry: dict[str, Any] = {"exit": done.returncode, "wall_s": round(time.monotonic() - t0, 1)}
        out = common.OUT_DIR / f"{name}.json"
        if done.returncode == 0 and out.exists():
            doc = json.loads(out.read_text())
            entry["headline"] = headline(doc)
            entry["load_average"] = [
                doc["machine"]["load_average_start"],
                doc["machine"]["load_average_end"],
            ]
        else:
            failed.append(name)
        summary["benchmarks"][name] = entry
    summary["load_average_end"] = common.loadavg()
    summary["wall_s"] = round(time.monotonic() - started, 1)
    if args.which == "all":
        common.OUT_DIR.mkdir(parents=True, exist_ok=True)
        (common.OUT_DIR / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        print(
            f"# summary: {common.OUT_DIR / 'summary.json'} ({summary['wall_s']} s)", file=sys.stderr
        )
    if failed:
        print(f"# failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
