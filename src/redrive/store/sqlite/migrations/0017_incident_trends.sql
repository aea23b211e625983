-- redrive schema 17 (SQLite): incident trends. The dead letters that arrived at a page of incidents
-- per bucket of a window (domain/trend.py), whatever their status now, are counted by an
-- index-only range scan per incident: its id, then when each episode entered the dead-letter
-- queue, and the tenant (which the tenant filter reads) so no row is fetched.
CREATE INDEX dead_letters_incident_arrivals ON dead_letters (incident_id, discarded_at, tenant_id);
