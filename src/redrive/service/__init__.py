"""Use-cases: enqueue, fetch, ack, nack, cancel, dead-letter operations, periodic sweeps."""
