"""What the control plane calls (kiroctl over the control socket, the web console): the account
registry, device-code logins, API keys, alerts, and the pool's reports."""
