"""The link to a Redis server that several proxies share (the recall store
of cut MCP strings, the table of when conversations were last seen): its
URL, checked as a setting, and a client that never holds a caller long.

The client is redis-py's: a pool of connections, each opened on first use
and opened again after an error, so a server that goes away and comes back
is reached again without anyone asking. Its waits are short: a server that
does not answer costs a caller at most ``connect_seconds`` to connect and
``answer_seconds`` per command, never the operating system's minutes.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from obsmask_core.shared.errors import SettingError

SCHEMES = ("redis", "rediss", "unix")
# What a command may raise once the link fails: the server is down or went
# away (ConnectionError, TimeoutError), answers an error (a full memory, a
# script it refuses: ResponseError), or a reply is not what was asked.
LinkErrors = (redis.RedisError, OSError)


def check_redis_url(key: str, value: object) -> None:
    """A ``redis://``, ``rediss://`` (TLS) or ``unix://`` URL redis-py can
    open; SettingError saying what is wrong otherwise."""
    url = str(value)
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise SettingError(key, f"{url!r} is not a Redis URL (redis://HOST:PORT/DB, "
                                "rediss://... for TLS, unix:///PATH.sock)")
    try:
        # Parsed as the client will (nothing is connected).
        redis.Redis.from_url(url).close()
        if parts.scheme != "unix" and not parts.hostname:
            raise ValueError("no host")
    except ValueError as e:
        raise SettingError(key, f"{url!r} is not a Redis URL ({e})") from None


def redacted(url: str) -> str:
    """The URL as a log line may show it: without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:***@" if parts.username else ":***@"
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{user}{host}").geturl()


def redis_client(url: str, *, connect_seconds: float,
                 answer_seconds: float) -> redis.Redis:
    """A client of the server at ``url``: nothing is connected yet. Binary
    replies (``decode_responses`` off); one retry, at once, of a command
    whose pooled connection turned out dead (the server restarted), so only
    a server still down fails a call."""
    return redis.Redis.from_url(
        url, socket_connect_timeout=connect_seconds, socket_timeout=answer_seconds,
        retry=Retry(NoBackoff(), 1), health_check_interval=0,
        client_name="obsmask",
    )
