"""Handlers, one module per endpoint family."""
