-- redrive schema 46 (SQLite): as on PostgreSQL, a redrive task pins its dead letters a block at a
-- time (`redrive_task_pins`: a row for each thousand in id order and tenant, queue and incident,
-- the ids and their
-- jobs' ids as two JSON arrays in step) and a chunk claims its items as one row per tenant
-- (`redrive_task_claims`); an item has a row of its own in redrive_task_items only once it is
-- failed, skipped by the move, or its job has ended (see the PostgreSQL migration for the order
-- in which an item's state is read). The pending items of unfinished tasks become blocks here.
CREATE TABLE redrive_task_pins (
    task_id TEXT NOT NULL,
    place INTEGER NOT NULL,
    first_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    queue TEXT NOT NULL,
    incident_id TEXT,
    last_id TEXT NOT NULL,
    state TEXT NOT NULL,
    dead_letter_ids TEXT NOT NULL,
    job_ids TEXT NOT NULL,
    PRIMARY KEY (task_id, place, first_id)
);

CREATE TABLE redrive_task_claims (
    task_id TEXT NOT NULL,
    first_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    last_id TEXT NOT NULL,
    dead_letter_ids TEXT NOT NULL,
    PRIMARY KEY (task_id, first_id, tenant_id)
);

-- (Each block's arrays in id order: the aggregates read the subquery's rows in its order.)
INSERT INTO redrive_task_pins (
    task_id, place, first_id, tenant_id, queue, incident_id, last_id, state, dead_letter_ids,
    job_ids
)
SELECT task_id, place, min(dead_letter_id), tenant_id, queue, incident_id, max(dead_letter_id),
    'pending', json_group_array(dead_letter_id), json_group_array(job_id)
FROM (
    SELECT task_id, tenant_id, queue, incident_id, dead_letter_id, job_id,
        (row_number() OVER (PARTITION BY task_id ORDER BY dead_letter_id) - 1) / 1000 AS place
    FROM redrive_task_items WHERE state = 'pending'
    ORDER BY task_id, place, tenant_id, queue, incident_id, dead_letter_id
)
GROUP BY task_id, place, tenant_id, queue, incident_id;
DELETE FROM redrive_task_items WHERE state = 'pending';
