"""The Kafka side: topics, the event publisher, and the Faust worker that runs the projector."""
