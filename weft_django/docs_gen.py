"""Moved to ``tools/docs_gen`` (outside the wheel); kept so that
``python -m weft_django.docs_gen``, named in the generated pages' header,
still works from the repository root."""

from __future__ import annotations

import sys

from tools.docs_gen import PAGES, render_all, stale_pages, write_pages
from tools.docs_gen.__main__ import main, setup_django

__all__ = ["PAGES", "main", "render_all", "stale_pages", "write_pages"]

if __name__ == "__main__":  # pragma: no cover
    setup_django()
    sys.exit(main())
