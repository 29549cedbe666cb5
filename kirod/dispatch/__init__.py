"""The request pipeline: capacity and the branch queue, attempts with failover over the pool, the
operation record, the response cache, the extension runner, and the builder that wires them."""
