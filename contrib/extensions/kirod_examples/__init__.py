"""Example kirod extensions; install with `pip install contrib/extensions` beside kirod."""
