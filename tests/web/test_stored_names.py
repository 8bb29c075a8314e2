"""Every name the wire stores renders: no 500, escaped, and linkable.

The wire keeps upstream's acceptance, so a topic, broker group, cluster or KV
namespace/key/value may hold ``/``, ``..``, quotes, markup, ``%``, ``?``, ``#``,
spaces, unicode, more than 127 characters and (topics, KV values) control
characters. The names are registered through the real service on a real route
table and projected with ``write_full_state``, as ``conftest.project_cast`` does;
then every console page and API endpoint that shows them is asked.
"""

from __future__ import annotations

import asyncio
import json
import unicodedata
from dataclasses import dataclass
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.core.asgi import get_asgi_application
from django.test import Client
from django.urls import resolve, reverse
from hypothesis import HealthCheck, given, settings, strategies as st

from gateway.clock import ManualClock
from gateway.services import NameServerService
from localcluster.demo import DemoBroker
from namesrv_app import gateway_client
from namesrv_app.api.route_reads import CACHE, RouteReads
from namesrv_app.projection.delta import read_full_state
from namesrv_app.projection.rows import write_full_state
from namesrv_app.tokens import issue_token
from namesrv_app.web.names import name_to_segment, segment_to_name
from raftstore.replicator import LocalReplicator
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration
from tests.web.asgi import Answer, asgi_answer, asgi_scope
from tests.web.conftest import CLUSTER, START_MS, RunningGateway, log_in, make_user

SCRIPT_TOPIC = "<script>alert(1)</script>"
SLASH_TOPIC = "orders/eu"
PLAIN_TOPIC = "TopicTest"
UNREACHABLE = {"NODE_ID": "n1", "PORT": 1, "INTERNAL_PORT": 1, "INTERNAL_SECRET": "x"}
LIVE_JS = Path(__file__).resolve().parents[2] / "namesrv_app/static/namesrv/live.js"
NAME_CHARS_MAX = 255
EXAMPLES = 30


# ------------------------------------------------------------------- names


@dataclass(frozen=True)
class Names:
    """One example: the names a broker registers, and one KV item."""

    topics: tuple[str, ...]
    broker: str
    cluster: str
    namespace: str
    key: str
    value: str


async def _register(service: NameServerService, names: Names) -> None:
    wrapper = TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=START_MS, counter=1),
        # Never a single topic: upstream refuses a new broker's one-topic registration.
        topic_config_table={t: TopicConfig(t, 4, 4, 6) for t in (*names.topics, PLAIN_TOPIC)},
    )
    await service.register_broker(
        BrokerRegistration(
            cluster_name=names.cluster,
            broker_addr="127.0.0.1:1",
            broker_name=names.broker,
            broker_id=0,
            ha_server_addr="127.0.0.1:2",
        ),
        wrapper,
        channel="chan-names",
    )
    await service.put_kv(namespace=names.namespace, key=names.key, value=names.value)


def project_names(names: Names) -> None:
    """Register ``names`` on a real table and write it into the test DB (the whole projection)."""
    replicator = LocalReplicator("n1")
    asyncio.run(_register(NameServerService(replicator, ManualClock(START_MS)), names))
    write_full_state(replicator.read(read_full_state), "n1", "eventual")


SPECIAL = st.sampled_from(
    [
        SCRIPT_TOPIC,
        SLASH_TOPIC,
        "a/b",
        "..",
        ".",
        "/",
        "//",
        "~",
        "~7E",
        "~zz",
        "%2F",
        "%",
        "a%41",
        "?x=1",
        "#top",
        " padded ",
        "",
        "x/compare",
        "TopicTest",
        'it\'s "quoted"',
    ]
)
MARKUP = st.builds(
    lambda tag, inner: f'<{tag} data-probe="{inner}">{inner}</{tag}>',
    st.sampled_from(["script", "b", "img", "svg", "a"]),
    st.text(alphabet="ab/%?#&' ", max_size=6),
)
URL_HOSTILE = st.text(
    alphabet=st.sampled_from(
        [*"/.%?#&+=;:~ \t", *"aZ9_-|", *"é日本", "\u202e", "\U0001f600", "\x00", "\x7f", "\n"]
    ),
    max_size=12,
)
LONG = st.text(alphabet=st.sampled_from([*"ab/%~ .?"]), min_size=128, max_size=240)
# "<" only ever comes with markup around it, so "the raw name is not in the page"
# cannot be fooled by a name like "<a" that the page's own markup contains.
# No lone surrogates: the service refuses them (not Unicode text; no page or database
# can hold one), tests/gateway/test_register_broker.py.
ANY = st.text(
    alphabet=st.characters(exclude_characters="<", exclude_categories=["Cs"]), max_size=30
)
TOPIC = st.one_of(SPECIAL, MARKUP, URL_HOSTILE, LONG, ANY)


def _storable(name: str) -> bool:
    """What the service stores as a cluster, broker group, namespace or key."""
    has_control = any(unicodedata.category(ch) == "Cc" for ch in name)
    return 0 < len(name) <= NAME_CHARS_MAX and not has_control


NAME = TOPIC.filter(_storable)
NAMES = st.builds(
    Names,
    # Never PLAIN_TOPIC itself: with it the table could hold one topic only.
    topics=st.lists(
        TOPIC.filter(lambda t: t != PLAIN_TOPIC), min_size=1, max_size=3, unique=True
    ).map(tuple),
    broker=NAME,
    cluster=NAME,
    namespace=NAME,
    key=NAME,
    value=TOPIC,
)


# ------------------------------------------------------------------- reading pages


class _Links(HTMLParser):
    """Every ``<a href>`` of a page with its text (entities resolved, as a browser does)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self._open: list[tuple[str, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open.append((dict(attrs).get("href") or "", []))

    def handle_data(self, data: str) -> None:
        for _, text in self._open:
            text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open:
            href, text = self._open.pop()
            self.links.append((href, "".join(text)))


def links(html: str) -> list[tuple[str, str]]:
    """(href, text) of every link of ``html``."""
    parser = _Links()
    parser.feed(html)
    parser.close()
    return parser.links


def page(client: Client, url: str, data: dict[str, str] | None = None) -> str:
    """GET a console page; it must answer 200."""
    response = client.get(url, data)
    assert response.status_code == 200, (url, data, response.status_code)
    return response.content.decode()


def assert_shows(html: str, name: str) -> None:
    """``name`` is on the page, HTML-escaped, and never as raw markup."""
    assert escape(name) in html, name
    if "<" in name:
        assert name not in html, name


def topic_link(html: str, topic: str) -> str:
    """The href of the link whose text is exactly ``topic``."""
    hrefs = [href for href, text in links(html) if text == topic]
    assert hrefs, f"no link for {topic!r}"
    return hrefs[0]


def api_get(client: Client, url: str, data: dict[str, str] | None = None) -> Any:
    """GET an API endpoint as JSON; it must answer 200."""
    response = client.get(url, data, headers={"Accept": "application/json"})
    assert response.status_code == 200, (url, data, response.status_code, response.content[:200])
    return response.json()


# ------------------------------------------------------------------- console


def check_console(client: Client, names: Names) -> None:
    """Every console page showing the names answers 200 with them escaped and linkable."""
    # Every type: a generated topic may equal the cluster or a broker name, which RocketMQ
    # counts as a system topic and the page hides by default.
    overview, topics_page = page(client, "/"), page(client, "/topics/", {"type": "all"})
    topology = page(client, "/topology/")
    for html in (overview, topics_page, topology):
        assert_shows(html, names.cluster)
    for html in (topology, page(client, "/topology/", {"cluster": names.cluster})):
        assert_shows(html, names.broker)
    for topic in names.topics:
        assert_shows(overview, topic)
        assert_shows(topics_page, topic)
        assert_shows(page(client, "/topics/", {"search": topic, "type": "all"}), topic)
        check_topic_page(client, topic_link(topics_page, topic), topic, names)
        assert topic_link(overview, topic) == topic_link(topics_page, topic)
    kv = page(client, "/kv/")
    for shown in (names.namespace, names.key, names.value):
        assert_shows(kv, shown)
    delete = next(href for href, text in links(kv) if text == "delete…")
    form = client.get(delete).context["form"]
    assert (form.initial["namespace"], form.initial["key"]) == (names.namespace, names.key)
    brokers = page(client, "/brokers/")
    assert_shows(brokers, names.broker)
    assert_shows(brokers, names.cluster)


def check_topic_page(client: Client, href: str, topic: str, names: Names) -> None:
    """Following a topic's link opens that topic's page, and its delete link names it."""
    response = client.get(href)
    assert response.status_code == 200, (href, topic)
    assert response.context["topic"] == topic
    html = response.content.decode()
    assert_shows(html, topic)
    assert_shows(html, names.broker)
    delete = next(h for h, text in links(html) if text == "delete…")
    assert client.get(delete).context["form"].initial["topic"] == topic


# ------------------------------------------------------------------- API


def check_api(client: Client, names: Names) -> None:
    """Every API endpoint showing the names answers 200 with exactly those names."""
    listed = {row["topic"] for row in api_get(client, "/api/v1/topics/")["results"]}
    assert set(names.topics) <= listed
    for topic in names.topics:
        check_api_topic(client, topic, names)
    clusters = api_get(client, "/api/v1/clusters/")
    assert [(c["name"], c["broker_names"]) for c in clusters] == [(names.cluster, [names.broker])]
    for query in ({}, {"search": names.broker}, {"cluster": names.cluster}):
        groups = api_get(client, "/api/v1/broker-groups/", query)["results"]
        assert [(g["broker_name"], g["cluster"]) for g in groups] == [(names.broker, names.cluster)]
    kv = api_get(client, "/api/v1/kv/")
    entries = [(ns["namespace"], e["key"], e["value"]) for ns in kv for e in ns["entries"]]
    assert (names.namespace, names.key, names.value) in entries
    browsable = client.get("/api/v1/topics/", headers={"Accept": "text/html"})
    assert browsable.status_code == 200
    for topic in names.topics:
        if "<" in topic:
            assert topic not in browsable.content.decode()


def check_api_topic(client: Client, topic: str, names: Names) -> None:
    """A topic's search, summary, route and comparison, each through its reversed URL."""
    search = client.get(
        "/api/v1/topics/", {"search": topic}, headers={"Accept": "application/json"}
    )
    if "\x00" in topic:
        # Documented: DRF refuses NUL in a query parameter (PostgreSQL could not hold it).
        assert search.status_code == 400 and "search" in search.json()
    else:
        assert search.status_code == 200
        assert topic in {row["topic"] for row in search.json()["results"]}
    summary = api_get(client, reverse("api:topic", kwargs={"topic": topic}))
    assert (summary["topic"], summary["brokers"]) == (topic, 1)
    route = api_get(client, reverse("api:route", kwargs={"topic": topic}))
    assert route["topic"] == topic
    assert [q["brokerName"] for q in route["route"]["queueDatas"]] == [names.broker]
    compared = api_get(client, reverse("api:route-compare", kwargs={"topic": topic}))
    assert compared["topic"] == topic


# ------------------------------------------------------------------- the property


@pytest.fixture
def clients(db: Any, settings: Any) -> tuple[Client, Client]:
    """(the console as an operator, the API with a viewer's token); no gateway answers."""
    settings.NAMESRV = UNREACHABLE
    console = Client()
    make_user("otto", "operator")
    assert log_in(console, "otto")
    key, _ = issue_token(make_user("vera", "viewer"))
    return console, Client(headers={"Authorization": f"Token {key}"})


def test_every_stored_name_renders_escaped_and_links_to_its_own_page(
    clients: tuple[Client, Client],
) -> None:
    console, api = clients

    @given(NAMES)
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    def check(names: Names) -> None:
        CACHE.clear()
        project_names(names)
        check_console(console, names)
        check_api(api, names)

    check()


@given(TOPIC)
@settings(max_examples=200, deadline=None)
def test_every_name_round_trips_through_its_url(name: str) -> None:
    segment = name_to_segment(name)
    assert segment and "/" not in segment and segment not in (".", "..")
    assert segment_to_name(segment) == name
    url = reverse("console:topic", kwargs={"topic": name})
    assert url.isascii()
    assert resolve(_decoded_path(url)).kwargs == {"topic": name}


def _decoded_path(url: str) -> str:
    """The path as the server hands it to Django: percent-decoded once (UTF-8)."""
    from urllib.parse import unquote

    return unquote(url, errors="surrogatepass")


# ------------------------------------------------------------------- the two names of the report


@pytest.mark.parametrize("topic", [SCRIPT_TOPIC, SLASH_TOPIC])
def test_the_reported_names_no_longer_break_the_overview_and_the_topic_list(
    clients: tuple[Client, Client], topic: str
) -> None:
    console, _ = clients
    names = Names((topic,), "broker-a", CLUSTER, "ns", "k", topic)
    project_names(names)
    for url in ("/", "/topics/"):
        html = page(console, url)
        assert_shows(html, topic)
    href = topic_link(page(console, "/topics/"), topic)
    opened = console.get(href)
    assert opened.status_code == 200 and opened.context["topic"] == topic


def test_the_script_name_is_shown_as_text_and_never_as_a_script(
    clients: tuple[Client, Client],
) -> None:
    console, _ = clients
    project_names(Names((SCRIPT_TOPIC,), "broker-a", CLUSTER, "ns", "k", "v"))
    html = page(console, "/topics/")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script") == 1  # the console's own live.js
    assert topic_link(html, SCRIPT_TOPIC) == "/topics/~~3Cscript~3Ealert~281~29~3C~2Fscript~3E/"


def test_the_slash_name_gets_one_path_segment_that_opens_its_page(
    clients: tuple[Client, Client],
) -> None:
    console, api = clients
    project_names(Names((SLASH_TOPIC,), "broker-a", CLUSTER, "ns", "k", "v"))
    assert topic_link(page(console, "/topics/"), SLASH_TOPIC) == "/topics/~orders~2Feu/"
    route = api.get("/api/v1/routes/~orders~2Feu/", headers={"Accept": "application/json"})
    assert route.status_code == 200 and route.json()["topic"] == SLASH_TOPIC
    # The raw slash is another path (404), never the topic's page.
    assert console.get("/topics/orders/eu/").status_code == 404


def test_a_malformed_escaped_segment_is_not_found(clients: tuple[Client, Client]) -> None:
    console, api = clients
    for bad in ("~zz", "~61", "~2", "~2f", "~a b", "~%C3"):
        assert console.get(f"/topics/{bad}/").status_code == 404, bad
        assert api.get(f"/api/v1/routes/{bad}/").status_code == 404, bad


def test_a_topic_following_the_rule_keeps_its_plain_url(clients: tuple[Client, Client]) -> None:
    assert reverse("console:topic", kwargs={"topic": "TopicTest"}) == "/topics/TopicTest/"
    assert reverse("api:route", kwargs={"topic": "a%41|b"}) == "/api/v1/routes/a%2541%7Cb/"


# ------------------------------------------------------------------- route reads beside Django


def test_route_reads_beside_django_and_the_drf_view_read_a_name_the_same_way(
    transactional_db: Any, settings: Any
) -> None:
    """A name under the topic rule is answered beside Django; a ~-escaped one is the DRF
    view's; both as the view alone answers them."""
    settings.NAMESRV = UNREACHABLE
    project_names(Names(("a%41", SLASH_TOPIC), "broker-a", CLUSTER, "ns", "k", "v"))
    key, _ = issue_token(make_user("vera", "viewer"))
    auth = [(b"authorization", f"Token {key}".encode()), (b"accept", b"application/json")]
    django = get_asgi_application()
    app = RouteReads(django)
    # uvicorn's scope holds the decoded path: /api/v1/routes/a%2541/ and ~orders~2Feu.
    plain = asgi_scope("/api/v1/routes/a%41/", auth)
    escaped = asgi_scope("/api/v1/routes/~orders~2Feu/", auth)

    async def answers() -> list[Answer]:
        return [await asgi_answer(app, plain) for _ in range(2)] + [
            await asgi_answer(app, escaped),
            await asgi_answer(django, plain),
            await asgi_answer(django, escaped),
        ]

    learnt, beside, declined, view_plain, view_escaped = asyncio.run(answers())
    assert CACHE.misses == 1 and json.loads(beside[2])["topic"] == "a%41"
    assert json.loads(declined[2])["topic"] == SLASH_TOPIC
    assert learnt[2] == beside[2] == view_plain[2]
    assert declined[2] == view_escaped[2]


# ------------------------------------------------------------------- over the wire


def test_names_registered_over_the_wire_are_read_back_over_the_wire(
    wired: RunningGateway, clients: tuple[Client, Client], settings: Any
) -> None:
    from tests.web.conftest import node_settings

    settings.NAMESRV = node_settings(wired)
    console, api = clients
    broker = DemoBroker(CLUSTER, "broker-names", 0, "127.0.0.1:10951", "127.0.0.1:10952")
    assert wired.register(broker, (SCRIPT_TOPIC, SLASH_TOPIC)) == 0
    try:
        for topic in (SCRIPT_TOPIC, SLASH_TOPIC):
            url = reverse("api:route", kwargs={"topic": topic})
            read = api.get(
                url, {"consistency": "linearizable"}, headers={"Accept": "application/json"}
            )
            assert read.status_code == 200, read.content
            assert read.json()["route"]["queueDatas"][0]["brokerName"] == "broker-names"
            compared = api_get(api, reverse("api:route-compare", kwargs={"topic": topic}))
            assert [n["status"] for n in compared["nodes"]] == ["ok"]
            detail = console.get(reverse("console:topic", kwargs={"topic": topic}))
            assert detail.status_code == 200 and "all nodes agree" in detail.content.decode()
    finally:
        gateway_client.unregister_broker(CLUSTER, broker.addr, broker.broker_name, 0)
        wired.broker_clients.pop(broker.addr).close()


# ------------------------------------------------------------------- live updates


def test_the_live_script_writes_event_text_never_markup() -> None:
    """Event names reach the page as textContent; refreshed parts come escaped from the server."""
    script = LIVE_JS.read_text(encoding="utf-8")
    assert "textContent" in script
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
        assert sink not in script, sink
