"""The account layer: choosing an account, keeping its tokens fresh, dispatching requests."""
