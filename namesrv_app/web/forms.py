"""Operation forms of the console, and the input rules the API serializers share.

Each form validates in ``clean_*``/``clean`` and then ``execute()`` calls ONE
gateway client function (the single web write path), or for topics the topic
service the API and the CLI share (:mod:`namesrv_app.topic_admin`), and returns
the result text shown to the operator. Destructive forms require an explicit
``confirm``.

Input rules (the console's, checked before anything reaches the gateway): the topic
rules live in :mod:`namesrv_app.topic_rules`, one function and one error text each,
shared with the REST API and ``manage.py topic``; the rest are here:

* names are non-blank and free of control characters;
* addresses are ``host:port``.
"""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from namesrv_app import gateway_client, models, topic_admin
from namesrv_app.topic_rules import (
    DEFAULT_PERM,
    DEFAULT_QUEUE_NUMS,
    PERM_CHOICES,
    PERM_RULE,
    QUEUE_NUMS_MAX,
    QUEUE_NUMS_MIN,
    UNKNOWN_GROUPS,
    validate_deletable_topic,
    validate_queue_nums,
    validate_topic,
)
from remoting.model import QueueData, has_control_characters
from remoting.topic_rule import TOPIC_CHARS_MAX

NAME_CHARS_MAX = 255
# A KV value travels in the request header, which the gateway reads only up to 256 KiB
# (remoting/frame.py): 32,768 characters fit even when each is written as a 6-byte escape.
KV_VALUE_CHARS_MAX = 32_768
ADDR_PATTERN = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$")
PORT_MAX = 65535
BROKER_ID_MAX = 2**63 - 1


def validate_name(value: str) -> None:
    """A non-blank name without control characters (namespaces, keys, clusters, brokers)."""
    if not value.strip():
        raise ValidationError("This field may not be blank.")
    if has_control_characters(value):
        raise ValidationError("Control characters are not allowed.")


def validate_addr(value: str) -> None:
    """``host:port`` with a port in 1..65535."""
    if not ADDR_PATTERN.match(value) or not 0 < int(value.rsplit(":", 1)[1]) <= PORT_MAX:
        raise ValidationError("Enter an address as host:port.")


def _choice_field(form: forms.Form, name: str) -> forms.ChoiceField:
    """The form's choice field ``name`` (Form.fields is typed as plain Fields)."""
    field = form.fields[name]
    assert isinstance(field, forms.ChoiceField), name
    return field


def broker_choices() -> list[tuple[str, str]]:
    """Every broker group as a choice (name only; the form is for operators)."""
    names = models.BrokerGroup.objects.order_by("broker_name").values_list("broker_name", flat=True)
    return [(name, name) for name in names]


def cluster_choices() -> list[tuple[str, str]]:
    """Every cluster, plus "all clusters"."""
    names = models.Cluster.objects.order_by("name").values_list("name", flat=True)
    return [("", "all clusters"), *((name, name) for name in names)]


def _name_field(label: str, **extra: Any) -> forms.CharField:
    return forms.CharField(
        label=label, max_length=NAME_CHARS_MAX, validators=[validate_name], **extra
    )


def _confirm_field() -> forms.BooleanField:
    return forms.BooleanField(
        label="I understand this changes what clients are told", required=True
    )


class OperationForm(forms.Form):
    """A form whose ``execute`` performs one gateway operation and describes the result."""

    destructive = False
    title = ""

    def execute(self) -> str:
        """Perform the operation; the text shown to the operator."""
        # Every concrete form overrides this; reaching it is a programming error.
        raise TypeError(f"{type(self).__name__} defines no operation")


# ------------------------------------------------------------------- topics
#
# Both forms call namesrv_app.topic_admin, as the REST API and ``manage.py topic`` do:
# through the brokers first by default, NameServer-only as an explicit option.


def _queue_nums_input() -> forms.NumberInput:
    """The browser's own range check; the server's is ``validate_queue_nums``, whose
    sentence every surface answers."""
    return forms.NumberInput(attrs={"min": QUEUE_NUMS_MIN, "max": QUEUE_NUMS_MAX})


class RegisterTopicForm(OperationForm):
    """Create a topic on chosen broker groups: through their masters (17, recommended),
    or REGISTER_TOPIC_IN_NAMESRV (217) on the NameServers only.

    A post without ``method`` goes through the brokers, as the REST API and
    ``manage.py topic`` do: NameServer-only is only ever an explicit choice.
    """

    title = "Register a topic"
    topic = forms.CharField(max_length=TOPIC_CHARS_MAX, validators=[validate_topic])
    # The choices are the groups this node knows; a post naming another one is
    # refused with the API's and the CLI's sentence.
    brokers = forms.MultipleChoiceField(
        choices=(),
        help_text="broker groups serving the topic",
        error_messages={"invalid_choice": UNKNOWN_GROUPS.format(names="%(value)s")},
    )
    read_queue_nums = forms.IntegerField(
        validators=[validate_queue_nums],
        initial=DEFAULT_QUEUE_NUMS,
        widget=_queue_nums_input(),
    )
    write_queue_nums = forms.IntegerField(
        validators=[validate_queue_nums],
        initial=DEFAULT_QUEUE_NUMS,
        widget=_queue_nums_input(),
    )
    perm = forms.TypedChoiceField(
        choices=PERM_CHOICES,
        coerce=int,
        initial=DEFAULT_PERM,
        error_messages={"invalid_choice": PERM_RULE},
    )
    method = forms.ChoiceField(
        choices=topic_admin.METHOD_CHOICES,
        initial=topic_admin.METHOD_BROKERS,
        required=False,
        widget=forms.RadioSelect,
        help_text="through the brokers: UPDATE_AND_CREATE_TOPIC on each group's master, "
        "which registers it with every NameServer",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "brokers").choices = broker_choices()

    def clean_method(self) -> str:
        """The chosen method; through the brokers when the post has none."""
        return str(self.cleaned_data.get("method") or topic_admin.METHOD_BROKERS)

    def execute(self) -> str:
        """Create or register the topic; the answer names the topic, brokers and nodes."""
        data = self.cleaned_data
        queues = [
            QueueData(name, data["read_queue_nums"], data["write_queue_nums"], data["perm"])
            for name in data["brokers"]
        ]
        return _done(topic_admin.create_topic(data["topic"], queues, data["method"]))


class DeleteTopicForm(OperationForm):
    """Delete a topic as RocketMQ's dashboard does: DELETE_TOPIC_IN_BROKER on every
    broker of its clusters (masters, then slaves), then DELETE_TOPIC_IN_NAMESRV on every
    NameServer; optionally limited to one cluster, or NameServer-only."""

    title = "Delete a topic"
    destructive = True
    # Not stripped: " a " and "a" are two topics on the wire.
    topic = forms.CharField(
        max_length=KV_VALUE_CHARS_MAX, strip=False, validators=[validate_deletable_topic]
    )
    cluster = forms.ChoiceField(choices=(), required=False)
    method = forms.ChoiceField(
        choices=topic_admin.DELETE_METHOD_CHOICES,
        initial=topic_admin.METHOD_BROKERS,
        required=False,
        widget=forms.RadioSelect,
        help_text="through the brokers: DELETE_TOPIC_IN_BROKER on every broker of its "
        "clusters first, so their next registration does not bring it back",
    )
    confirm = _confirm_field()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "cluster").choices = cluster_choices()

    def clean_method(self) -> str:
        """The chosen method; through the brokers when the post has none."""
        return str(self.cleaned_data.get("method") or topic_admin.METHOD_BROKERS)

    def execute(self) -> str:
        """Delete the topic (or one cluster's queues of it) on the brokers, then on the
        NameServers; TopicChangeIncomplete when a broker or a NameServer missed it."""
        data = self.cleaned_data
        return _done(
            topic_admin.delete_topic(data["topic"], data["cluster"] or None, data["method"])
        )


def _done(change: topic_admin.TopicChange) -> str:
    """The sentence of a topic change that went through everywhere; else its warning
    (207) or error, raised."""
    if not change.complete:
        raise topic_admin.TopicChangeIncomplete(change)
    return change.detail


class WritePermForm(OperationForm):
    """WIPE_ / ADD_WRITE_PERM_OF_BROKER on one broker group."""

    title = "Write permission of a broker"
    destructive = True
    ACTIONS = (("wipe", "wipe write permission"), ("add", "restore write permission"))
    broker_name = forms.ChoiceField(choices=())
    action = forms.ChoiceField(choices=ACTIONS)
    confirm = _confirm_field()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _choice_field(self, "broker_name").choices = broker_choices()

    def execute(self) -> str:
        """Wipe or add; the count of topics touched."""
        name = self.cleaned_data["broker_name"]
        if self.cleaned_data["action"] == "wipe":
            count, outcome = gateway_client.wipe_write_perm(name)
            return outcome.sentence(f"Wiped write permission of {count} topics of {name}")
        count, outcome = gateway_client.add_write_perm(name)
        return outcome.sentence(f"Restored write permission of {count} topics of {name}")


class UnregisterBrokerForm(OperationForm):
    """UNREGISTER_BROKER of one replica."""

    title = "Unregister a broker"
    destructive = True
    cluster_name = _name_field("Cluster")
    broker_name = _name_field("Broker group")
    broker_addr = forms.CharField(max_length=NAME_CHARS_MAX, validators=[validate_addr])
    broker_id = forms.IntegerField(min_value=0, max_value=BROKER_ID_MAX)
    confirm = _confirm_field()

    def execute(self) -> str:
        """Unregister; applied before the gateway answers."""
        data = self.cleaned_data
        outcome = gateway_client.unregister_broker(
            data["cluster_name"], data["broker_addr"], data["broker_name"], data["broker_id"]
        )
        return outcome.sentence(
            f"Unregistered {data['broker_name']}/{data['broker_id']} at {data['broker_addr']}"
        )


class KVPutForm(OperationForm):
    """PUT_KV_CONFIG."""

    title = "Put a KV config item"
    namespace = _name_field("Namespace")
    key = _name_field("Key")
    value = forms.CharField(max_length=KV_VALUE_CHARS_MAX, widget=forms.Textarea(attrs={"rows": 2}))

    def execute(self) -> str:
        """Put the item."""
        data = self.cleaned_data
        outcome = gateway_client.put_kv(data["namespace"], data["key"], data["value"])
        return outcome.sentence(f"Stored {data['namespace']}/{data['key']}")


class KVDeleteForm(OperationForm):
    """DELETE_KV_CONFIG."""

    title = "Delete a KV config item"
    destructive = True
    namespace = _name_field("Namespace")
    key = _name_field("Key")
    confirm = _confirm_field()

    def execute(self) -> str:
        """Delete the item (a missing item is not an error, as upstream)."""
        data = self.cleaned_data
        outcome = gateway_client.delete_kv(data["namespace"], data["key"])
        return outcome.sentence(f"Deleted {data['namespace']}/{data['key']}")


class MembershipForm(OperationForm):
    """Add or remove a Raft member (raft mode only; eventual nodes answer 409)."""

    title = "Change Raft membership"
    destructive = True
    ACTIONS = (("add", "add a node"), ("remove", "remove a node"))
    action = forms.ChoiceField(choices=ACTIONS)
    address = forms.CharField(
        max_length=NAME_CHARS_MAX, validators=[validate_addr], help_text="the node's Raft host:port"
    )
    confirm = _confirm_field()

    def execute(self) -> str:
        """Change membership; the new peer count."""
        address = self.cleaned_data["address"]
        if self.cleaned_data["action"] == "add":
            status = gateway_client.add_node(address)
        else:
            status = gateway_client.remove_node(address)
        peers = len(status.get("peers", []))
        return f"Membership changed ({address}); the node now knows {peers} peers."


CONFIG_KEY_PATTERN = r"^[A-Za-z][A-Za-z0-9_.]*$"
CONFIG_VALUE_CHARS_MAX = 1024


class NamesrvConfigForm(OperationForm):
    """UPDATE_NAMESRV_CONFIG (318) of one key, on every node (eventual) or through Raft."""

    title = "Update the NameServer config"
    destructive = True
    key = forms.RegexField(
        regex=CONFIG_KEY_PATTERN,
        max_length=128,
        help_text="a NamesrvConfig property, by its Java name (e.g. orderMessageEnable)",
    )
    value = forms.CharField(max_length=CONFIG_VALUE_CHARS_MAX, strip=True)
    confirm = _confirm_field()

    def clean(self) -> dict[str, Any]:
        """A key this node knows and may change, to a value it can honour (refused here,
        with the reason, instead of as a bare error code from the gateway)."""
        data = super().clean() or {}
        key, value = data.get("key"), data.get("value")
        if key is not None and value is not None:
            refusal = gateway_client.config_update_refusal(
                str(key), str(value), gateway_client.namesrv_config()
            )
            if refusal is not None:
                raise forms.ValidationError(refusal)
        return data

    def execute(self) -> str:
        """Send the update; where it landed."""
        key, value = self.cleaned_data["key"], self.cleaned_data["value"]
        outcome = gateway_client.update_namesrv_config({key: value})
        return outcome.sentence(f"Set {key}={value}")


OPERATION_FORMS: dict[str, type[OperationForm]] = {
    "register-topic": RegisterTopicForm,
    "delete-topic": DeleteTopicForm,
    "write-perm": WritePermForm,
    "unregister-broker": UnregisterBrokerForm,
    "kv-put": KVPutForm,
    "kv-delete": KVDeleteForm,
    "membership": MembershipForm,
    "namesrv-config": NamesrvConfigForm,
}
"""Every console operation by its URL slug."""
