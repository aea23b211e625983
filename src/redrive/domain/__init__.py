"""Pure decisions about jobs: validation, states, retries, dead letters. No I/O, no clock reads."""
