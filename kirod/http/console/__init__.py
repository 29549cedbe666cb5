"""The web console: a view of the pool and its actions, for the person who runs kirod.

Served under /console/ on the loopback listener; entered only through a one-time link that
`kiroctl console` mints over the control socket (`sessions.py`); every request passes the guard
(`guard.py`: Host, Origin, CSRF, CSP); pages are rendered whole on the server (`pages.py`, with
SVG charts from `charts.py`) and kept live by server-sent events (`events.py`); each action is
the control API's own handler (`app.py`).
"""
