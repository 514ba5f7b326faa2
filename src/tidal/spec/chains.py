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
* ``a`` or ``b`` is a SQL or DataFrame step: those are queries of their own over buffered rows;
* the edge says ``chain: false`` (Flink's ``disableChaining``): for isolation, a scale block of
  its own, or back pressure between the two steps.

``chain: true`` on an edge that cannot be chained is a spec error naming the reason
(:func:`chain_errors`); ``chain: false`` where it could not be chained anyway is accepted.

**A chain scales as one unit, by its head's rules** (a source chain by its source's, a UDF chain by
the buffer its head reads): the controller sees the pipeline with every chain folded into its
head (:func:`folded`). A member's own ``scale``, ``replicas``, ``policy`` and ``kpa`` do not apply
while it is chained; the plan names those that differ from its head's
(:attr:`Chain.unused`), and ``chain: false`` keeps them.

Pure: no Spark, no I/O; the runtime (:mod:`tidal.spark.pipeline`) and the dry run use it.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    # What the members after the head set that does not apply while chained (``enrich.scale``).
    unused: tuple[str, ...] = ()

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
    if a.source is not None and a.source.http is not None:
        return f"{a.name} is an HTTP source: its receivers write {b.name}'s buffer"
    for v in (a, b):
        if v.udf is not None and v.udf.engine != "python":
            return f"{v.name} is a {v.udf.engine} step: a query of its own over buffered rows"
    return None


def _unused(v: VertexSpec, head: VertexSpec) -> tuple[str, ...]:
    """What a follower asks for that its chain's head, which decides for it, does not give."""
    keys = ("scale", "replicas", "policy", "kpa")
    return tuple(f"{v.name}.{key}" for key in keys if getattr(v, key) != getattr(head, key))


def plan_chains(spec: PipelineSpec) -> ChainPlan:
    """The chains of ``spec`` (a validated spec), each edge with its reason."""
    decided: list[EdgeChaining] = []
    next_of: dict[str, str] = {}
    for edge in spec.edges:
        why = _why_not(spec, edge)
        if why is None and edge.chain is False:
            why = "chain: false on the edge"
        if why is None:
            next_of[edge.from_] = edge.to
            decided.append(EdgeChaining(edge.from_, edge.to, True, "one-to-one edge"))
        else:
            decided.append(EdgeChaining(edge.from_, edge.to, False, why))
    followers = set(next_of.values())
    chains = []
    for v in spec.vertices:
        if v.name in followers:
            continue
        members = [v.name]
        while members[-1] in next_of:
            members.append(next_of[members[-1]])
        unused = tuple(u for m in members[1:] for u in _unused(spec.vertex(m), v))
        chains.append(Chain(tuple(members), unused))
    return ChainPlan(tuple(decided), tuple(chains))


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
    source or function and rules and takes the tail's sink and output edges. A chain of one is
    its vertex unchanged."""
    if not plan.signature:
        return spec
    heads = {c.head: c for c in plan.chains}
    vertices = []
    for v in spec.vertices:
        chain = heads.get(v.name)
        if chain is None:
            continue  # a follower: its head stands for it
        tail_sink = spec.vertex(chain.tail).sink
        vertices.append(v.model_copy(update={"sink": tail_sink}) if chain.followers else v)
    tails = {c.tail: c.head for c in plan.chains}
    edges = [
        e.model_copy(update={"from_": tails[e.from_]})
        for e in spec.edges
        if e.from_ in tails and e.to in heads  # edges inside a chain are gone
    ]
    return spec.model_copy(update={"vertices": vertices, "edges": edges})
