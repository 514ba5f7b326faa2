"""The generator's vectorised payloads, and a plan that decodes without the spec's imports."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from tidal.spark.batch.config import QueryConfig
from tidal.spark.sources.generator import generator_payload, generator_payloads
from tidal.spec import Limits
from tidal.spec.model import UdfSpec


@settings(max_examples=60, deadline=None)
@given(
    vertex=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    first=st.integers(0, 10**13),
    count=st.integers(1, 40),
    size=st.integers(0, 300),
)
def test_vectorised_payloads_are_the_per_message_bytes(vertex, first, count, size):
    built = generator_payloads(vertex, first, first + count - 1, size).to_pylist()
    assert built == [generator_payload(vertex, n, size) for n in range(first, first + count)]


def test_a_plan_round_trips_and_its_specs_open_on_first_use():
    plan = QueryConfig(
        "p", "v", "/tmp/x.db", "/tmp", "in", ("out",), Limits(read_batch_size=7), udf=UdfSpec(map=str.upper)
    )
    again = QueryConfig.decode(plan.encode())
    assert (again.vertex, again.input, again.outputs) == ("v", "in", ("out",))
    assert again.read_batch_size == 7 and again.udf is not None and again.udf.function is str.upper
    assert again.sink is None and again.source is None


def test_decoding_a_plan_does_not_import_the_spec_models():
    """Spark decodes the plan in a fresh process at every micro-batch: it must stay cheap."""
    text = QueryConfig(
        "p", "v", "/tmp/x.db", "/tmp", "in", udf=UdfSpec(map="tidal.examples.udfs:upper")
    ).encode()
    code = (
        "import sys\n"
        "from tidal.spark.query.writer import VertexWriter\n"
        "from tidal.spark.batch.config import QueryConfig\n"
        f"VertexWriter(QueryConfig.decode({text!r}))\n"
        "heavy = ('pydantic', 'numpy', 'tidal.spec.model', 'tidal.isb.sqlite')\n"
        "heavy = sorted(m for m in heavy if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "", f"decoding imported {out.stdout.strip()}"


def test_a_tasks_reader_does_not_import_the_spec_or_the_controller():
    """Each task's read worker unpickles its reader, importing its module (the buffer readers, the
    source seam, the generator's and the staged sources'), to hand Spark the task's range: it must
    not pay for the spec package (pydantic) or the controller."""
    code = (
        "import sys\n"
        "import tidal.spark.batch.readers\n"
        "import tidal.spark.sources.connector\n"
        "import tidal.spark.sources.generator\n"
        "import tidal.spark.sources.user\n"
        "import tidal.spark.sources.pynumaflow\n"
        "heavy = ('pydantic', 'tidal.spec', 'tidal.controller')\n"
        "heavy = sorted(m for m in heavy if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "", f"importing the readers imported {out.stdout.strip()}"
