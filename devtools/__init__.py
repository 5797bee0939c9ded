"""Development tools shared by ``tests/``, ``benchmarks/`` and ``scripts/``.

Not part of the installed package (``pyproject.toml`` packages only
``weft_django*``): the benchmarks must not import ``tests``, and the tests
and benchmarks must spawn and wait on child processes the same way.
"""
