"""kirod's benchmark harness: the real daemon against the fake Kiro service, on loopback.

`python -m bench --plan full` (or `make bench`) runs it; `bench/README.md` holds the figures.
"""
