"""The settings of MCP truncation (``[mcp_gateway.masking]``), declared once."""

from __future__ import annotations

from dataclasses import dataclass

from obsmask_core.mcp.tool_limits import ToolLimits, check_limit_rules, parse_rules
from obsmask_core.shared.errors import SettingError
from obsmask_core.shared.settings import check_fields, setting
from obsmask_core.shared.truncation import DEFAULT_MARKER_TEMPLATE, check_marker_template

MASKING_SECTION = ("mcp_gateway", "masking")


@dataclass(frozen=True, kw_only=True)
class TruncationLimits:
    """Whether, when and how a string of an MCP answer is cut. Each field is a
    setting: a key of ``[mcp_gateway.masking]`` and an ``mcpmask_<key>`` option."""

    enabled: bool = setting(True, """
        Cut long strings in MCP (JSON-RPC 2.0) responses. false forwards every
        MCP answer byte for byte (event streams still stream; the gateway
        routes keep working).""")
    max_chars: int = setting(4000, """
        A string longer than this many characters inside a JSON-RPC response's
        result or error.data is cut to head + marker + tail (when that makes it
        shorter). mcpmask_max_chars_for may set other limits for some servers
        and tools, and a server may raise a tool's limit
        (_meta["anthropic/maxResultSizeChars"]).""", minimum=1)
    head_chars: int = setting(2000, """
        Characters kept from the start of a cut string.""", minimum=0)
    tail_chars: int = setting(2000, """
        Characters kept from the end of a cut string. head + tail must not
        exceed mcpmask_max_chars.""", minimum=0)
    max_chars_for: tuple[tuple[str, str], ...] = setting((), """
        Other limits for some servers and tools: SERVER/TOOL|N (in mitm.toml
        [["SERVER/TOOL", "N"], ...], N a string; repeat the option for
        several), e.g. fast-filesystem/read_*|20000 or */search|8000. SERVER
        and TOOL are case-sensitive glob patterns (*, ?, [abc]) of the
        gateway's name for the server (else the server's host) and of the
        tool a tools/call named; a pattern without "/" is a tool on any
        server. The first rule that matches a response wins; its strings are
        cut over N characters, head and tail keeping the proportions
        head_chars and tail_chars have to max_chars; 0 never cuts them. A
        response to anything but a tools/call has no tool name: only a TOOL
        such as * matches it. When a server declares a larger
        _meta["anthropic/maxResultSizeChars"] for a tool in its tools/list
        answer, that tool is cut over that many characters instead (at most
        500000).""", check=check_limit_rules)
    marker_template: str = setting(DEFAULT_MARKER_TEMPLATE, """
        The text put between head and tail. Fields: {original_chars}, {head},
        {tail}, {recall} ("; recall id=ID" when recall is on, else empty) and
        {recall_id} (the id alone, or empty). It needs some words of its own,
        by which a cut string is recognised and never cut again.""",
        check=check_marker_template)
    include: str = setting("", """
        A mitmproxy filter expression (e.g. "~d tools.example.com"): the flows it
        matches are MCP too, and the JSON-RPC responses in their answers are
        cut. By default a flow is MCP only when it is a gateway flow, has an
        MCP header (Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method), posts an
        MCP method (initialize, tools/call...), or is a GET event stream that
        begins as MCP; every other JSON-RPC passes byte for byte. Empty: none
        added.""")
    exclude: str = setting("", """
        A mitmproxy filter expression: the flows it matches are never cut, even
        when they are MCP (it wins over mcpmask_include). Empty: none left out.""")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.head_chars + self.tail_chars > self.max_chars:
            raise SettingError(
                "head_chars",
                f"head_chars + tail_chars ({self.head_chars} + {self.tail_chars}) must not "
                f"exceed max_chars ({self.max_chars}): a cut string would keep more than "
                "it may have",
            )

    def tool_limits(self) -> ToolLimits:
        """max_chars, head_chars and tail_chars with the max_chars_for rules."""
        return ToolLimits(self.max_chars, self.head_chars, self.tail_chars,
                          parse_rules("max_chars_for", self.max_chars_for))
