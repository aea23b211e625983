"""Prometheus text exposition of the job and dead-letter metrics."""

from __future__ import annotations

from collections.abc import Iterable

from redrive.domain.alerts import ACKNOWLEDGED, FIRING, SEVERITIES, Rule
from redrive.service.metrics import MetricsSnapshot


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    return "{" + inner + "}" if inner else ""


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]
) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{labels} {value:g}" for labels, value in samples]
    return lines


def render_metrics(snapshot: MetricsSnapshot) -> str:
    metrics = snapshot.counters
    depth = snapshot.queue_depth
    dead_by_queue = snapshot.dead_letters_by_queue
    lines: list[str] = []
    pairs = (
        ("ojs_job_enqueued_total", "Jobs enqueued", metrics.enqueued),
        ("ojs_job_completed_total", "Jobs acknowledged as completed", metrics.completed),
        ("ojs_job_failed_total", "Failed attempts (nack, timeout, lost lease)", metrics.failed),
        ("ojs_dead_letter_added_total", "Jobs moved to the DLQ", metrics.dead_letter_added),
    )
    for name, help_text, counter in pairs:
        samples = [(_labels(queue=q, type=t), float(n)) for (q, t), n in sorted(counter.items())]
        lines += _family(name, "counter", help_text, samples)
    for name, help_text, by_queue in (
        ("ojs_dead_letter_retried_total", "Dead letters retried", metrics.dead_letter_retried),
        ("ojs_dead_letter_deleted_total", "Dead letters deleted", metrics.dead_letter_deleted),
        (
            "ojs_dead_letter_replayed_total",
            "Dead letters replayed by rules",
            metrics.dead_letter_replayed,
        ),
        (
            "ojs_dead_letter_pruned_total",
            "Dead letters pruned by retention",
            metrics.dead_letter_pruned,
        ),
    ):
        samples = [(_labels(queue=q), float(n)) for q, n in sorted(by_queue.items())]
        lines += _family(name, "counter", help_text, samples)
    for name, help_text, by_task in (
        ("redrive_task_moved_total", "Dead letters a redrive task moved", metrics.redrive_moved),
        (
            "redrive_task_succeeded_total",
            "Jobs a redrive task redrove that succeeded",
            metrics.redrive_succeeded,
        ),
        (
            "redrive_task_dead_again_total",
            "Jobs a redrive task redrove that died again",
            metrics.redrive_dead_again,
        ),
        (
            "redrive_task_failed_items_total",
            "Dead letters a redrive task left dead because an upcaster refused them",
            metrics.redrive_failed_items,
        ),
    ):
        samples = [(_labels(task=task), float(n)) for task, n in sorted(by_task.items())]
        lines += _family(name, "counter", help_text + " (this process)", samples)
    lines += _family(
        "redrive_tasks_failed_total", "counter",
        "Redrive tasks that ended failed, per error code (this process)",
        [(_labels(code=code), float(n))
         for code, n in sorted(metrics.redrive_tasks_failed.items())],
    )  # fmt: skip
    lines += _family(
        "ojs_dead_letter_total", "gauge", "Dead letters currently held",
        [(_labels(queue=q), float(n)) for q, n in sorted(dead_by_queue.items())],
    )  # fmt: skip
    by_class = sorted(snapshot.dead_letters_by_class.items())
    lines += _family(
        "ojs_dead_letter_by_incident_class", "gauge",
        "Dead letters currently held, per class of their incident",
        [(_labels(**{"class": name}), float(count)) for name, count in by_class],
    )  # fmt: skip
    lines += _family(
        "ojs_queue_depth", "gauge", "Jobs per queue and state",
        [(_labels(queue=q, state=s), float(n)) for (q, s), n in sorted(depth.items())],
    )  # fmt: skip
    lines += _family(
        "redrive_alerts_firing", "gauge", "Alerts firing now (not acknowledged) per rule",
        [(_labels(rule=rule.value, severity=SEVERITIES[rule].value),
          float(snapshot.open_alerts.get((rule.value, SEVERITIES[rule].value, FIRING), 0)))
         for rule in Rule],
    )  # fmt: skip
    lines += _family(
        "redrive_alerts_acknowledged", "gauge", "Alerts acknowledged and still open per rule",
        [(_labels(rule=rule.value, severity=SEVERITIES[rule].value),
          float(snapshot.open_alerts.get((rule.value, SEVERITIES[rule].value, ACKNOWLEDGED), 0)))
         for rule in Rule],
    )  # fmt: skip
    lines += [
        "# HELP ojs_job_duration_seconds Time from fetch to ack",
        "# TYPE ojs_job_duration_seconds summary",
        f"ojs_job_duration_seconds_sum {metrics.duration_sum_seconds:g}",
        f"ojs_job_duration_seconds_count {metrics.duration_count}",
    ]
    return "\n".join(lines) + "\n"
