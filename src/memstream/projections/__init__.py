"""The Redis projection: index schema, apply-once writes with eviction, and recall."""
