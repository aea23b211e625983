"""What a caller may see of stored args and meta: a viewer's copy masks sensitive keys' values."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from redrive.domain.caller import Caller, Role

if TYPE_CHECKING:
    from redrive.domain.dead_letter import DeadLetter
    from redrive.domain.job import Job
    from redrive.domain.records import CronRecord
    from redrive.domain.redaction import Redactor

# Args are what a redrive needs, so they are stored as sent; only these roles see them so.
MASKED_ROLES = frozenset({Role.VIEWER})


def masks(caller: Caller) -> bool:
    return caller.role in MASKED_ROLES


def job_for(caller: Caller, job: Job, redactor: Redactor) -> Job:
    if not masks(caller):
        return job
    return replace(job, args=redactor.mask(job.args), meta=redactor.mask(job.meta))


def jobs_for(caller: Caller, jobs: list[Job], redactor: Redactor) -> list[Job]:
    return [job_for(caller, job, redactor) for job in jobs] if masks(caller) else jobs


def dead_letter_for(caller: Caller, dead: DeadLetter, redactor: Redactor) -> DeadLetter:
    return replace(dead, job=job_for(caller, dead.job, redactor)) if masks(caller) else dead


def dead_letters_for(
    caller: Caller, items: list[DeadLetter], redactor: Redactor
) -> list[DeadLetter]:
    if not masks(caller):
        return items
    return [dead_letter_for(caller, dead, redactor) for dead in items]


def cron_for(caller: Caller, cron: CronRecord, redactor: Redactor) -> CronRecord:
    if not masks(caller):
        return cron
    return replace(cron, job_template=redactor.mask(cron.job_template))
