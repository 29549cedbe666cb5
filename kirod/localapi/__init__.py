"""The local control API: served on the Unix socket, consumed by kiroctl."""
