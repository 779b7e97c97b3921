"""PrivateEval's sandboxed programs checked on other machines (the Ray backend's
`map_chunks`): the CPU-heavy part of BAMBOO's scoring, one interpreter start, import of
numpy/pandas and checker per program, spread over a cluster's nodes.

The driver deals the distinct programs into chunks of `CHUNK_PROGRAMS`; each chunk is
one task (one CPU) that runs its programs one at a time with `check_chunk`. Everything a
verdict depends on is decided where the program runs: the interpreter
(`sandbox_interpreter` on that node: --sandbox-python, ASYNCBENCH_SANDBOX_PYTHON, or the
release environment, built there on first use) and the isolation mode (bwrap, mountns,
or refuse), probed on that node. A node that cannot sandbox (or import what the programs
need) answers every program of its chunk with the sandbox's one-line reason as an
"error: ..." outcome: those samples fail with that reason, they never score 0.
"""

from __future__ import annotations

import functools
import math
import socket
from collections.abc import Callable

from ...errors import UserError
from .sandbox import Limits, Program, ProgramVerdict

# Programs per task: a program costs about a second of CPU (interpreter, numpy/pandas
# imports, checker), so a task is a few seconds, far above Ray's per-task overhead, and a
# handful of rows still makes several tasks to spread.
CHUNK_PROGRAMS = 4
# The options a node needs to choose the interpreter and limits as the driver would.
SANDBOX_OPTIONS = ("sandbox_python", "sandbox_own_python", "allow_unsafe_sandbox", "sandbox_timeout_s")

# options -> (interpreter, Limits) on the machine that runs the chunk (benchmark.sandbox_setup;
# a module-level function, so Ray sends it by name)
Setup = Callable[[dict[str, object]], tuple[str, Limits]]
# (check_chunk, its arguments per chunk) -> each chunk's verdicts, in order (RunContext.map_chunks)
MapChunks = Callable[[Callable[..., list[ProgramVerdict]], list[tuple[list[Program], dict[str, object], Setup]]],
                     list[list[ProgramVerdict]]]


def check_chunk(programs: list[Program], options: dict[str, object], setup: Setup) -> list[ProgramVerdict]:
    """Check `programs` on this machine, one at a time (the task holds one CPU), after
    choosing the interpreter and limits (`setup(options)`, the benchmark's rule) and
    probing the sandbox here. A machine that cannot sandbox: every program gets
    "error: <the one-line reason>" (a failed sample)."""
    import anyio

    from .sandbox import check_many
    from .sandbox_env import PROBE_IMPORTS

    try:
        python, limits = setup(options)
        call = functools.partial(check_many, programs, limits, workers=1, python=python,
                                 allow_unsafe=bool(options.get("allow_unsafe_sandbox")), imports=PROBE_IMPORTS)
        return anyio.run(call)
    except UserError as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        why = f"error: on {socket.gethostname()}: {lines[0]}"
        return [ProgramVerdict(why, 0.0) for _ in programs]


def check_spread(programs: list[Program], options: dict[str, object], map_chunks: MapChunks,
                 setup: Setup) -> list[ProgramVerdict]:
    """`check_many` through `map_chunks`: identical programs run once, the distinct ones
    in chunks of CHUNK_PROGRAMS, one task each; outcomes in the order of `programs`."""
    unique = list(dict.fromkeys(programs))
    if not unique:
        return []
    n_chunks = math.ceil(len(unique) / CHUNK_PROGRAMS)
    chunks = [unique[k::n_chunks] for k in range(n_chunks)]  # dealt: slow problems spread
    wanted = {key: options[key] for key in SANDBOX_OPTIONS if options.get(key) is not None}
    results = map_chunks(check_chunk, [(chunk, wanted, setup) for chunk in chunks])
    verdict: dict[Program, ProgramVerdict] = {}
    for chunk, outcomes in zip(chunks, results):
        verdict.update(zip(chunk, outcomes))
    return [verdict[p] for p in programs]
