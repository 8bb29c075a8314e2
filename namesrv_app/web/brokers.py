"""The console's Brokers page and its forms.

Per broker address: the role and last heartbeat come from this node's
projection; offsets, HA state and the broker's own view of its role come from
GET_BROKER_RUNTIME_INFO asked of the broker over the wire (in parallel, with a
short timeout, so a dead broker only greys out its row). Replication lag is
the group master's max offset minus the slave's; a slave is in sync while its
HA connection is up and the lag is within the raft-failover bound.

Consumer groups: every reachable master is asked (in parallel, one connection and
a short time budget each) for its groups' committed offsets, clients and queue max
offsets (:func:`localcluster.broker_control.consumer_groups`); the page merges them
by group name, one table of clients and one of queues per group, lag being the
queue's max offset minus the group's committed offset. A retry topic
(``%RETRY%group``) row is shown only while it has lag: a group's idle retry queue
says nothing.

Forms (operator role): create or update a topic on one broker
(UPDATE_AND_CREATE_TOPIC; the broker then registers it with the NameServers),
send a test message (SEND_MESSAGE), and stop or start a broker of the local
cluster through :mod:`localcluster.broker_control` (stop needs a confirmation).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from localcluster import broker_control
from localcluster.broker_control import BrokerControlError, ConsumerGroupInfo
from namesrv_app import audit, models
from namesrv_app.conf import namesrv_settings
from namesrv_app.topic_admin import create_topic_on_broker
from namesrv_app.topic_rules import (
    DEFAULT_QUEUE_NUMS,
    PERM_CHOICES,
    QUEUE_NUMS_MAX,
    QUEUE_NUMS_MIN,
    validate_topic,
)
from namesrv_app.web import reads
from namesrv_app.web.forms import validate_addr
from namesrv_app.web.views import _context, console_view
from raftstore.failover import DEFAULT_FAILOVER_LAG_BYTES_MAX

RUNTIME_TIMEOUT_S = 1.0
CONSUMERS_TIMEOUT_S = 2.0
"""All of one master's consumer-group requests share this budget."""
RUNTIME_WORKERS_MAX = 16
BROKERS_SHOWN_MAX = 200
"""The page asks at most this many brokers for their runtime info."""
TEST_BODY_CHARS_MAX = 4096
ACTION_STOP = "stop"
ACTION_START = "start"


class BrokerTopicForm(forms.Form):
    """Create or update a topic on one broker."""

    broker_addr = forms.CharField(max_length=255, validators=[validate_addr])
    topic = forms.CharField(max_length=127, validators=[validate_topic])
    read_queue_nums = forms.IntegerField(
        min_value=QUEUE_NUMS_MIN, max_value=QUEUE_NUMS_MAX, initial=DEFAULT_QUEUE_NUMS
    )
    write_queue_nums = forms.IntegerField(
        min_value=QUEUE_NUMS_MIN, max_value=QUEUE_NUMS_MAX, initial=DEFAULT_QUEUE_NUMS
    )
    perm = forms.TypedChoiceField(choices=PERM_CHOICES, coerce=int, initial=6)

    def execute(self) -> str:
        """Send UPDATE_AND_CREATE_TOPIC; the result line for the operator."""
        data = self.cleaned_data
        create_topic_on_broker(
            data["broker_addr"],
            data["topic"],
            read_queue_nums=data["read_queue_nums"],
            write_queue_nums=data["write_queue_nums"],
            perm=data["perm"],
        )
        return f"topic {data['topic']} created or updated on {data['broker_addr']}"


class TestMessageForm(forms.Form):
    """Send one test message to a broker."""

    broker_addr = forms.CharField(max_length=255, validators=[validate_addr])
    topic = forms.CharField(max_length=127, validators=[validate_topic])
    body = forms.CharField(max_length=TEST_BODY_CHARS_MAX, initial="hello from the console")

    def execute(self) -> str:
        """Send SEND_MESSAGE; the result line (code and message id)."""
        data = self.cleaned_data
        sent = broker_control.send_test_message(
            data["broker_addr"], data["topic"], data["body"].encode("utf-8")
        )
        if sent.msg_id is None:
            return f"send refused: code {sent.code} {sent.remark or ''}".strip()
        return f"sent: code {sent.code}, msgId {sent.msg_id}, queue {sent.queue_id}"


class BrokerControlForm(forms.Form):
    """Stop (confirmation required) or start one broker of the local cluster."""

    label = forms.CharField(max_length=255)
    action = forms.ChoiceField(choices=((ACTION_STOP, "stop"), (ACTION_START, "start")))
    confirm = forms.BooleanField(required=False, label="Yes, stop this broker")

    def clean(self) -> dict[str, Any]:
        """A stop must be confirmed."""
        data = super().clean() or {}
        if data.get("action") == ACTION_STOP and not data.get("confirm"):
            raise forms.ValidationError("Tick the confirmation to stop a broker.")
        return data

    def execute(self, run_dir: Path) -> str:
        """Stop (SIGTERM: the broker unregisters) or start the broker."""
        label, action = self.cleaned_data["label"], self.cleaned_data["action"]
        if action == ACTION_STOP:
            stopped = broker_control.stop_broker(run_dir, label)
            return f"{label} stopped" if stopped else f"{label} was not running"
        started = broker_control.restart_broker(run_dir, label)
        return f"{label} started (pid {started.pid})"


def run_dir() -> Path | None:
    """The local cluster's run folder (the cluster file's folder), None outside one."""
    cluster_file = namesrv_settings().CLUSTER_FILE
    return Path(cluster_file).parent if cluster_file else None


def _runtime(addrs: list[str]) -> dict[str, dict[str, str] | None]:
    """GET_BROKER_RUNTIME_INFO of every address in parallel; None when unreachable."""

    def ask(addr: str) -> dict[str, str] | None:
        try:
            return broker_control.runtime_info(addr, RUNTIME_TIMEOUT_S)
        except (BrokerControlError, ValueError):
            # ValueError: a registered address that is not host:port (the wire
            # stores what a broker sends); its row shows as unreachable.
            return None

    if not addrs:
        return {}
    with ThreadPoolExecutor(max_workers=min(RUNTIME_WORKERS_MAX, len(addrs))) as pool:
        return dict(zip(addrs, pool.map(ask, addrs), strict=True))


def broker_rows() -> list[dict[str, Any]]:
    """One row per registered broker address, with runtime info and replication lag."""
    addresses = list(
        models.BrokerAddress.objects.select_related("group").order_by(
            "group__broker_name", "broker_id"
        )[:BROKERS_SHOWN_MAX]
    )
    live = {
        (row.cluster_name, row.broker_addr): row
        for row in models.LiveBroker.objects.filter(broker_addr__in=[a.addr for a in addresses])
    }
    runtime = _runtime([a.addr for a in addresses])
    master_offsets = {
        a.group.broker_name: _offset(runtime.get(a.addr)) for a in addresses if a.broker_id == 0
    }
    now = reads.now_ms()
    rows = []
    for address in addresses:
        info = runtime.get(address.addr)
        heard = live.get((address.group.cluster, address.addr))
        rows.append(_row(address, info, heard, master_offsets.get(address.group.broker_name), now))
    return rows


def _consumer_groups(addrs: list[str]) -> dict[str, list[ConsumerGroupInfo] | str]:
    """The consumer groups of every address in parallel; the error text when one fails."""

    def ask(addr: str) -> list[ConsumerGroupInfo] | str:
        try:
            return broker_control.consumer_groups(addr, CONSUMERS_TIMEOUT_S)
        except (BrokerControlError, ValueError) as exc:
            return str(exc)

    if not addrs:
        return {}
    with ThreadPoolExecutor(max_workers=min(RUNTIME_WORKERS_MAX, len(addrs))) as pool:
        return dict(zip(addrs, pool.map(ask, addrs), strict=True))


def consumer_sections(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The Consumer groups section from the reachable masters among ``rows``.

    ``groups``: one dict per group name (clients and queue rows of every master, with
    the broker's name; total lag), ordered by name; ``unreachable``: the masters not
    asked; ``errors``: what a master that was asked answered wrong."""
    masters = [row for row in rows if row["role"] == "master"]
    asked = [row for row in masters if row["reachable"]]
    answers = _consumer_groups([row["addr"] for row in asked])
    merged: dict[str, dict[str, Any]] = {}
    errors = []
    for row in asked:
        answer = answers[row["addr"]]
        if isinstance(answer, str):
            errors.append(f"{row['broker_name']}: {answer}")
            continue
        for group in answer:
            _merge(merged, row["broker_name"], group)
    groups = [merged[name] for name in sorted(merged)]
    for entry in groups:
        entry["total_lag"] = sum(queue["lag"] for queue in entry["queues"])
        entry["subscriptions"] = sorted(entry["subscriptions"].items())
        entry["models"] = sorted(entry["models"])
    return {
        "groups": groups,
        "unreachable": [row for row in masters if not row["reachable"]],
        "errors": errors,
    }


def _merge(merged: dict[str, dict[str, Any]], broker_name: str, group: ConsumerGroupInfo) -> None:
    entry = merged.setdefault(
        group.name,
        {
            "name": group.name,
            "clients": [],
            "subscriptions": {},
            "queues": [],
            "models": set(),
            "idle_retry_queues": 0,
        },
    )
    entry["clients"] += [{"broker": broker_name, "client": client} for client in group.clients]
    entry["subscriptions"].update(group.subscriptions)
    entry["models"].update(m for m in (group.message_model, group.consume_type) if m)
    for queue in group.queues:
        if queue.is_retry and queue.lag == 0:
            entry["idle_retry_queues"] += 1
            continue
        entry["queues"].append(
            {
                "broker": broker_name,
                "topic": queue.topic,
                "queue_id": queue.queue_id,
                "broker_offset": queue.broker_offset,
                "consumer_offset": queue.consumer_offset,
                "lag": queue.lag,
                "retry": queue.is_retry,
                "dlq": queue.is_dlq,
            }
        )


def _offset(info: dict[str, str] | None) -> int | None:
    if info is None:
        return None
    try:
        return int(info.get("commitLogMaxOffset", ""))
    except ValueError:
        return None


def _row(
    address: models.BrokerAddress,
    info: dict[str, str] | None,
    heard: models.LiveBroker | None,
    master_offset: int | None,
    now_ms: int,
) -> dict[str, Any]:
    offset = _offset(info)
    lag = None
    in_sync = None
    if address.broker_id != 0 and offset is not None and master_offset is not None:
        lag = max(0, master_offset - offset)
        connected = info is not None and info.get("haConnected") == "true"
        in_sync = connected and lag <= DEFAULT_FAILOVER_LAG_BYTES_MAX
    return {
        "cluster": address.group.cluster,
        "broker_name": address.group.broker_name,
        "broker_id": address.broker_id,
        "addr": address.addr,
        "role": "master" if address.broker_id == 0 else "slave",
        "reachable": info is not None,
        "broker_role": (info or {}).get("brokerRole", ""),
        "max_offset": offset,
        "lag": lag,
        "in_sync": in_sync,
        "last_heartbeat_ago_s": None if heard is None else (now_ms - heard.last_update_ms) / 1000,
        "ha": _ha_link(address.broker_id, info),
    }


def _count(info: dict[str, str], key: str) -> int | None:
    try:
        return max(0, int(info[key]))
    except (KeyError, ValueError):
        return None


def _ha_link(broker_id: int, info: dict[str, str] | None) -> str:
    """What the broker says of its HA link: how it authenticates (``haAuth``; our
    brokers only), its slaves or its connection, and peers it refused."""
    if info is None:
        return ""
    parts = [info["haAuth"]] if info.get("haAuth") else []
    if broker_id == 0:
        slaves = _count(info, "haConnections")
        if slaves is not None:
            parts.append(f"{slaves} slave{'' if slaves == 1 else 's'} connected")
        refused = _count(info, "haRefusedConnections")
        if refused:
            parts.append(f"{refused} peer{'' if refused == 1 else 's'} refused")
    elif "haConnected" in info:
        parts.append("connected" if info["haConnected"] == "true" else "not connected")
    return " · ".join(parts)


def _page(
    request: HttpRequest,
    result: str | None = None,
    error: str | None = None,
    forms_in: dict[str, forms.Form] | None = None,
) -> HttpResponse:
    forms_in = forms_in or {}
    if request.method == "POST":
        audit.note(request, result=error or result, failed=error is not None)
    folder = run_dir()
    rows = broker_rows()
    context = _context(
        request,
        "brokers",
        rows=rows,
        consumers=consumer_sections(rows),
        local=broker_control.local_brokers(folder) if folder is not None else [],
        topic_form=forms_in.get("topic_form") or BrokerTopicForm(),
        send_form=forms_in.get("send_form") or TestMessageForm(),
        result=result,
        error=error,
    )
    return render(request, "brokers/brokers.html", context)


@console_view()
def brokers(request: HttpRequest) -> HttpResponse:
    """The Brokers page."""
    return _page(request)


def _run(request: HttpRequest, form: BrokerTopicForm | TestMessageForm, name: str) -> HttpResponse:
    if not form.is_valid():
        return _page(request, error="Please correct the form.", forms_in={name: form})
    try:
        result = form.execute()
    except BrokerControlError as exc:
        return _page(request, error=str(exc), forms_in={name: form})
    return _page(request, result=result)


@console_view(operator=True)
@require_http_methods(["POST"])
def broker_topic(request: HttpRequest) -> HttpResponse:
    """POST: create or update a topic on one broker."""
    return _run(request, BrokerTopicForm(request.POST), "topic_form")


@console_view(operator=True)
@require_http_methods(["POST"])
def broker_send(request: HttpRequest) -> HttpResponse:
    """POST: send a test message."""
    return _run(request, TestMessageForm(request.POST), "send_form")


@console_view(operator=True)
@require_http_methods(["POST"])
def broker_control_action(request: HttpRequest) -> HttpResponse:
    """POST: stop (confirmed) or start a broker of the local cluster."""
    folder = run_dir()
    if folder is None:
        return _page(request, error="No local cluster run folder: brokers cannot be controlled.")
    form = BrokerControlForm(request.POST)
    if not form.is_valid():
        errors = [str(message) for message in form.non_field_errors()]
        return _page(request, error="; ".join(errors) or "Invalid request.")
    try:
        return _page(request, result=form.execute(folder))
    except BrokerControlError as exc:
        return _page(request, error=str(exc))
