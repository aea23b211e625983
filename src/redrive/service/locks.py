"""Advisory lock keys of the periodic tasks: each runs in one replica at a time."""

PROMOTE = 0x72640001
EXPIRE = 0x72640002
REAP = 0x72640003
CRONS = 0x72640004
EVENTS = 0x72640005
FINISHED_JOBS = 0x72640006
REPLAY = 0x72640007
PRUNE = 0x72640008
