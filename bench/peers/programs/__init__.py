"""Each tool's user programs (its worker module and its producer script), run by bench.peers in
that tool's own environment with this directory on PYTHONPATH."""
