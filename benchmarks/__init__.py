"""weft-django benchmarks: ``python -m benchmarks all --quick|--full``.

Never part of the test suite (pytest's ``testpaths`` is ``tests/``). See
``benchmarks/__main__.py`` for the entry point and ``benchmarks/common.py``
for the shared database set-up and the JSON document each one prints.
"""
