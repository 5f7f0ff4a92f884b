"""The members of an MCP answer whose strings are never cut, however long:
the protocol needs them whole (the ``jsonrpc_scan`` leaves them out)."""

from __future__ import annotations

# Values under these member names are never cut, whatever they contain,
# because the protocol needs them whole (modelcontextprotocol schema):
PROTECTED_KEYS: frozenset[str] = frozenset({
    "_meta",  # reserved metadata: progress tokens, related-task ids, vendor data
    "blob",  # base64 bytes of a resource (BlobResourceContents)
    "uri",  # resource addresses, read back with resources/read
    "uriTemplate",  # resource templates (RFC 6570), expanded by the client
    "mimeType",  # how the client decodes data and blob
    "nextCursor",  # pagination: an opaque token the client sends back
    "cursor",  # the same token when it travels in the other direction
    "icons",  # icon src are often data: URIs (base64)
    "inputSchema",  # tool schemas: the client validates arguments against them
    "outputSchema",  # ... and structuredContent against this one
})
# ``data`` is base64 in content blocks of these types (ImageContent,
# AudioContent); in an error it is free text and is cut like the rest.
BINARY_CONTENT_TYPES: frozenset[str] = frozenset({"image", "audio"})
