"""The webhook delivery loop: claim due deliveries, POST each one signed, with a timeout, and record
what happened. Every replica runs it; the claim's lease makes each delivery one replica's at a
time. Nothing here logs a URL (it may hold a token) or a secret."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from redrive import __version__
from redrive.domain.webhook_delivery import AttemptResult, DeliveryRecord, Problem
from redrive.domain.webhooks import is_private_address, is_private_host
from redrive.service.webhooks import Delivery, WebhookService

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("redrive.webhooks")
USER_AGENT = f"redrive-webhooks/{__version__}"
IDLE_WAIT_SECONDS = 1.0
MAX_DETAIL = 300


async def resolves_privately(host: str) -> bool:
    """Whether a host is, or resolves to, a loopback or private address. A name that does not
    resolve is left to fail as a connection error."""
    if is_private_host(host):
        return True
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {str(info[4][0]).split("%", 1)[0] for info in found}
    return any(is_private_address(ipaddress.ip_address(address)) for address in addresses)


class DeliveryLoop:
    """Sends deliveries, at most `concurrency` at once, until stopped."""

    def __init__(self, webhooks: WebhookService, concurrency: int = 10) -> None:
        self.webhooks = webhooks
        self.concurrency = concurrency
        self._http: httpx.AsyncClient | None = None
        self.task: asyncio.Task[None] | None = None
        self.sending: set[asyncio.Task[DeliveryRecord | None]] = set()

    async def start(self) -> None:
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop claiming and cancel what is in flight (its leases run out and another replica,
        or this one on restart, sends it again)."""
        tasks = [*self.sending, *([self.task] if self.task is not None else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.task = None
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    @property
    def http(self) -> httpx.AsyncClient:
        """Made on first use: a loop that never runs (the CLI's in-process app) makes none, and
        httpx (with its own command line: click, rich, pygments) is imported only then, so an
        embedded worker with no webhook to send starts without it."""
        if self._http is None:
            import httpx

            self._http = httpx.AsyncClient(
                follow_redirects=False, headers={"user-agent": USER_AGENT}
            )
        return self._http

    async def deliver_due(self) -> list[DeliveryRecord | None]:
        """One pass: claim up to `concurrency` due deliveries, send them all, record each."""
        deliveries = await self.webhooks.claim(self.concurrency)
        return list(await asyncio.gather(*(self.deliver(delivery) for delivery in deliveries)))

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._fill()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception:
                failures += 1
                if failures == 1 or failures % 100 == 0:
                    log.exception(
                        "webhook delivery loop failed (%d in a row); will retry", failures
                    )
                await asyncio.sleep(min(failures, 10) * IDLE_WAIT_SECONDS)

    async def _fill(self) -> None:
        """Claim as many deliveries as there are free slots; wait for a slot or for work."""
        free = self.concurrency - len(self.sending)
        if free <= 0:
            await asyncio.wait(self.sending, return_when=asyncio.FIRST_COMPLETED)
            return
        deliveries = await self.webhooks.claim(free)
        for delivery in deliveries:
            task = asyncio.create_task(self.deliver(delivery))
            self.sending.add(task)
            task.add_done_callback(self._done)
        if not deliveries:
            await self.webhooks.wait_for_work(IDLE_WAIT_SECONDS)

    def _done(self, task: asyncio.Task[DeliveryRecord | None]) -> None:
        self.sending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("recording a webhook delivery failed", exc_info=task.exception())

    async def deliver(self, delivery: Delivery) -> DeliveryRecord | None:
        """Send one delivery (unless there is nothing to send) and record the attempt."""
        if delivery.blocked is not None:
            result: AttemptResult | None = delivery.blocked
        elif delivery.sendable:
            result = await self.send(delivery)
        else:
            result = None
        record = await self.webhooks.finish(delivery, result)
        if record is not None and record.error:
            log.warning(
                "webhook delivery %s to subscription %s, attempt %d: %s (%s)",
                record.job_id, record.subscription_id, record.attempt, record.error, record.status,
            )  # fmt: skip
        return record

    async def send(self, delivery: Delivery) -> AttemptResult:
        import httpx

        assert delivery.subscription is not None
        url = delivery.subscription.url
        options = self.webhooks.delivery_options
        host = urlsplit(url).hostname or ""
        if not options.allow_private_targets and await resolves_privately(host):
            return AttemptResult(problem=Problem.REFUSED_TARGET, detail=host)
        started = time.perf_counter()
        try:
            request = self.http.build_request(
                "POST", url, content=delivery.body, headers=delivery.headers,
                timeout=options.timeout_ms / 1000,
            )  # fmt: skip
            # The answer's body is never read: only its status counts.
            response = await self.http.send(request, stream=True)
            await response.aclose()
        except httpx.TimeoutException:
            return AttemptResult(problem=Problem.TIMEOUT, duration_ms=_since(started))
        except httpx.HTTPError as error:
            detail = f"{type(error).__name__}: {error}".replace(url, "<url>")[:MAX_DETAIL]
            return AttemptResult(
                problem=Problem.CONNECTION, detail=detail, duration_ms=_since(started)
            )
        return AttemptResult(status_code=response.status_code, duration_ms=_since(started))


def _since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
