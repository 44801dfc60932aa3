"""Kafka semantics: handlers, replica manager, group coordinator, server."""
