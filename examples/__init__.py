"""Runnable examples of langgraph_durable (not part of the installed package)."""
