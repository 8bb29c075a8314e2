"""``REDIS_URL`` as the settings hand it to every Redis client (namesrv_site.redis_url):
a ``rediss://`` link always checks the server, and an option that would weaken or
break it is refused naming the option, never the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from namesrv_site.redis_url import RedisUrlError, checked_redis_url

PASSWORD = "s3cret-redis-password"
PLAIN = f"redis://:{PASSWORD}@10.0.0.9:6379/0"
TLS = f"rediss://:{PASSWORD}@redis.example:6380/0"


def test_a_plain_url_is_left_as_it_is() -> None:
    assert checked_redis_url(PLAIN) == PLAIN


def test_a_tls_url_without_options_checks_the_server_with_the_systems_cas() -> None:
    assert checked_redis_url(TLS) == f"{TLS}?ssl_cert_reqs=required"


def test_a_tls_url_keeps_its_ca_file_and_gets_the_check_added(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    url = f"{TLS}?ssl_ca_certs={ca}"
    assert checked_redis_url(url) == f"{url}&ssl_cert_reqs=required"
    assert checked_redis_url(f"{url}&ssl_cert_reqs=required") == f"{url}&ssl_cert_reqs=required"


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("ssl_cert_reqs=none", "ssl_cert_reqs=none"),
        ("ssl_cert_reqs=optional", "ssl_cert_reqs=optional"),
        ("ssl_cert_reqs=CERT_REQUIRED", "ssl_cert_reqs=CERT_REQUIRED"),
        ("ssl_check_hostname=false", "ssl_check_hostname=false"),
        ("ssl_ca_certs=/no/such/ca.pem", "ssl_ca_certs=/no/such/ca.pem: not a readable file"),
        ("ssl_keyfile=/no/such/client.key", "ssl_keyfile=/no/such/client.key"),
    ],
)
def test_an_option_that_weakens_or_breaks_a_tls_link_is_refused_by_name(
    query: str, named: str
) -> None:
    with pytest.raises(RedisUrlError, match=named) as refused:
        checked_redis_url(f"{TLS}?{query}")
    assert PASSWORD not in str(refused.value)


def test_tls_options_on_a_plain_url_are_refused_since_they_would_do_nothing() -> None:
    with pytest.raises(RedisUrlError, match="ssl_ca_certs: TLS options need a rediss:// URL"):
        checked_redis_url(f"{PLAIN}?ssl_ca_certs=/etc/namesrv/ca.pem")
