"""Integrations for real agents: the MCP server."""
