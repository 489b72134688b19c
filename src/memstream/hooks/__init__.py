"""SemanticMemoryMiddleware: tenant store resolution, recall before a turn, record after it.

Built in the middleware issue, on `memory`'s protocols.
"""
