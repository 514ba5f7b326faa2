"""What a Numaflow user meets in ``tidal convert`` beyond the examples: YAML without anchors, a
handlers file whose key misses by a little, container settings that are listed, and a streaming
window refused by name (issue #59's convert nits)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tidal import errors
from tidal.cli.convert import convert_command
from tidal.spec import manifest, parse_pipeline

EXAMPLES = Path(__file__).parents[2] / "data" / "numaflow"


def _load(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())


def _e2e(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / "e2e" / f"{name}.yaml").read_text())


def test_tidal_convert_writes_shared_values_out_instead_of_yaml_anchors(tmp_path, capsys):
    """Two vertices that run the even-odd handler share its tag list in the converted mapping."""
    m = _load("11-join-on-sink")
    path = tmp_path / "join.yaml"
    path.write_text(yaml.safe_dump(m))
    assert convert_command(str(path)) == 0
    text = capsys.readouterr().out
    assert "&id" not in text and "*id" not in text
    data = yaml.safe_load(text)
    tagged = [v["udf"]["tags"] for v in data["vertices"] if "tags" in v.get("udf", {})]
    assert tagged and all(t == ["even-tag", "odd-tag"] for t in tagged)


def test_a_handlers_key_without_numaflows_organisation_names_the_handler():
    """Numaflow's images are quay.io/numaio/<repo>/<name>: the key works with or without numaio/."""
    for key in ("numaflow-go/redis-sink", "numaio/numaflow-go/redis-sink"):
        data = manifest.convert(_e2e("simple-fallback"), {key: "tidal.examples.numaflow:log_sink"}).data
        sink = data["vertices"][2]["sink"]
        assert sink["fallback"] == {"pynumaflow": "tidal.examples.numaflow:log_sink"}
        assert sink["pynumaflow"] == "tidal.examples.numaflow:fallback_sink"  # its own example image


def test_a_handlers_key_that_misses_by_a_little_is_refused_naming_the_closest():
    m = _e2e("simple-fallback")
    with pytest.raises(errors.SpecError, match=r"did you mean 'output'\?") as err:
        manifest.convert(
            m, {"outptu": "tidal.examples.numaflow:cat", "output.fallback": "tidal.examples.numaflow:cat"}
        )
    assert err.value.path == "handlers[outptu]"
    # an image key one letter off: the container without a handler says which key was meant
    with pytest.raises(errors.SpecError, match=r"'numaflow-go/redis-sinc' is close: write it as") as err:
        manifest.convert(m, {"numaflow-go/redis-sinc": "tidal.examples.numaflow:log_sink"})
    assert err.value.path == "spec.vertices[2].sink.fallback.udsink.container.image"


def test_a_handlers_key_far_from_any_name_is_listed_as_not_used():
    m = _load("1-simple-pipeline")
    converted = manifest.convert(m, {"a-vertex-of-another-pipeline": "tidal.examples.numaflow:cat"})
    assert "handlers[a-vertex-of-another-pipeline]: matches no vertex or image" in "\n".join(
        converted.ignored
    )


def test_a_sink_containers_env_and_args_are_listed_as_not_honoured():
    m = _load("1-simple-pipeline")
    m["spec"]["vertices"][2]["sink"] = {
        "udsink": {
            "container": {
                "image": "quay.io/numaio/numaflow-go/sink-log:stable",
                "env": [{"name": "LEVEL", "value": "debug"}],
                "args": ["--verbose"],
            }
        }
    }
    converted = manifest.convert(m)
    assert converted.data["vertices"][2]["sink"] == {"log": {}}
    ignored = "\n".join(converted.ignored)
    assert "spec.vertices[2].sink.udsink.container.env" in ignored
    assert "spec.vertices[2].sink.udsink.container.args" in ignored
    assert "sink-log:stable runs as Tidal's log sink" in ignored
    # a handlers file can still give the example log sink's image a handler of the user's
    own = manifest.convert(m, {"numaflow-go/sink-log": "tidal.examples.numaflow:log_sink"})
    assert own.data["vertices"][2]["sink"] == {"pynumaflow": "tidal.examples.numaflow:log_sink"}


@pytest.mark.parametrize("kind", ["fixed", "sliding"])
def test_a_streaming_window_converts_and_must_agree_with_its_handler(kind):
    m = _load("6-reduce-fixed-window" if kind == "fixed" else "7-reduce-sliding-window")
    window = m["spec"]["vertices"][2]["udf"]["groupBy"]["window"]
    window[kind]["streaming"] = True
    data = manifest.convert(m).data  # converted as it stands: the handler decides
    assert data["vertices"][2]["udf"]["groupBy"]["window"][kind]["streaming"] is True
    # the example image runs reduce_sum, a Reducer: as on Numaflow, it cannot serve a streaming window
    with pytest.raises(errors.SpecError, match="not a ReduceStreamer") as err:
        parse_pipeline(data)
    assert err.value.path.endswith(f"udf.groupBy.window.{kind}.streaming")
    window[kind]["streaming"] = False
    parse_pipeline(manifest.convert(m).data)
