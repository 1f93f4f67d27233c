"""Model calls are not paid twice: ``journaled(model)`` journals each call of a chat model.

LangGraph re-executes an interrupted, retried or crashed node from its first line, so
every model call the node made before the ``interrupt()`` or the crash is made again:
billed again, and answered differently. ``journaled(model)`` wraps a LangChain chat model
(a ``BaseChatModel`` or any ``Runnable`` over one: ``bind_tools``, ``with_structured_output``)
so that inside a node or ``@task`` of a graph run with a ``DurableSaver`` each call is an
effect of the effect journal (``langgraph_durable.effects``): named ``"model:<identity>"``,
numbered by the order the task's execution makes it, journaled with the response and a
sha256 digest of the request (messages, bound kwargs such as tools, the model's class and
parameters). A re-execution of the same task whose call has the same number and digest
gets the recorded response without calling the model; a changed request calls the model
and journals the new answer (``on_change="raise"`` raises ``ModelCallChangedError``). A
call journaled as started without an answer (the process died during it) is simply made
again. The journal is the effect journal: Redis first, flushed to MongoDB, copied, pruned,
exported and deleted with its thread. See ``docs/effects.md``.
"""

from .calls import STATS, OnChange, Stats
from .model import JournaledModel, journaled

__all__ = ["STATS", "JournaledModel", "OnChange", "Stats", "journaled"]
