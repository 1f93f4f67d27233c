"""``python -m langgraph_durable.cli``: the same as the ``langgraph-durable`` script."""

from . import main

main()
