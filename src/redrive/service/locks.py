"""Advisory lock keys of the periodic tasks: each runs in one replica at a time."""

PROMOTE = 0x72640001
EXPIRE = 0x72640002
REAP = 0x72640003
CRONS = 0x72640004
EVENTS = 0x72640005
FINISHED_JOBS = 0x72640006
REPLAY = 0x72640007
PRUNE = 0x72640008
INCIDENT_BACKFILL = 0x72640009
WEBHOOK_LOG = 0x7264000A
ALERTS = 0x72640014  # numbered after the migration that brought alerts (0014)
