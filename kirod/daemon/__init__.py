"""The kirod daemon: composition root, lifecycle, lock, sockets, systemd integration."""
