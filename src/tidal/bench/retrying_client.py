"""A client that does what docs/http.md tells HTTP-source clients to: retry with the same key.

``python -m tidal.bench.retrying_client URL TOTAL RATE BATCH PROGRESS OUT [PREFIX [CONNECTIONS]]``
sends ``TOTAL`` requests of ``BATCH`` messages at ``RATE`` requests/s over 8 connections (or
``CONNECTIONS``), request ``i`` with ``Idempotency-Key: k-i`` (``PREFIX-i``: two clients at once
keep their keys apart), and retries a non-2xx answer or a broken connection with the same key
every 0.2 s, for up to 180 s. It writes how many were answered to ``PROGRESS`` as it goes (every
25), and at the end ``OUT``: the requests answered and given up on, every failed attempt (when,
and its status or error), the slowest request (retries included). Run on a rig's host by
:mod:`tidal.bench.receiver_hosts`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

__all__ = ["main"]

CONNECTIONS, GIVE_UP_AFTER, PAUSE = 8, 180.0, 0.2


@dataclass
class _Tally:
    ok: list[int] = field(default_factory=list)
    gave_up: list[int] = field(default_factory=list)
    failures: list[tuple[float, str]] = field(default_factory=list)
    slowest: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _attempt(url: str, body: bytes, key: str) -> int | str:
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as error:
        error.read()
        return int(error.code)
    except (OSError, ValueError) as error:  # a broken connection, or the client's own timeout
        return type(error).__name__


def _send(url: str, i: int, batch: int, tally: _Tally, prefix: str = "k") -> None:
    body = json.dumps([{"n": i, "j": j} for j in range(batch)]).encode()
    began = time.time()
    while time.time() - began < GIVE_UP_AFTER:
        status = _attempt(url, body, f"{prefix}-{i}")
        if status == 200:
            with tally.lock:
                tally.ok.append(i)
                tally.slowest = max(tally.slowest, time.time() - began)
            return
        with tally.lock:
            tally.failures.append((time.time(), str(status)))
        time.sleep(PAUSE)
    with tally.lock:
        tally.gave_up.append(i)


def main(argv: list[str] | None = None) -> int:
    args = argv or sys.argv[1:]
    url, total, rate, batch, progress, out = args[:6]
    prefix = args[6] if len(args) > 6 else "k"
    connections = int(args[7]) if len(args) > 7 else CONNECTIONS
    tally, order, start = _Tally(), iter(range(int(total))), time.time()

    def worker() -> None:
        while True:
            with tally.lock:
                i = next(order, None)
            if i is None:
                return
            time.sleep(max(0.0, start + i / float(rate) - time.time()))
            _send(url, i, int(batch), tally, prefix)
            with tally.lock:
                if len(tally.ok) % 25 == 0:
                    with open(progress, "w") as f:
                        f.write(str(len(tally.ok)))

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result = {"ok": sorted(tally.ok), "gave_up": sorted(tally.gave_up), "failures": tally.failures,
              "slowest": tally.slowest, "started": start, "ended": time.time()}  # fmt: skip
    with open(out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
