"""The headers by which the gateway addon and its relay talk: set on the
requests mitmproxy forwards to the relay, and on the relay's errors; never
sent on to a server."""

from __future__ import annotations

RELAY_HEADER = "x-obsmask-gateway-server"  # request: which server (mitmproxy -> relay)
# request: mitmproxy may send its next request on the same connection
KEEP_ALIVE_HEADER = "x-obsmask-gateway-keep-alive"
ERROR_HEADER = "x-obsmask-gateway-error"  # answer: the code of a failure (relay -> addon)
# request: answer with the event stream parked under this token (addon -> relay)
PARKED_HEADER = "x-obsmask-gateway-parked"
# request: the gateway does not serve this client; answer its error, after
# reading the body mitmproxy streamed here (addon -> relay)
REFUSED_HEADER = "x-obsmask-gateway-refused"
# The request headers above, as they come in h11's events.
OURS = frozenset({RELAY_HEADER.encode(), KEEP_ALIVE_HEADER.encode(), PARKED_HEADER.encode(),
                  REFUSED_HEADER.encode()})
