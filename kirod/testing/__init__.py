"""Test support shipped with kirod, used by its tests, benchmarks and demo."""
