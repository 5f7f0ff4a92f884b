"""The settings of recall (``[recall]``), declared once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.networks import check_networks
from obsmask_core.shared.redis_link import check_redis_url
from obsmask_core.shared.settings import check_fields, setting

RECALL_SECTION = ("recall",)
# The route of the recall server on the proxy (any host: the proxy answers
# it itself, as it does the gateway's routes).
RECALL_PATH = "/obsmask/mcp"
# The start of the proxy's start-up line when recall is on: ``obsmask
# claude`` and ``obsmask codex`` register the recall tool when they read it.
RECALL_ON_LINE = "obsmask: recall on:"
STORE_FILE_NAME = "recall.sqlite3"
SECONDS_PER_DAY = 86_400
# The store's value for the SQLite file (as the empty string).
SQLITE = "sqlite"


def check_store(key: str, value: object) -> None:
    """``store`` is empty, "sqlite" or a Redis URL."""
    if value not in ("", SQLITE):
        check_redis_url(key, value)


def check_key_prefix(key: str, value: object) -> None:
    if not isinstance(value, str) or not value or value != value.strip():
        raise SettingError(key, f"{value!r}: the prefix must be a non-empty string "
                                "with no spaces around it, e.g. \"obsmask:\"")


@dataclass(frozen=True, kw_only=True)
class RecallSettings:
    """Whether the model can get back what obsmask masked or cut. Each field
    is a setting: a key of ``[recall]`` and an ``obsmask_recall_<key>``
    option."""

    enabled: bool = setting(False, """
        Serve the recall tool at /obsmask/mcp on the proxy, add "; recall
        id=ID" to placeholders and markers ({recall} in their templates), put
        a recalled result back in the request that carries the tool's answer,
        and keep the whole of every cut MCP string in the store. false: the
        placeholders and markers are the plain ones and nothing is
        stored.""")
    data_dir: str = setting("", """
        The directory of the store of cut MCP strings (the file
        recall.sqlite3). Empty: $XDG_DATA_HOME/obsmask, or
        ~/.local/share/obsmask. Several proxies may share it.""")
    store: str = setting("", """
        Where the cut MCP strings are kept. Empty or "sqlite": the file
        recall.sqlite3 in data_dir. A Redis URL (redis://HOST:PORT/DB,
        rediss:// for TLS, unix:///PATH.sock): that server, shared by every
        proxy that names it, so a string cut by one is recalled through any
        other (docs/deployment.md); a server out of reach never holds up
        traffic: strings are cut as ever but not kept, and recall answers a
        JSON-RPC error, until it is back.""", check=check_store)
    store_key_prefix: str = setting("obsmask:", """
        With a Redis store: the start of every key obsmask writes there, so
        that several deployments can share one server.""", check=check_key_prefix)
    share_last_seen: bool = setting(True, """
        With a Redis store: the table of when conversations were last seen
        (cold_turns, provider_brake) is kept there too, so that a pause is seen by
        every proxy that shares it, and survives a restart; also with recall
        off. false: each proxy keeps its own, in memory.""")
    store_max_mb: int = setting(256, """
        The store's size on disk (or, in Redis, its compressed strings and
        their keys) stays under this many megabytes: the oldest strings go
        first.""", minimum=1)
    store_max_days: int = setting(7, """
        A string stays in the store this many days after it was last cut;
        recalling it later answers with a JSON-RPC error saying it
        expired.""", minimum=1)
    allow_clients: tuple[str, ...] = setting((), """
        Networks besides the loopback (127.0.0.0/8, ::1) whose clients may
        call the recall server, e.g. 192.168.1.0/24 (it answers with what
        the store holds).""", check=check_networks)

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def redis_url(self) -> str | None:
        """The Redis server of ``store``; None for the SQLite file."""
        return None if self.store in ("", SQLITE) else self.store

    @property
    def store_path(self) -> Path:
        return data_directory(self.data_dir) / STORE_FILE_NAME

    @property
    def store_max_bytes(self) -> int:
        return self.store_max_mb * 1024 * 1024

    @property
    def store_max_seconds(self) -> float:
        return float(self.store_max_days * SECONDS_PER_DAY)


def data_directory(setting_value: str) -> Path:
    """The data directory a ``data_dir`` setting names (``~`` expanded), or
    the XDG default."""
    if setting_value:
        return Path(setting_value).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "obsmask"
