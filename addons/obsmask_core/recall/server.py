"""The recall server: an MCP server (Streamable HTTP, JSON answers, no
session) with one tool, ``recall``, that the proxy serves itself.

Bytes of a POST in, the answer out; it never raises. A conversation id (a
tool call id) is answered with a stub that conversation masking replaces,
in the model's next request, with the text asked for (``conversation.recall``
says why no store is needed). A cut MCP string's id (``cut-...``) is
answered from the store with the text itself; one the store no longer
holds gets a JSON-RPC error that says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from obsmask_core.recall.store import StoredText, StoreError
from obsmask_core.shared.recall_text import (
    TOOL_NAME,
    RecallQuery,
    is_recall_id,
    is_store_id,
    pattern_fits,
)

# The protocol versions it speaks, newest first: an initialize asking for
# one of them gets it, any other gets the newest.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# The stateless era (no initialize: a client asks server/discover, then
# every request carries its version in params._meta).
MODERN_PROTOCOL_VERSIONS = ("2026-07-28",)
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"
UNSUPPORTED_PROTOCOL_VERSION = -32022
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
# The store failed (disk, permissions...): an error of the server's own range.
STORE_FAILED = -32603
# How many lines a model may ask for are not limited; these bounds only
# refuse numbers no text has.
MAX_LINE = 10**9 - 1  # nine digits: what a stub carries
MAX_PATTERN_CHARS = 1000

INSTRUCTIONS = (
    "obsmask shortens old tool results to save tokens. When you need one of "
    "them again, call recall with the id its placeholder or marker shows "
    "instead of running the tool again."
)

Lookup = Callable[[str], StoredText | None]
JsonObject = dict[str, object]


def server_info() -> JsonObject:
    """Who the server is, as initialize and server/discover say it (made
    anew for each answer, as the tool's description is)."""
    return {"name": "obsmask", "version": "0.1.0"}


def tool_description() -> JsonObject:
    """The recall tool, as tools/list describes it."""
    return {
        "name": TOOL_NAME,
        "title": "Recall a shortened tool result",
        "description": (
            "Get back the text of a tool result that obsmask shortened: a masked "
            "result (its placeholder ends with '; recall id=ID') or a cut string "
            "(its marker says 'recall id=cut-...'). Give that id. For a long text, "
            "take part of it: first_line and last_line (1-based, inclusive), or "
            "pattern (the lines that contain this text, each after its number)."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The id after 'recall id='."},
                "first_line": {"type": "integer", "minimum": 1},
                "last_line": {"type": "integer", "minimum": 1},
                "pattern": {"type": "string", "minLength": 1, "maxLength": MAX_PATTERN_CHARS},
            },
            "required": ["id"],
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
    }


@dataclass(frozen=True)
class ServerAnswer:
    """What to answer a POST with (``body`` empty for 202), and the ids
    recalled (for the flow's metadata)."""

    status: int
    body: bytes
    recalled: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # The store failed for one of the calls (its error is among ``errors``).
    store_failed: bool = False


class CallFailed(Exception):
    def __init__(self, code: int, message: str, data: JsonObject | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def answer_post(body: bytes, lookup: Lookup | None, store_days: int) -> ServerAnswer:
    """The answer to one POST of JSON-RPC (one message or a batch).
    ``lookup`` reads the store (None: recall keeps no store)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError) as e:
        return _single(400, _error(None, PARSE_ERROR, f"not JSON ({e})"))
    server = _Session(lookup, store_days)
    if isinstance(message, list):
        if not message:
            return _single(400, _error(None, INVALID_REQUEST, "an empty batch"))
        replies = [reply for item in message if (reply := server.handle(item)) is not None]
        payload: object = replies
    else:
        reply = server.handle(message)
        payload = reply
        replies = [] if reply is None else [reply]
    if not replies:
        return ServerAnswer(202, b"", server.recalled, server.errors, server.store_failed)
    return ServerAnswer(200, json.dumps(payload, ensure_ascii=False).encode("utf-8"),
                        server.recalled, server.errors, server.store_failed)


def error_body(message: str) -> bytes:
    """A JSON-RPC error with no id, for an answer refused before reading the
    body (recall off, a client not allowed, a method other than POST)."""
    return json.dumps(_error(None, INVALID_REQUEST, message), ensure_ascii=False).encode()


def _single(status: int, reply: JsonObject) -> ServerAnswer:
    return ServerAnswer(status, json.dumps(reply, ensure_ascii=False).encode("utf-8"),
                        errors=[str(_message_of(reply))])


def _message_of(reply: JsonObject) -> object:
    error = reply.get("error")
    return error.get("message") if isinstance(error, dict) else None


def _error(request_id: object, code: int, message: str,
           data: JsonObject | None = None) -> JsonObject:
    error: JsonObject = {"code": code, "message": f"obsmask recall: {message}"}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


class _Session:
    """The messages of one POST."""

    def __init__(self, lookup: Lookup | None, store_days: int) -> None:
        self.lookup = lookup
        self.store_days = store_days
        self.recalled: list[str] = []
        self.errors: list[str] = []
        self.store_failed = False

    def handle(self, message: object) -> JsonObject | None:
        """The reply to one message; None for a notification or a response."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return self._fail(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method = message.get("method")
        if "id" not in message:
            return None  # a notification (notifications/initialized...) or a response
        request_id = message["id"]
        if not isinstance(method, str):
            return None  # a response to a request the server never sent
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        try:
            result = self._result(method, params)
        except CallFailed as e:
            if e.code in (METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION):
                # Clients probe for methods and versions of other protocol
                # eras and fall back: not worth a warning.
                return _error(request_id, e.code, e.message, e.data)
            return self._fail(request_id, e.code, e.message)
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _fail(self, request_id: object, code: int, message: str) -> JsonObject:
        self.errors.append(message)
        return _error(request_id, code, message)

    def _result(self, method: str, params: JsonObject) -> JsonObject:
        meta = params.get("_meta")
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if version is None:
            return self._handshake_result(method, params)
        if version not in MODERN_PROTOCOL_VERSIONS:
            raise CallFailed(UNSUPPORTED_PROTOCOL_VERSION,
                             f"protocol version {version!r} is not supported",
                             {"supported": list(MODERN_PROTOCOL_VERSIONS), "requested": version})
        if method == "server/discover":
            result: JsonObject = {
                "supportedVersions": list(MODERN_PROTOCOL_VERSIONS),
                "capabilities": {"tools": {"listChanged": False}},
                "instructions": INSTRUCTIONS, "ttlMs": 0, "cacheScope": "private",
                "_meta": {SERVER_INFO_META_KEY: server_info()}}
        else:
            result = self._handshake_result(method, params)
            if method == "tools/list":  # a cacheable result on this wire
                result = {**result, "ttlMs": 0, "cacheScope": "private"}
        # The 2026-07-28 wire requires every result to say it is complete.
        return {**result, "resultType": "complete"}

    def _handshake_result(self, method: str, params: JsonObject) -> JsonObject:
        if method == "initialize":
            asked = params.get("protocolVersion")
            version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
            return {"protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": server_info(), "instructions": INSTRUCTIONS}
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [tool_description()]}
        if method == "tools/call":
            return self._call(params)
        raise CallFailed(METHOD_NOT_FOUND, f"no method {method!r} (this server has "
                                           "initialize or server/discover, ping, tools/list "
                                           "and tools/call)")

    def _call(self, params: JsonObject) -> JsonObject:
        if params.get("name") != TOOL_NAME:
            raise CallFailed(INVALID_PARAMS, f"no tool {params.get('name')!r}; the tool is "
                                             f"{TOOL_NAME!r}")
        arguments = params.get("arguments")
        query = _query(arguments if isinstance(arguments, dict) else {})
        if not is_store_id(query.recall_id):
            # A conversation result: the client holds it, the next request
            # brings it (see conversation.recall).
            self.recalled.append(query.recall_id)
            return _text_result(query.stub())
        stored = self._stored(query.recall_id)
        self.recalled.append(query.recall_id)
        return _text_result(query.select(stored.text))

    def _stored(self, recall_id: str) -> StoredText:
        if self.lookup is None:
            raise CallFailed(INVALID_PARAMS, f"no text with id {recall_id}: recall keeps no "
                                             "store here")
        try:
            stored = self.lookup(recall_id)
        except StoreError as e:
            self.store_failed = True
            raise CallFailed(STORE_FAILED, f"the store cannot be read ({e}); the text may "
                                           "come back once it can, or run the tool "
                                           "again") from None
        if stored is None:
            raise CallFailed(INVALID_PARAMS, (
                f"no text with id {recall_id}: it expired (a cut string is kept "
                f"{self.store_days} days after it was last cut), was pushed out by the "
                "store's size cap, or was never cut by this proxy's store; run the tool "
                "again to get it"))
        return stored


def _query(arguments: JsonObject) -> RecallQuery:
    """The call's arguments as a query; CallFailed naming a wrong one."""
    recall_id = arguments.get("id")
    if not isinstance(recall_id, str) or not is_recall_id(recall_id.strip()):
        raise CallFailed(INVALID_PARAMS, "id must be the id a placeholder or marker shows "
                                         f"after 'recall id=', got {recall_id!r}")
    lines: list[int | None] = []
    for key in ("first_line", "last_line"):
        value = arguments.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or not 1 <= value <= MAX_LINE):
            raise CallFailed(INVALID_PARAMS, f"{key} must be a line number from 1, "
                                             f"got {value!r}")
        lines.append(value if isinstance(value, int) else None)
    first, last = lines
    if first is not None and last is not None and last < first:
        raise CallFailed(INVALID_PARAMS, f"last_line ({last}) comes before first_line ({first})")
    pattern = arguments.get("pattern")
    if pattern is not None and (not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS
                                or not pattern_fits(pattern)):
        raise CallFailed(INVALID_PARAMS, "pattern must be a non-empty string of at most "
                                         f"{MAX_PATTERN_CHARS} characters (fewer when they "
                                         "are not ASCII)")
    unknown = sorted(set(arguments) - {"id", "first_line", "last_line", "pattern"})
    if unknown:
        raise CallFailed(INVALID_PARAMS, f"unknown argument {unknown[0]!r}")
    return RecallQuery(recall_id.strip(), first, last, pattern)


def _text_result(text: str) -> JsonObject:
    return {"content": [{"type": "text", "text": text}], "isError": False}
