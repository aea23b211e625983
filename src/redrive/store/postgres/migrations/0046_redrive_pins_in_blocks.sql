-- redrive schema 46 (PostgreSQL): a redrive task pins its dead letters a block at a time, and a
-- chunk claims its items as one row. A pin wrote a row an item (redrive_task_items) with its key's
-- entry, and each chunk marked its 5,000 items `moved` one row each: for 20,000 dead letters the
-- pin's 5.9 MB of WAL and the chunks' 20,000 row updates. Now the pin writes
-- `redrive_task_pins`, a row for each thousand of the task's dead letters in id order (`place`,
-- from 0) and tenant, queue and incident (what the listing shows of an item, kept after an age
-- prune deletes its episode), with their ids and their jobs' ids as two arrays in step, stored
-- uncompressed out of line (compressing them cost more than it saved); a chunk's claim writes
-- `redrive_task_claims`, one row per tenant of the ids it took. An item's state is, in order:
-- its row in redrive_task_items (written only when it has one of its own: failed with its
-- error, skipped by the move, succeeded or dead again, with what its job died of); `moved` if a
-- claim took it; else its pin block's state (`pending`, or `skipped` once the task let go of
-- it). The pending items of unfinished tasks become blocks here.
CREATE TABLE redrive_task_pins (
    task_id TEXT COLLATE "C" NOT NULL,
    place INTEGER NOT NULL,
    first_id TEXT COLLATE "C" NOT NULL,
    tenant_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    incident_id TEXT,
    last_id TEXT COLLATE "C" NOT NULL,
    state TEXT NOT NULL,
    dead_letter_ids TEXT[] COLLATE "C" NOT NULL,
    job_ids TEXT[] COLLATE "C" NOT NULL,
    PRIMARY KEY (task_id, place, first_id)
);
ALTER TABLE redrive_task_pins ALTER COLUMN dead_letter_ids SET STORAGE EXTERNAL,
    ALTER COLUMN job_ids SET STORAGE EXTERNAL;

CREATE TABLE redrive_task_claims (
    task_id TEXT COLLATE "C" NOT NULL,
    first_id TEXT COLLATE "C" NOT NULL,
    tenant_id TEXT NOT NULL,
    last_id TEXT COLLATE "C" NOT NULL,
    dead_letter_ids TEXT[] COLLATE "C" NOT NULL,
    PRIMARY KEY (task_id, first_id, tenant_id)
);
ALTER TABLE redrive_task_claims ALTER COLUMN dead_letter_ids SET STORAGE EXTERNAL;

INSERT INTO redrive_task_pins (
    task_id, place, first_id, tenant_id, queue, incident_id, last_id, state, dead_letter_ids,
    job_ids
)
SELECT task_id, place, min(dead_letter_id), tenant_id, queue, incident_id, max(dead_letter_id),
    'pending', array_agg(dead_letter_id ORDER BY dead_letter_id),
    array_agg(job_id ORDER BY dead_letter_id)
FROM (
    SELECT task_id, tenant_id, queue, incident_id, dead_letter_id, job_id,
        CAST((row_number() OVER (PARTITION BY task_id ORDER BY dead_letter_id) - 1) / 1000
             AS integer) AS place
    FROM redrive_task_items WHERE state = 'pending'
) AS pending
GROUP BY task_id, place, tenant_id, queue, incident_id;
DELETE FROM redrive_task_items WHERE state = 'pending';

ALTER TABLE redrive_task_pins ENABLE ROW LEVEL SECURITY;
ALTER TABLE redrive_task_pins FORCE ROW LEVEL SECURITY;
-- In 0042's form (the setting read once).
CREATE POLICY tenant_isolation ON redrive_task_pins
    USING (CASE (SELECT current_setting('redrive.tenant_id', true))
           WHEN '*' THEN true WHEN tenant_id THEN true ELSE false END)
    WITH CHECK (CASE (SELECT current_setting('redrive.tenant_id', true))
                WHEN '*' THEN true WHEN tenant_id THEN true ELSE false END);
ALTER TABLE redrive_task_claims ENABLE ROW LEVEL SECURITY;
ALTER TABLE redrive_task_claims FORCE ROW LEVEL SECURITY;
-- In 0042's form (the setting read once).
CREATE POLICY tenant_isolation ON redrive_task_claims
    USING (CASE (SELECT current_setting('redrive.tenant_id', true))
           WHEN '*' THEN true WHEN tenant_id THEN true ELSE false END)
    WITH CHECK (CASE (SELECT current_setting('redrive.tenant_id', true))
                WHEN '*' THEN true WHEN tenant_id THEN true ELSE false END);
