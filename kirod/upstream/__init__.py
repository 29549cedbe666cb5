"""The Kiro upstream: payload builder, HTTP client, event-stream frames and their translation."""
