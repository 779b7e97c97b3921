"""Where a Ray run's work went, per node, read back from run.json's `backend` (written by
`RayRunner.placement`): the workers that ran on each node, the jobs they answered, the
HTTP requests they sent (retries included) and whether the node was lost mid-run. The
terminal summary (summary.py) and the report (tables.py, html.py) render this one
reading as one table, so they cannot disagree.

The block is read through typed values: a run.json from before a key was kept (no
`nodes`, no `sent`) or of the wrong shape shows what it has, "-" for a figure it lacks,
and a local run (no `nodes`) shows nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..json_values import as_int, as_list, as_object
from ..terminal import aligned


@dataclass(frozen=True)
class Node:
    """One node's figures; None where run.json does not have the figure."""

    node: str  # the first 12 hex digits of Ray's node id
    ip: str
    workers: int | None  # workers that ran there (a replacement counts on its own node)
    answered: int | None  # jobs answered through those workers
    sent: int | None  # HTTP requests they sent, retries included
    lost: bool  # its workers died mid-run


@dataclass(frozen=True)
class Placement:
    """A Ray run's nodes, and the replacements its lost workers needed."""

    nodes: list[Node]
    workers_replaced: int
    requests_resent: int  # jobs handed again to a replacement (an upper bound on requests sent twice)


def placement_of(backend: object) -> Placement | None:
    """run.json's `backend` as a Placement; None for any backend but Ray."""
    block = as_object(backend)
    if block.get("name") != "ray":
        return None
    nodes = [_node(entry) for raw in as_list(block.get("nodes")) if (entry := as_object(raw))]
    return Placement(nodes, as_int(block.get("workers_replaced")) or 0, as_int(block.get("requests_resent")) or 0)


def _node(entry: dict[str, object]) -> Node:
    node, ip = entry.get("node"), entry.get("ip")
    return Node(node if isinstance(node, str) else "?", ip if isinstance(ip, str) else "",
                as_int(entry.get("workers")), as_int(entry.get("requests")), as_int(entry.get("sent")),
                entry.get("lost") is True)


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _total(values: list[int | None]) -> int | None:
    """A column's sum; None (shown "-") where a node lacks the figure: a total is never
    short of a node."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def node_table(placement: Placement) -> tuple[list[str], list[list[str]]]:
    """One row per node and a total row, each of its numbers the sum of its column. The
    `sent` column only where run.json has it, `lost` only where a node was lost."""
    nodes = placement.nodes
    with_sent = any(n.sent is not None for n in nodes)
    with_lost = any(n.lost for n in nodes)

    def row(name: str, ip: str, workers: int | None, answered: int | None, sent: int | None, mark: str) -> list[str]:
        return [name, ip, _count(workers), _count(answered), *([_count(sent)] if with_sent else []),
                *([mark] if with_lost else [])]

    header = ["node", "ip", "workers", "answered", *(["sent"] if with_sent else []), *(["lost"] if with_lost else [])]
    body = [row(n.node, n.ip, n.workers, n.answered, n.sent, "lost" if n.lost else "") for n in nodes]
    body.append(row("total", "", _total([n.workers for n in nodes]), _total([n.answered for n in nodes]),
                    _total([n.sent for n in nodes]), ""))
    return header, body


def replacements(placement: Placement) -> str:
    """"workers replaced 1, requests handed again 7", or "" when none was."""
    parts = [f"workers replaced {placement.workers_replaced:,}" if placement.workers_replaced else "",
             f"requests handed again {placement.requests_resent:,}" if placement.requests_resent else ""]
    return ", ".join(p for p in parts if p)


def placement_lines(placement: Placement | None) -> list[str]:
    """The terminal summary's lines: a heading, then the node table in aligned columns
    (numbers right-aligned); none for a local run, nor for a Ray run with nothing to show."""
    if placement is None:
        return []
    replaced = replacements(placement)
    if not placement.nodes:
        return [f"Ray: {replaced}"] if replaced else []
    header, body = node_table(placement)
    lines = aligned([header, *body], right={i for i, name in enumerate(header) if name in ("workers", "answered", "sent")})
    legend = "; sent: HTTP requests, retries included" if "sent" in header else ""
    return [f"Ray nodes (this invocation{legend})" + (f"; {replaced}" if replaced else "") + ":", *lines]
