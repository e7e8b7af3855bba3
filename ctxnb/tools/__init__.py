"""Governed file tools: the tools an agent calls, behind a path policy."""
