"""Stream processors: ingest and validation, the online SOA agent, batching agents.

Agents hold state and call ``learning``; they depend on small interfaces, not on the service."""
