"""kirod: a local gateway that serves Kiro accounts as standard LLM APIs."""

__version__ = "0.1.0"
