"""``python -m tools.docs_gen [--check] [--out DIR]`` (from the repository root)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from tools.docs_gen import DEFAULT_OUT, stale_pages, write_pages

    parser = argparse.ArgumentParser(
        prog="python -m tools.docs_gen", description="Regenerate docs/reference from the code."
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages(args.out)
        for name in stale:
            print(f"stale: {args.out / name}", file=sys.stderr)
        return 1 if stale else 0
    for name in write_pages(args.out):
        print(f"wrote {args.out / name}")
    return 0


def setup_django() -> None:
    """The example project's settings, from the repository root (DRF's schema config)."""
    root = Path(__file__).resolve().parents[2]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    sys.path.insert(0, str(root))
    import django

    django.setup()


if __name__ == "__main__":  # pragma: no cover
    setup_django()
    sys.exit(main())
