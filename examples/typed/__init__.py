"""A typed project's workflows: ``async def`` bodies, dataclass and pydantic payloads.

Checked by ``mypy --strict`` and pyright (strict) in the test command
(``tests/unit/test_typed_example.py``), ``reveal_type`` lines included.
"""
