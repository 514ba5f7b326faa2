"""The pipeline spec: YAML or Python builder → one validated :class:`PipelineSpec`.

See ``docs/pipeline-spec.md`` for every field.
"""

from tidal.spec import graph
from tidal.spec.builder import Pipeline
from tidal.spec.model import (
    DEFAULT_POLICY,
    EdgeSpec,
    GeneratorSpec,
    Limits,
    PipelineSpec,
    ScaleSpec,
    SinkSpec,
    SourceSpec,
    UdfKind,
    UdfSpec,
    VertexSpec,
)
from tidal.spec.shapes import LoadShape, Shape
from tidal.spec.validate import load_pipeline, numaflow_scale, parse_pipeline, resolve

__all__ = [
    "DEFAULT_POLICY",
    "EdgeSpec",
    "GeneratorSpec",
    "Limits",
    "LoadShape",
    "Pipeline",
    "PipelineSpec",
    "ScaleSpec",
    "Shape",
    "SinkSpec",
    "SourceSpec",
    "UdfKind",
    "UdfSpec",
    "VertexSpec",
    "graph",
    "load_pipeline",
    "numaflow_scale",
    "parse_pipeline",
    "resolve",
]
