"""What ``import weft_django`` offers a caller: every error it can catch, the
handle and the run filter, each by one name that resolves."""

from __future__ import annotations

import weft_django
from weft_django.errors import ERROR_CLASSES, WeftError


def test_every_error_a_caller_can_catch_is_exported() -> None:
    for cls in (*ERROR_CLASSES, WeftError):
        assert getattr(weft_django, cls.__name__) is cls
        assert cls.__name__ in weft_django.__all__


def test_the_handle_and_the_run_filter_are_exported() -> None:
    from weft_django import client
    from weft_django.engine.runs.filters import AttributeRange, RunFilter

    assert weft_django.WorkflowHandle is client.WorkflowHandle
    assert weft_django.RunFilter is RunFilter
    assert weft_django.AttributeRange is AttributeRange


def test_every_name_in_all_resolves() -> None:
    for name in weft_django.__all__:
        assert getattr(weft_django, name) is not None, name
