"""Helpers the tests of several folders share: a daemon on the fake Kiro (`kiro_env`), the pool
and pipeline in-process (`pool_env`), the committed client captures (`captures`), the shipped
example extensions (`examples`)."""
