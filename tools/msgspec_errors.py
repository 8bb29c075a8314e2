"""msgspec's validation errors taken apart, for config readers that say them in their
file's own words (``node.config_schema`` for node.toml, ``broker_app.config`` for a
broker.conf).

msgspec says what is wrong and where in one line: ``Expected `int`, got `str` - at
`$.internal.port```. :func:`split` separates the two, :func:`info_at` finds the type the
path leads to in the schema (``msgspec.inspect``), and :func:`describe` names that type
as a user reads it.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

import msgspec.inspect as schema

_AT = re.compile(r" - at `(?:key` in `)?(?P<path>\$[^`]*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_MISSING = re.compile(r"^Object missing required field `(?P<key>[^`]+)`")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>[^`]+)`")

Step = str | int
"""A key of a table, an index of a list, or ``"..."`` for any key of a free table."""


def split(message: str) -> tuple[str, list[Step]]:
    """msgspec's ``message`` as (what is wrong, the path it is at): ``$.web.hosts[1]``
    is ``["web", "hosts", 1]``; the path is empty for the top level."""
    found = _AT.search(message)
    if found is None:
        return message, []
    steps: list[Step] = []
    for name, index in _STEP.findall(found.group("path")[1:]):
        steps.append(name or (int(index) if index.isdigit() else "..."))
    return message[: found.start()], steps


def missing_field(text: str) -> str | None:
    """The field a "missing required field" error names, else None."""
    found = _MISSING.match(text)
    return found.group("key") if found else None


def unknown_field(text: str) -> str | None:
    """The field an "unknown field" error names, else None."""
    found = _UNKNOWN.match(text)
    return found.group("key") if found else None


def bare(info: Any) -> Any:
    """The type without its description and without ``| None``."""
    while True:
        if isinstance(info, schema.Metadata):
            info = info.type
        elif isinstance(info, schema.UnionType):
            info = next(t for t in info.types if not isinstance(t, schema.NoneType))
        else:
            return info


def fields(info: Any) -> tuple[schema.Field, ...]:
    """The fields of a struct or dataclass type; none for any other."""
    found = bare(info)
    if isinstance(found, schema.StructType | schema.DataclassType):
        return found.fields
    return ()


def field_info(info: Any, key: str) -> Any:
    """The type of field ``key`` (as the data names it) of ``info``, else None."""
    return next((f.type for f in fields(info) if f.encode_name == key), None)


def info_at(info: Any, path: list[Step]) -> Any:
    """The type of the value at ``path`` under ``info`` (None when it leads nowhere)."""
    for step in path:
        found = bare(info)
        if isinstance(found, schema.StructType | schema.DataclassType):
            info = field_info(found, str(step))
        elif isinstance(found, schema.ListType | schema.VarTupleType):
            info = found.item_type
        elif isinstance(found, schema.DictType):
            info = found.value_type
        else:
            return None
    return info


_WORDS: dict[type[Any], str] = {
    schema.IntType: "a whole number",
    schema.FloatType: "a number",
    schema.BoolType: "true or false",
    schema.StructType: "a table",
    schema.DataclassType: "a table",
    schema.DictType: "a table",
    schema.ListType: "a list",
    schema.VarTupleType: "a list",
}


def describe(info: Any) -> str:
    """The type ``info`` in a user's words: its ``Meta(description=...)`` when it has
    one, else ``a whole number from 1 to 65535``, ``one of ASYNC_MASTER, SLAVE``..."""
    if isinstance(info, schema.Metadata):
        description = (info.extra_json_schema or {}).get("description")
        if description:
            return str(description)
    found = bare(info)
    if isinstance(found, schema.IntType) and found.ge is not None and found.le is not None:
        return f"a whole number from {found.ge} to {found.le}"
    if isinstance(found, schema.FloatType) and found.ge is not None and found.le is not None:
        return f"a number from {found.ge:g} to {found.le:g}"
    if isinstance(found, schema.StrType):
        return "a non-empty string" if found.min_length else "a string"
    if isinstance(found, schema.LiteralType):
        return f"one of {', '.join(map(str, found.values))}"
    if isinstance(found, schema.EnumType):
        return f"one of {', '.join(str(m.value) for m in found.cls)}"
    if isinstance(found, schema.CustomType) and issubclass(found.cls, PurePath):
        return "a file path"
    return _WORDS.get(type(found), "something else")
