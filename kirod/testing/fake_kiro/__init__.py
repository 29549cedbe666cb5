"""A faithful fake of the Kiro service, speaking genuine AWS event-stream frames."""
