"""The domain: memories, tenants, memory events and the embedding seam. No Kafka, no Redis."""
