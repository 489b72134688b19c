"""Adapters to the frameworks users run their agents in: translations, not second
implementations of memory.

    memstream.integrations.langgraph   MemstreamStore, a LangGraph BaseStore on the log and the
                                       projection (`pip install memstream[langgraph]`)
    memstream.integrations.langchain   MemstreamMiddleware, a LangChain v1 agent middleware
                                       (`pip install memstream[langchain]`)

Each adapter module imports its framework, so this package imports neither; every adapter gets
its parts from the composition root (`memstream.deployment.Deployment`).
"""

__all__: list[str] = []
