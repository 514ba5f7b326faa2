"""Example UDFs, referenced from YAML as ``tidal.examples.udfs:<name>``.

A row UDF takes the payload (``bytes``) and returns bytes (map), an iterable of bytes (flatmap)
or a bool (filter). An Arrow UDF (``batch: arrow``) takes and returns a ``pyarrow`` array of
binary payloads.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any


def upper(payload: bytes) -> bytes:
    return payload.upper()


def words(payload: bytes) -> Iterable[bytes]:
    return payload.split()


def even(payload: bytes) -> bool:
    """Keeps the generator's even-numbered messages (``gen 000000000042 ...``: the second word)."""
    parts = payload.split()
    return len(parts) > 1 and parts[1].isdigit() and int(parts[1]) % 2 == 0


def slow_upper(payload: bytes) -> bytes:
    """1 ms of work per message: makes a vertex CPU-bound enough to need replicas."""
    time.sleep(0.001)
    return payload.upper()


def json_or_text(payload: bytes) -> bytes:
    """The generator's message as a JSON object (``{"n": …, "text": …}``), except every 50th,
    left as text: a table sink with ``format: json`` refuses a write that holds one, so the
    failure-routing examples have writes that fail and writes that do not."""
    import json

    parts = payload.split(b" ", 2)
    number = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    if number % 50 == 0:
        return payload
    return json.dumps({"n": number, "text": payload.decode(errors="replace")}).encode()


def fails_on_poison(payload: bytes) -> bytes:
    if b"poison" in payload:
        raise ValueError(f"cannot handle {payload[:20]!r}")
    return payload.upper()


def enrich(payload: bytes) -> bytes:
    """The demo's UDF: 2 ms of "lookup" per message (the latency that makes replicas matter on
    two cores: waiting tasks run side by side), then the order tagged with a region."""
    time.sleep(0.002)
    order = payload.split(b" ", 2)
    number = int(order[1]) if len(order) > 1 and order[1].isdigit() else 0
    region = (b"eu", b"us", b"apac")[number % 3]
    return b"%s region=%s" % (payload.rstrip(b"."), region)


def order_total(payload: bytes) -> bytes:
    """A JSON order (``{"order": …, "qty": …, "price": …, "region": …}``) with its total added;
    anything else raises, so with a ``deadLetter`` it goes there with the reason."""
    import json

    order = json.loads(payload)
    if not isinstance(order, dict) or "qty" not in order or "price" not in order:
        raise ValueError("not an order: needs qty and price")
    order["total"] = round(float(order["qty"]) * float(order["price"]), 2)
    return json.dumps(order).encode()


def large_orders(df: Any) -> Any:
    """A DataFrame step: the orders of 3 or more, with their total (Spark's functions, no Python per row)."""
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's convention

    return df.where(F.col("qty") >= 3).select("_id", "order", (F.col("qty") * F.col("price")).alias("total"))


_SKUS: dict[str, tuple[float, str]] = {}


def price_order(payload: bytes) -> list[bytes]:
    """The Python twin of the SQL step in ``tidal bench sql`` (and docs/steps.md): parse an order
    (``order_id`` required, ``sku``, ``qty`` an integer), keep it when ``qty > 0`` and its sku is
    in the reference table (read once per worker from ``TIDAL_SKUS``), with its total and region."""
    import json
    import os

    if not _SKUS:
        import pyarrow.parquet as pq

        table = pq.read_table(os.environ["TIDAL_SKUS"]).to_pylist()
        _SKUS.update({row["sku"]: (row["unit_price"], row["region"]) for row in table})
    order = json.loads(payload)
    if not isinstance(order, dict) or order.get("order_id") is None:
        raise ValueError("not an order: needs order_id")
    qty = order.get("qty")
    if qty is not None and not isinstance(qty, int):
        raise ValueError("qty is not an integer")
    found = _SKUS.get(str(order.get("sku")))
    if not qty or qty <= 0 or found is None:
        return []
    return [json.dumps({"order_id": order["order_id"], "total": qty * found[0], "region": found[1]}).encode()]


LOOKUP_SECONDS = 0.005  # what lookup_by_order's call waits per record


def lookup_by_order(df: Any) -> Any:
    """A DataFrame step whose work after a shuffle waits on a lookup (5 ms a record, as a call to
    a service does): the orders repartitioned by ``order_id`` (a shuffle into the step's shuffle
    partitions), then a Python UDF per record (``tidal bench step-shuffle``)."""
    import warnings

    from pyspark.sql import functions as F  # noqa: N812 - PySpark's convention
    from pyspark.sql.types import StringType

    def lookup_one(order_id: str) -> str:
        time.sleep(LOOKUP_SECONDS)
        return order_id.upper()

    with warnings.catch_warnings():  # PySpark reads the hints for a pandas UDF and says it is not one
        warnings.simplefilter("ignore", UserWarning)
        lookup = F.udf(lookup_one, StringType())

    return df.repartition("order_id").select("_id", "order_id", lookup("order_id").alias("looked_up"))
