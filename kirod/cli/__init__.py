"""kiroctl: a thin client of the local control API."""
