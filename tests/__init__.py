"""kirod's tests, one package: a helper is imported as `tests.<folder>.<module>`, and a helper of
several folders lives in `tests.support`. pytest's default import mode puts the repository root,
the folder above this package, on `sys.path`; scripts here run as modules from it
(`python -m tests.clients.capture`)."""
