"""Small template filters of the console: permissions and ages in words."""

from __future__ import annotations

from django import template

from remoting.model import PERM_INHERIT, PERM_PRIORITY, PERM_READ, PERM_WRITE

register = template.Library()

MS_PER_S = 1000


@register.filter
def perm_text(perm: int | None) -> str:
    """``6`` -> ``RW``: R read, W write, I inherit, P priority; ``-`` for none."""
    if perm is None:
        return ""
    letters = [
        letter
        for bit, letter in (
            (PERM_READ, "R"),
            (PERM_WRITE, "W"),
            (PERM_INHERIT, "I"),
            (PERM_PRIORITY, "P"),
        )
        if perm & bit
    ]
    return "".join(letters) or "-"


@register.filter
def seconds(ms: int | None) -> str:
    """Milliseconds as seconds with one decimal (``12.3 s``); empty for None."""
    if ms is None:
        return ""
    return f"{ms / MS_PER_S:.1f} s"


@register.filter
def age_from(ms: int | None, now_ms: int) -> str:
    """The age of a millisecond timestamp relative to ``now_ms``."""
    if ms is None:
        return ""
    return seconds(max(0, now_ms - ms))


@register.filter
def short(text: str | None, length: int = 12) -> str:
    """The first ``length`` characters (digests)."""
    return "" if not text else str(text)[:length]
