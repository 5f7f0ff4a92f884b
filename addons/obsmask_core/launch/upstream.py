"""Where an agent's traffic goes: a base URL split into the origin the
reverse proxy forwards to and the path the agent keeps in front of its
routes.

mitmproxy's reverse mode takes an origin only (``reverse:https://host``),
while agents take a base URL with a path (``https://api.openai.com/v1``):
the proxy forwards to the origin and the agent is given the proxy's
address with the same path, so every route reaches the upstream unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit


class UpstreamError(ValueError):
    """A base URL the proxy cannot forward to."""


@dataclass(frozen=True)
class AgentUpstream:
    """A base URL: ``origin`` (scheme, host and port) and ``path``."""

    origin: str
    path: str

    @classmethod
    def parse(cls, url: str) -> AgentUpstream:
        """The upstream of a base URL; UpstreamError when it is not an
        http(s) URL with a host, or carries a query or a fragment."""
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UpstreamError(f"{url!r} is not an http(s) URL with a host")
        if parts.query or parts.fragment:
            raise UpstreamError(f"{url!r}: a base URL has no query or fragment")
        return cls(f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/"))

    @property
    def url(self) -> str:
        return self.origin + self.path

    def through(self, host: str, port: int) -> str:
        """The base URL the agent is given: the proxy's address, the same
        path."""
        return f"http://{host}:{port}{self.path}"
