"""Budgets: how much a key or an account may spend, held before a request is routed.

A key may carry credits a day and a month and tokens a minute; an account credits a day and a
month, and whether kirod may spend into its overage. A request reserves its estimate (its input
tokens, its output cap, and the credits those come to at the model's recent rate) against its
key before any account is leased, and against the account it is leased; it settles to what Kiro
metered when it ends. See `budgets.py`.
"""
