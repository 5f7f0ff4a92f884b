"""The mitmproxy addon of recall: the recall server at ``/obsmask/mcp`` on
the proxy, the store of cut MCP strings, and the switch the two features
read (``enabled``: placeholders and markers say how to recall, and
conversation masking puts recalled results back).

The proxy answers the route itself, on any host, as it does the gateway's
routes: a client adds ``http://127.0.0.1:8080/obsmask/mcp`` like any MCP
server. Only clients on the loopback may use it unless ``allow_clients``
names their networks (the store holds tool output).

The store is the SQLite file in the data directory, or a Redis server
several proxies share (``[recall] store``); with Redis, the table of when
conversations were last seen (``cold_turns``) is kept there too
(``shared_last_seen``, which conversation masking visits). A store that
fails never breaks a flow: the first failure is one warning line, the
next ones are logged at debug (with their tracebacks) until it works
again, which is one info line; Redis is asked again at each use.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import MappingProxyType

from mitmproxy import http
from mitmproxy.addonmanager import Loader

from obsmask_core.conversation.billing.last_seen_redis import RedisLastSeen
from obsmask_core.mitm.flows import add_comment, guarded, log_once_sent, where
from obsmask_core.mitm.options import add_options, settings_in_force
from obsmask_core.mitm.settings_addon import FILE_OPTIONS, SettingsFile
from obsmask_core.recall.redis_store import RedisRecallStore
from obsmask_core.recall.server import ServerAnswer, answer_post, error_body
from obsmask_core.recall.settings import (
    RECALL_ON_LINE,
    RECALL_PATH,
    RECALL_SECTION,
    RecallSettings,
)
from obsmask_core.recall.store import RecallStorage, RecallStore, StoredText, StoreError
from obsmask_core.shared.networks import Network, client_allowed, client_networks
from obsmask_core.shared.redis_link import redacted
from obsmask_core.shared.request_record import RECALL_RECORD

logger = logging.getLogger(__name__)

PREFIX = "obsmask_recall_"
# flow.metadata key of a flow the recall server answered.
RECALL_METADATA = RECALL_RECORD
JSON_TYPE: Mapping[str, str] = MappingProxyType({"content-type": "application/json"})


def is_recall_route(path: str) -> bool:
    return path.split("?", 1)[0].rstrip("/") == RECALL_PATH


class Outage:
    """Says once that the store stopped working and once that it works
    again; the failures between go to debug, each with its traceback, so a
    server that is down is one warning line, not one per flow."""

    def __init__(self) -> None:
        self._down = False
        self._lock = threading.Lock()

    def failed(self, message: str, error: BaseException) -> None:
        with self._lock:
            first, self._down = not self._down, True
        if first:
            logger.warning("obsmask: recall store: %s; until it works again, cut MCP strings "
                           "are cut but not kept and recalls of them answer an error "
                           "(asked again at each use; the next failures are logged at "
                           "debug)", message)
        logger.debug("obsmask: recall store: %s", message, exc_info=error)

    def worked(self) -> None:
        with self._lock:
            was_down, self._down = self._down, False
        if was_down:
            logger.info("obsmask: recall store: works again")


class Recall:
    """Serves the recall tool and keeps the store of cut MCP strings."""

    def __init__(self, settings: SettingsFile) -> None:
        self.settings_file = settings
        self.settings = RecallSettings()
        self.allowed: tuple[Network, ...] = ()
        self.store: RecallStorage | None = None
        # With a Redis store: the table of when conversations were last
        # seen, shared with the other proxies (None: each keeps its own).
        self.shared_last_seen: RedisLastSeen | None = None
        self.outage = Outage()
        # The store is written by one thread of its own, so compressing and
        # writing a long string never holds up the event loop; until a
        # string is written, recall reads it from here.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="obsmask-recall")
        self._pending: dict[str, str] = {}
        self._options: set[str] = set(FILE_OPTIONS)

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def load(self, loader: Loader) -> None:
        self._options.update(add_options(loader, RecallSettings, PREFIX))

    def configure(self, updated: set[str]) -> None:
        if not updated & self._options:
            return
        config = self.settings_file.current()
        settings = settings_in_force(RecallSettings, PREFIX, config, RECALL_SECTION,
                                     lambda: config.settings(RecallSettings, RECALL_SECTION))
        settings, source = self.settings_file.switched(settings, PREFIX, config,
                                                       RECALL_SECTION)
        self.allowed = client_networks("allow_clients", settings.allow_clients)
        if self.store is not None and (not settings.enabled or _store_changed(
                self.settings, settings)):
            self.flush()
            self.store.close()
            self.store = None
        self._share_last_seen(settings)
        self.settings = settings
        if not settings.enabled:
            logger.info("obsmask: recall off (settings: %s)", source)
            return
        if self.store is None:
            self.store = open_store(settings)
        logger.info(RECALL_ON_LINE + " the recall tool at %s; cut MCP strings kept in %s "
                    "(%d MB, %d days) (settings: %s)", RECALL_PATH, self.store.where,
                    settings.store_max_mb, settings.store_max_days, source)

    def _share_last_seen(self, settings: RecallSettings) -> None:
        url = settings.redis_url if settings.share_last_seen else None
        table = self.shared_last_seen
        if table is not None and (url, settings.store_key_prefix) == table.link:
            return
        if table is not None:
            table.close()
            self.shared_last_seen = None
        if url is not None:
            self.shared_last_seen = RedisLastSeen(
                url, key_prefix=settings.store_key_prefix,
                failed=lambda e: self.outage.failed(
                    f"the last-seen table is this proxy's own for now: {e}", e),
                worked=self.outage.worked)
            logger.info("obsmask: the last-seen table (cold_turns, provider_brake) is kept in %s",
                        redacted(url))

    def done(self) -> None:
        """Write what is still pending, then close the store (a proxy that
        stops keeps every string it cut)."""
        self._writer.shutdown(wait=True)
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.shared_last_seen is not None:
            self.shared_last_seen.close()
            self.shared_last_seen = None

    def flush(self) -> None:
        """Wait until every string handed to keep() is written."""
        self._writer.submit(lambda: None).result()

    def keep(self, recall_id: str, text: str) -> None:
        """Keep the whole of a cut MCP string under its id, written by the
        store's thread. It never raises: a failing store is logged, the
        answer still goes out cut, and recalling the string later says it
        is not there."""
        store = self.store
        if store is None:
            return
        self._pending[recall_id] = text
        try:
            self._writer.submit(self._write, store, recall_id, text)
        except RuntimeError:  # the proxy is stopping: the writer is shut
            self._pending.pop(recall_id, None)

    def _write(self, store: RecallStorage, recall_id: str, text: str) -> None:
        try:
            kept = store.put(recall_id, text)
            self.outage.worked()
            if not kept:
                logger.warning("obsmask: recall store: %s (%s chars) not kept: larger than "
                               "a quarter of the store's cap", recall_id, f"{len(text):,}")
        except StoreError as e:
            self.outage.failed(f"{recall_id} not kept: {e}", e)
        except Exception:
            logger.exception("obsmask: recall store: internal error, %s not kept", recall_id)
        finally:
            self._pending.pop(recall_id, None)

    def _lookup(self, recall_id: str) -> StoredText | None:
        pending = self._pending.get(recall_id)
        if pending is not None:
            return StoredText(pending, time.time())
        if self.store is None:
            return None
        try:
            stored = self.store.get(recall_id)
        except StoreError as e:
            self.outage.failed(f"{recall_id} not read: {e}", e)
            raise
        self.outage.worked()
        return stored

    @staticmethod
    def answered(flow: http.HTTPFlow) -> bool:
        """Did the recall server answer this flow? (MCP truncation leaves its
        answer whole: the model asked for that text.)"""
        return RECALL_METADATA in flow.metadata

    async def request(self, flow: http.HTTPFlow) -> None:
        # A flow read from a file already has its answer.
        if not is_recall_route(flow.request.path) or flow.response:
            return
        with guarded(flow, "left without an answer"):
            await self._serve(flow)

    async def _serve(self, flow: http.HTTPFlow) -> None:
        facts: dict[str, object] = {}
        flow.metadata[RECALL_METADATA] = facts
        peer = flow.client_conn.peername
        if not self.enabled:
            self._refuse(flow, 404, "recall is off here ([recall] enabled, "
                                    "obsmask_recall_enabled)")
        elif peer and not client_allowed(str(peer[0]), self.allowed):
            self._refuse(flow, 403, f"client {peer[0]} is not on the loopback; the recall "
                                    "server serves other clients only in the networks of "
                                    "obsmask_recall_allow_clients ([recall] allow_clients)")
        elif flow.request.method != "POST":
            # No server-initiated stream and no session to end.
            self._refuse(flow, 405, f"{flow.request.method} is not served; POST JSON-RPC",
                         {"allow": "POST"})
        else:
            body = flow.request.get_content(strict=False) or b""
            # In a thread: reading and decompressing a long string (or
            # waiting for the store's lock while it writes) never holds up
            # the event loop.
            answer = await asyncio.to_thread(answer_post, body, self._lookup,
                                             self.settings.store_max_days)
            self._answer(flow, answer, facts)

    def _answer(self, flow: http.HTTPFlow, answer: ServerAnswer,
                facts: dict[str, object]) -> None:
        headers = dict(JSON_TYPE) if answer.body else {}
        flow.response = http.Response.make(answer.status, answer.body, headers)
        if answer.recalled:
            facts["recalled"] = answer.recalled
            add_comment(flow, f"obsmask recall: {', '.join(answer.recalled)}")
            log_once_sent(flow, logger, "obsmask: %s: recall %s", where(flow),
                          ", ".join(answer.recalled))
        if answer.errors:
            facts["errors"] = answer.errors
            # A store out of use was said once (Outage); its errors here
            # would be a warning per recall.
            level = logging.DEBUG if answer.store_failed else logging.WARNING
            for message in answer.errors:
                logger.log(level, "obsmask: %s: %s", where(flow), message)

    @staticmethod
    def _refuse(flow: http.HTTPFlow, status: int, message: str,
                headers: dict[str, str] | None = None) -> None:
        flow.response = http.Response.make(status, error_body(message),
                                           {**JSON_TYPE, **(headers or {})})
        flow.metadata[RECALL_METADATA]["errors"] = [message]
        add_comment(flow, f"obsmask recall: {message}")
        logger.warning("obsmask: %s: %s", where(flow), message)


def open_store(settings: RecallSettings) -> RecallStorage:
    """The store the settings name (nothing is opened or connected yet)."""
    if settings.redis_url is not None:
        return RedisRecallStore(settings.redis_url, key_prefix=settings.store_key_prefix,
                                max_bytes=settings.store_max_bytes,
                                max_age_seconds=settings.store_max_seconds)
    return RecallStore(settings.store_path, max_bytes=settings.store_max_bytes,
                       max_age_seconds=settings.store_max_seconds)


def _store_changed(old: RecallSettings, new: RecallSettings) -> bool:
    def store(settings: RecallSettings) -> tuple[Path, str | None, str, int, float]:
        return (settings.store_path, settings.redis_url, settings.store_key_prefix,
                settings.store_max_bytes, settings.store_max_seconds)
    return store(old) != store(new)
