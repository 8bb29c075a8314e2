"""Names with control characters are refused everywhere (services and console forms)
through one test, :func:`remoting.model.has_control_characters`."""

from __future__ import annotations

import sys
import unicodedata

from remoting.model import has_control_characters


def test_control_characters_are_exactly_unicode_category_cc() -> None:
    differing = [
        code
        for code in range(sys.maxunicode + 1)
        if has_control_characters(chr(code)) != (unicodedata.category(chr(code)) == "Cc")
    ]
    assert differing == []


def test_a_name_is_judged_by_every_character() -> None:
    assert not has_control_characters("broker-a.example:10911 é 中")
    assert has_control_characters("broker-a\n")
    assert has_control_characters("\x85tail")
    assert not has_control_characters("")
