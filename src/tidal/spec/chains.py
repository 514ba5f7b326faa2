"""Chaining: which adjacent vertices run as one Spark query, and why each edge is or is not chained.

Every vertex used to be its own Structured Streaming query, so every step paid a micro-batch's
fixed cost (offset and commit logs, planning, a Python worker for the writer) and a buffer hop.
Flink's answer is operator chaining; Tidal's is the same rule at plan time: an edge ``a → b``
where ``a`` has no other output and ``b`` no other input is **chained** by default. The chain's
one query reads the head's input, runs every member's function in the same task on the same
Arrow batch, and writes the tail's outputs or sink; nothing is buffered between its members.

An edge is not chained (each reason is shown by ``tidal run --dry-run`` and in the dashboard):

* fan-out (``a`` writes several edges) or fan-in (``b`` reads several): a chain is a line;
* ``a`` is an HTTP source: its receivers, not a query, write ``b``'s buffer;
* the edge has ``conditions`` (:mod:`tidal.spec.routing`): ``a``'s tail routes by tags;
* the edge has ``onFull: discardLatest``: it drops what a full buffer cannot take;
* ``a`` or ``b`` is a SQL or DataFrame step: those are queries of their own over buffered rows;
* the edge says ``chain: false`` (Flink's ``disableChaining``): for isolation, a scale block of
  its own, or back pressure between the two steps.

``chain: true`` on an edge that cannot be chained is a spec error naming the reason
(:func:`chain_errors`); ``chain: false`` where it could not be chained anyway is accepted.

**A chain scales as one unit, by its head's rules** (a source chain by its source's, or by the
MonoVertex rules when it ends in a sink; a UDF chain by the buffer its head reads): the controller
sees the pipeline with every chain folded into its head (:func:`folded`). **Its settings are the
ones its members ask for**: a member's ``scale``, ``replicas``, ``policy`` or ``kpa`` that is not
the default is the chain's, whichever member sets it, so a ``scale`` block written on the step
that does the work bounds the chain it runs in. Two members asking for different values of the
same setting are not chained (Flink does not chain operators of different parallelism either):
the edge keeps its buffer, and its reason names the setting. ``chain: true`` on such an edge
chains them anyway; the chain keeps the first member's value and the plan names the one it does
not use (:attr:`Chain.unused`).

Pure: no Spark, no I/O; the runtime (:mod:`tidal.spark.run.pipeline`) and the dry run use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tidal.spec.model import EdgeSpec, PipelineSpec, VertexSpec

__all__ = ["Chain", "ChainPlan", "EdgeChaining", "chain_errors", "folded", "plan_chains"]


@dataclass(frozen=True, slots=True)
class EdgeChaining:
    """One edge of the plan: chained or not, and why."""

    from_: str
    to: str
    chained: bool
    reason: str


@dataclass(frozen=True, slots=True)
class Chain:
    """Vertices run as one query, head first. A vertex that is in no chain is a chain of one."""

    members: tuple[str, ...]
    # What a member set that the chain does not use (``enrich.scale``): only where ``chain: true``
    # chained two members that ask for different values of one setting.
    unused: tuple[str, ...] = ()
    # The settings the chain runs with, where a member asked for one (``scale``, ``replicas``,
    # ``policy``, ``kpa``): the first member's that set it. The others are the defaults.
    settings: Mapping[str, object] = field(default_factory=dict)

    @property
    def head(self) -> str:
        return self.members[0]

    @property
    def tail(self) -> str:
        return self.members[-1]

    @property
    def followers(self) -> tuple[str, ...]:
        return self.members[1:]


@dataclass(frozen=True, slots=True)
class ChainPlan:
    edges: tuple[EdgeChaining, ...]
    chains: tuple[Chain, ...]  # every vertex in exactly one, in the spec's order of heads

    def chain_of(self, vertex: str) -> Chain:
        for chain in self.chains:
            if vertex in chain.members:
                return chain
        raise KeyError(vertex)

    def head_of(self, vertex: str) -> str:
        return self.chain_of(vertex).head

    @property
    def signature(self) -> str:
        """The chains of more than one vertex, as text (``a>b>c;d>e``; empty: none): what a run
        directory records, so a restart cannot silently run another plan over its state."""
        return ";".join(">".join(c.members) for c in self.chains if len(c.members) > 1)

    def describe(self) -> list[str]:
        """One line per edge, for the dry run and the log."""
        return [
            f"{e.from_} → {e.to}: {'chained' if e.chained else 'not chained'} ({e.reason})"
            for e in self.edges
        ]


def _why_not(spec: PipelineSpec, edge: EdgeSpec) -> str | None:
    """Why ``edge`` cannot be chained, or None when it can (whatever its ``chain`` says)."""
    a, b = spec.vertex(edge.from_), spec.vertex(edge.to)
    outs, ins = spec.outputs(a.name), spec.inputs(b.name)
    if len(outs) > 1:
        return f"fan-out: {a.name} writes {len(outs)} edges ({', '.join(outs)})"
    if len(ins) > 1:
        return f"fan-in: {b.name} reads {len(ins)} edges ({', '.join(ins)})"
    if edge.conditions is not None:
        return "the edge has conditions: messages are routed by their tags through a buffer"
    if edge.on_full == "discardLatest":
        return "the edge has onFull: discardLatest: it drops at a full buffer, so it needs one"
    if a.source is not None and a.source.http is not None:
        return f"{a.name} is an HTTP source: its receivers write {b.name}'s buffer"
    for v in (a, b):
        if v.udf is not None and v.udf.engine != "python":
            return f"{v.name} is a {v.udf.engine} step: a query of its own over buffered rows"
    return None


SETTINGS = ("scale", "replicas", "policy", "kpa")  # what a chain takes from the members that set it


def _asks(v: VertexSpec) -> dict[str, object]:
    """The settings ``v`` asks for: those that are not the default (a default is no preference)."""
    defaults = VertexSpec.model_fields
    asked: dict[str, object] = {}
    for key in SETTINGS:
        value = getattr(v, key)
        default = defaults[key].get_default(call_default_factory=True)
        if value != default:
            asked[key] = value
    return asked


def _clash(chain_asks: Mapping[str, tuple[str, object]], v: VertexSpec) -> list[str]:
    """The settings ``v`` asks for that the chain so far has from another member, with another
    value (``scale``, …)."""
    return [key for key, value in _asks(v).items() if key in chain_asks and chain_asks[key][1] != value]


def plan_chains(spec: PipelineSpec) -> ChainPlan:
    """The chains of ``spec`` (a validated spec), each edge with its reason."""
    reasons: dict[int, tuple[bool, str]] = {}
    candidate: dict[str, tuple[int, EdgeSpec]] = {}  # a → (index, edge a → b) where the graph allows
    for k, edge in enumerate(spec.edges):
        why = _why_not(spec, edge)
        if why is None and edge.chain is False:
            why = "chain: false on the edge"
        if why is None:
            candidate[edge.from_] = (k, edge)
        else:
            reasons[k] = (False, why)
    order = {v.name: i for i, v in enumerate(spec.vertices)}
    graph_followers = {edge.to for _, edge in candidate.values()}
    heads = [v.name for v in spec.vertices if v.name not in graph_followers]
    chains = []
    while heads:
        head = heads.pop(0)
        members = [head]
        asks = {key: (head, value) for key, value in _asks(spec.vertex(head)).items()}
        unused: list[str] = []
        while members[-1] in candidate:
            k, edge = candidate[members[-1]]
            follower = spec.vertex(edge.to)
            clashes = _clash(asks, follower)
            if clashes and edge.chain is not True:
                differ = ", ".join(f"{follower.name}.{key} (not {asks[key][0]}'s)" for key in clashes)
                reasons[k] = (False, f"settings differ: {differ}; chain: true chains them")
                heads.append(follower.name)  # a chain of its own from here
                break
            reasons[k] = (True, "one-to-one edge" if not clashes else "chain: true on the edge")
            unused.extend(f"{follower.name}.{key}" for key in clashes)
            for key, value in _asks(follower).items():
                asks.setdefault(key, (follower.name, value))
            members.append(follower.name)
        chains.append(Chain(tuple(members), tuple(unused), {key: value for key, (_, value) in asks.items()}))
    chains.sort(key=lambda c: order[c.head])
    edges = tuple(EdgeChaining(e.from_, e.to, reasons[k][0], reasons[k][1]) for k, e in enumerate(spec.edges))
    return ChainPlan(edges, tuple(chains))


def chain_errors(spec: PipelineSpec) -> list[tuple[int, str]]:
    """``(edge index, reason)`` for every edge that says ``chain: true`` and cannot be chained."""
    found = []
    for k, edge in enumerate(spec.edges):
        if edge.chain is True:
            why = _why_not(spec, edge)
            if why is not None:
                found.append((k, why))
    return found


def folded(spec: PipelineSpec, plan: ChainPlan) -> PipelineSpec:
    """``spec`` as the controller sees it: every chain one vertex, its head, which keeps the head's
    source or function (so its rules), takes the chain's settings (:attr:`Chain.settings`) and the
    tail's sink and output edges. A chain of one is its vertex unchanged."""
    if not plan.signature:
        return spec
    heads = {c.head: c for c in plan.chains}
    vertices = []
    for v in spec.vertices:
        chain = heads.get(v.name)
        if chain is None:
            continue  # a follower: its head stands for it
        tail_sink = spec.vertex(chain.tail).sink
        update = {"sink": tail_sink, **chain.settings}
        vertices.append(v.model_copy(update=update) if chain.followers else v)
    tails = {c.tail: c.head for c in plan.chains}
    edges = [
        e.model_copy(update={"from_": tails[e.from_]})
        for e in spec.edges
        if e.from_ in tails and e.to in heads  # edges inside a chain are gone
    ]
    return spec.model_copy(update={"vertices": vertices, "edges": edges})
