"""``WEFT["SEARCH_ATTRIBUTES"]`` (issue #20 part 3): weft.E045-E047, and the
pure value checks a body's upsert and a filter's text go through."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from weft_django.checks import check_weft_settings
from weft_django.conf import build_settings, get_settings
from weft_django.kernel.attribute_types import check_value, parse_text


def test_declared_attributes_are_read() -> None:
    declared = {"customer": "str", "amount": "int", "vip": "bool", "due": "datetime", "s": "float"}
    settings, problems = build_settings({"SEARCH_ATTRIBUTES": declared})
    assert not problems and settings.search_attributes == declared
    assert get_settings().search_attributes == {}


@pytest.mark.parametrize(
    ("value", "check_id", "named"),
    [
        (["customer"], "weft.E045", "['customer']"),
        ({f"a{i}": "str" for i in range(101)}, "weft.E045", "101"),
        ({"9lives": "str"}, "weft.E046", "'9lives'"),
        ({"has space": "int"}, "weft.E046", "'has space'"),
        ({"amount": "integer"}, "weft.E047", "'integer'"),
        ({"amount": int}, "weft.E047", "amount"),
    ],
)
def test_a_bad_declaration_has_its_own_id_naming_the_value(
    value: object, check_id: str, named: str
) -> None:
    _settings, problems = build_settings({"SEARCH_ATTRIBUTES": value})
    assert check_id in [p.id for p in problems]
    assert any(named in p.message for p in problems)
    with override_settings(WEFT={"SEARCH_ATTRIBUTES": value}):
        assert check_id in [e.id for e in check_weft_settings(None)]
        with pytest.raises(ImproperlyConfigured, match="SEARCH_ATTRIBUTES"):
            get_settings()


@pytest.mark.parametrize(
    ("kind", "value", "error"),
    [
        ("str", 5, TypeError),
        ("str", "x" * 256, ValueError),
        ("int", True, TypeError),
        ("int", 1.0, TypeError),
        ("int", 2**63, ValueError),
        ("float", "1", TypeError),
        ("float", float("nan"), ValueError),
        ("bool", 1, TypeError),
        ("datetime", "2026-01-01", TypeError),
        ("datetime", datetime(2026, 1, 1), ValueError),
    ],
)
def test_check_value_names_the_attribute_and_value(kind: str, value: object, error: type) -> None:
    with pytest.raises(error, match="'a'"):
        check_value("a", kind, value)


def test_values_that_fit() -> None:
    assert check_value("a", "float", 3) == 3.0 and isinstance(check_value("a", "float", 3), float)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    assert check_value("a", "datetime", moment) is moment
    assert parse_text("a", "int", " 42 ") == 42
    assert parse_text("a", "bool", "Yes") is True
    assert parse_text("a", "datetime", "2026-01-01T00:00:00Z") == moment
    assert parse_text("a", "str", " padded ") == " padded "
