"""A small MCP server, made with the official SDK, whose tool list changes: calling ``unlock``
adds the tool ``secret_door`` and tells the clients (tests/providers/test_providers_mcp.py)."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing")


@server.tool()
async def unlock(ctx: Context) -> str:  # type: ignore[type-arg]
    """Adds the tool secret_door."""

    def secret_door() -> str:
        """Opens the door."""
        return "the door is open"

    server.add_tool(secret_door)
    await ctx.notify_tools_changed()
    return "unlocked: secret_door is offered now"


if __name__ == "__main__":
    server.run("stdio")
