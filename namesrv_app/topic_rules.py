"""The topic input rules, one function and one error text each, for every surface.

The console's forms (:mod:`namesrv_app.web.forms`), the REST API's serializers
(:mod:`namesrv_app.api.serializers`) and ``manage.py topic`` all check a topic
change with these functions before anything is sent, so the same input is refused
with the same sentence wherever it is typed:

* a topic name matches ``^[%|a-zA-Z0-9_-]+$`` and has at most 127 characters
  (RocketMQ's ``TopicValidator``); a delete also takes any topic the node stores,
  since the wire accepts names outside that rule;
* a queue count is 1 to 1024 queues per broker group;
* perm is 2 (write), 4 (read) or 6 (read+write); the inherit (1) and priority (8)
  bits are deliberately not offered;
* the broker groups are ones this node knows, each named once (upstream would log
  "illegal broker" and silently store nothing).

Each raises Django's ``ValidationError``, which forms and DRF both turn into field
messages; :func:`create_refusals` collects every message of one create, keyed by the
API's field names, for a caller without either (the CLI).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.core.exceptions import ValidationError

from namesrv_app import models
from remoting.topic_rule import TOPIC_CHARS, TOPIC_CHARS_MAX

QUEUE_NUMS_MIN = 1
QUEUE_NUMS_MAX = 1024
DEFAULT_QUEUE_NUMS = 8
PERM_CHOICES = ((6, "6 read + write"), (4, "4 read only"), (2, "2 write only"))
PERM_VALUES = frozenset(value for value, _ in PERM_CHOICES)
DEFAULT_PERM = 6

TOPIC_TOO_LONG = f"A topic name has at most {TOPIC_CHARS_MAX} characters."
TOPIC_CHARACTERS = "A topic name may only contain letters, digits, %, |, _ and -."
QUEUE_NUMS_RANGE = (
    f"Queue counts are {QUEUE_NUMS_MIN} to {QUEUE_NUMS_MAX} queues per broker group; "
    "{value} is not."
)
PERM_RULE = "perm must be 2 (write), 4 (read) or 6 (read+write)."
UNKNOWN_GROUPS = "unknown broker groups: {names}"
GROUP_REPEATED = "each broker_name may appear only once"


def validate_topic(value: str) -> None:
    """RocketMQ's topic rule: allowed characters and at most 127 of them."""
    if len(value) > TOPIC_CHARS_MAX:
        raise ValidationError(TOPIC_TOO_LONG)
    if not TOPIC_CHARS.fullmatch(value):
        raise ValidationError(TOPIC_CHARACTERS)


def validate_deletable_topic(value: str) -> None:
    """A name following the topic rule, or any topic this node stores.

    The wire accepts names the rule refuses (upstream does), and an operator
    must be able to delete such a topic from every surface too.
    """
    try:
        validate_topic(value)
    except ValidationError:
        if not models.QueueData.objects.filter(topic=value).exists():
            raise


def validate_queue_nums(value: int) -> None:
    """A read or write queue count: 1 to 1024 queues per broker group."""
    if not QUEUE_NUMS_MIN <= value <= QUEUE_NUMS_MAX:
        raise ValidationError(QUEUE_NUMS_RANGE.format(value=value))


def validate_perm(value: int) -> None:
    """Only 2, 4 or 6."""
    if value not in PERM_VALUES:
        raise ValidationError(PERM_RULE)


def unknown_broker_names(names: Sequence[str]) -> list[str]:
    """The names in ``names`` that are not broker groups of this node (one query)."""
    known = set(
        models.BrokerGroup.objects.filter(broker_name__in=names).values_list(
            "broker_name", flat=True
        )
    )
    return [name for name in names if name not in known]


def validate_broker_groups(names: Sequence[str]) -> None:
    """Every group named once and known to this node's projection."""
    if len(set(names)) != len(names):
        raise ValidationError(GROUP_REPEATED)
    unknown = unknown_broker_names(names)
    if unknown:
        raise ValidationError(UNKNOWN_GROUPS.format(names=", ".join(unknown)))


def create_refusals(
    topic: str, broker_names: Sequence[str], read_queue_nums: int, write_queue_nums: int, perm: int
) -> dict[str, list[str]]:
    """Every rule one create breaks: API field name -> its messages (empty: none)."""
    checks: tuple[tuple[str, Callable[[], None]], ...] = (
        ("topic", lambda: validate_topic(topic)),
        ("queue_datas", lambda: validate_broker_groups(list(broker_names))),
        ("read_queue_nums", lambda: validate_queue_nums(read_queue_nums)),
        ("write_queue_nums", lambda: validate_queue_nums(write_queue_nums)),
        ("perm", lambda: validate_perm(perm)),
    )
    refusals: dict[str, list[str]] = {}
    for field, check in checks:
        try:
            check()
        except ValidationError as exc:
            refusals[field] = list(exc.messages)
    return refusals
