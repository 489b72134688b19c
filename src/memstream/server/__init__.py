"""The HTTP API (wire-compatible with agent-memory-server's long-term subset) and the MCP
server, with tenant-scoped API keys. FastAPI, uvicorn and the MCP SDK are imported only here,
so the rest of memstream runs without them."""

from memstream.server.api_keys import ApiKey, ApiKeys, Principal
from memstream.server.mapping import Scoping
from memstream.server.service import Limits, MemoryService

__all__ = ["ApiKey", "ApiKeys", "Limits", "MemoryService", "Principal", "Scoping"]
