"""Wire formats: pydantic models of every message and release, and their JSON Schemas."""
