"""Where the gateway addon sends a gateway flow: a POST is answered in the
addon's hook with its server's answer (``GatewayRelay.call``), one hop as
on a direct route; an answer that is an event stream, and every other
method, go to the relay's HTTP server, which mitmproxy forwards the flow
to. A flow the gateway refuses is answered with its JSON-RPC error."""

from __future__ import annotations

import asyncio
import logging
import time

from mitmproxy import connection, ctx, http

from obsmask_core.gateway.errors import (
    GATEWAY_INTERNAL,
    GatewayFailure,
    error_response,
    request_id_text,
)
from obsmask_core.gateway.headers import (
    KEEP_ALIVE_HEADER,
    PARKED_HEADER,
    REFUSED_HEADER,
    RELAY_HEADER,
)
from obsmask_core.gateway.relay import GatewayRelay
from obsmask_core.gateway.upstream_answers import Answer
from obsmask_core.gateway.upstreams import GatewaySpec, Upstream
from obsmask_core.mitm.flows import MCP_METADATA, add_comment, log_once_sent, where
from obsmask_core.shared.request_record import McpKey

logger = logging.getLogger(__name__)

# While POSTs wait for their servers, how often the addon looks whether
# their clients left (mitmproxy tells no hook): such a call is cancelled,
# which closes its server's connection, as the relay does at once.
CLIENT_CHECK_SECONDS = 0.1
# mitmproxy's addons that act on a request after a script's (they come
# later in its chain), by the options that turn them on, and the intercept
# that holds a flow for the user after every hook. With any of them on, a
# POST goes through the relay as every request once did: the call must
# leave after they acted, not from this addon's hook.
LATER_ADDON_OPTIONS = ("intercept_active", "modify_body", "modify_headers", "map_local",
                       "map_remote", "server_replay", "stickyauth", "stickycookie")


def later_addons_may_act() -> bool:
    """Is an option of one of mitmproxy's later addons on?"""
    return any(getattr(ctx.options, name, None) for name in LATER_ADDON_OPTIONS)


class ClientWatch:
    """The hook tasks waiting for a server, and their clients: one timer for
    all of them cancels the task of a client that left (and remembers it,
    for the task to tell that cancellation from the proxy stopping)."""

    def __init__(self) -> None:
        self._waiting: dict[asyncio.Task[object], connection.Client] = {}
        self._left: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, task: asyncio.Task[object], client: connection.Client) -> None:
        self._waiting[task] = client
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(CLIENT_CHECK_SECONDS,
                                                                self._check)

    def done(self, task: asyncio.Task[object]) -> bool:
        """Stop watching ``task``: whether it was cancelled because its
        client left."""
        self._waiting.pop(task, None)
        left = task in self._left
        self._left.discard(task)
        return left

    def _check(self) -> None:
        self._timer = None
        for task, client in list(self._waiting.items()):
            if not client.state & connection.ConnectionState.CAN_READ:
                del self._waiting[task]
                self._left.add(task)
                task.cancel()
        if self._waiting:
            self._timer = asyncio.get_running_loop().call_later(CLIENT_CHECK_SECONDS,
                                                                self._check)


class GatewayRouting:
    """Routes a flow of ``/api/mcp-gateway/NAME/rpc`` to the server NAME of
    the gateway in force (the spec each call is given)."""

    def __init__(self, relay: GatewayRelay) -> None:
        self.relay = relay
        self.watch = ClientWatch()

    def facts(self, flow: http.HTTPFlow, name: str, spec: GatewaySpec) -> GatewayFailure | None:
        """Record the flow's server (and its address, when the gateway
        serves the flow); why the gateway refuses it, if it does."""
        peer = flow.client_conn.peername
        # No peer: a flow the proxy made itself (a client replay), not a client's.
        failure = spec.refusal(str(peer[0]) if peer else None, name)
        facts: dict[str, object] = {McpKey.GATEWAY_SERVER: name}
        if failure is None:
            facts[McpKey.GATEWAY_UPSTREAM] = spec.servers[name].url
        flow.metadata[MCP_METADATA] = facts
        return failure

    async def route(self, flow: http.HTTPFlow, name: str, spec: GatewaySpec) -> None:
        """Answer the flow here or send it to the relay (the module says
        which); a flow the gateway refuses gets its error."""
        failure = self.facts(flow, name, spec)
        if failure is not None:
            fail(flow, name, failure)
            return
        upstream = spec.servers[name]
        log_once_sent(flow, logger, "obsmask: gateway %s %s -> %s", flow.request.method, name,
                      upstream.url)
        # Over HTTP/2 and HTTP/3 a client gives up by resetting its stream,
        # which no hook sees while the call waits: its POSTs go through the
        # relay, whose connection mitmproxy closes then.
        if flow.request.method == "POST" and flow.request.http_version.startswith("HTTP/1") \
                and not flow.intercepted and not later_addons_may_act():
            # A client must not name a parked stream: only the call below does.
            flow.request.headers.pop(PARKED_HEADER, None)
            parked = await self._call(flow, name, upstream)
            if parked is None:
                return  # answered, failed or left
            flow.request.headers[PARKED_HEADER] = parked
            await self.to_relay(flow, name, parked=True)
            return
        await self.to_relay(flow, name)

    async def to_relay(self, flow: http.HTTPFlow, name: str, *, parked: bool = False) -> None:
        """Send the flow to the relay: mitmproxy forwards it there, and the
        relay talks to the server (or has the server's event stream already,
        ``parked``); the answer comes back as any other."""
        if not parked:
            # A client must not name a parked stream: only a call does.
            flow.request.headers.pop(PARKED_HEADER, None)
        flow.request.headers.pop(REFUSED_HEADER, None)
        port = await self.relay.ensure_started()
        flow.request.headers[RELAY_HEADER] = name
        # mitmproxy sends the client's next request on the same connection
        # (unless one of them says close), as it would to a server.
        flow.request.headers[KEEP_ALIVE_HEADER] = "1"
        flow.request.scheme = "http"
        flow.request.host = "127.0.0.1"
        flow.request.port = port

    async def _call(self, flow: http.HTTPFlow, name: str, upstream: Upstream) -> str | None:
        """Answer a POST with the server's answer (``GatewayRelay.call``),
        or its error; None then. For an event stream, the token under which
        the relay holds it, for mitmproxy to fetch it through the relay."""
        request = flow.request
        started = time.time()
        task = asyncio.current_task()
        assert task is not None
        # A flow with no live client (read from a file) is not watched.
        if flow.client_conn.state & connection.ConnectionState.CAN_READ:
            self.watch.add(task, flow.client_conn)
        try:
            answer = await self.relay.call(
                upstream, b"POST", request.data.path.partition(b"?")[2],
                list(request.headers.fields), request.raw_content or b"")
        except asyncio.CancelledError:
            if not self.watch.done(task):
                raise  # the proxy stops: not ours to handle
            task.uncancel()
            logger.debug("obsmask: %s: the client left before the server answered",
                         where(flow))
            if flow.killable:
                flow.kill()
            return None
        except GatewayFailure as failure:
            fail(flow, name, failure)
            return None
        except Exception as e:  # the client gets an answer whatever happens
            logger.exception("obsmask: gateway: internal error")
            # The type only: an exception's message may quote request bytes.
            fail(flow, name, GatewayFailure(GATEWAY_INTERNAL,
                                            f"internal error: {type(e).__name__}"))
            return None
        finally:
            self.watch.done(task)
        if isinstance(answer, str):
            return answer
        flow.response = _response(answer, request.http_version, started)
        return None


def fail(flow: http.HTTPFlow, name: str, failure: GatewayFailure) -> None:
    """Answer the flow with the gateway's JSON-RPC error, and log one line."""
    body = flow.request.get_content(strict=False) or b""
    id_text = request_id_text(body) if flow.request.method == "POST" else None
    answer = error_response(id_text, failure, name)
    flow.response = http.Response.make(answer.status, answer.body,
                                       {"content-type": "application/json"})
    flow.metadata[MCP_METADATA][McpKey.GATEWAY_ERROR] = failure.code
    add_comment(flow, answer.message)
    logger.warning("obsmask: %s: %s (JSON-RPC error %d)", where(flow), answer.message,
                   failure.code)


def _response(answer: Answer, http_version: str, started: float) -> http.Response:
    """The server's answer as the flow's, its body as it came."""
    response = http.Response(http_version.encode(), answer.status, answer.reason,
                             http.Headers(answer.headers), answer.body, None, started,
                             time.time())
    response.headers["content-length"] = str(len(answer.body))
    return response
