"""The only things that cross between model code and the verdict: plain data.

Model-written code runs in the sandbox; the benchmark's test runs in a separate checker
process (sandboxed too, non-dumpable, model code never runs in it). What the test needs from the model's code (a module-level value, the return
value of a call) travels as tagged JSON that can carry no code and no behaviour: builtins
of their exact types, numpy arrays and scalars as `.npy` bytes read with
`allow_pickle=False`, pandas frames, series and indexes as Arrow IPC streams (converted
without Arrow's thread pools: a sample without a cgroup may start no thread). An object
of any other type (an "always equal" object, a subclass overriding `__eq__`, an object
array) cannot be encoded, and the sample fails.

Both child processes run `python -I` without this package on their path: they receive
this file's source text and `exec` it, so the codec is the same on both sides.
"""

from __future__ import annotations

import base64
import datetime
import io
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names for annotations only: the sandbox execs this file without them
    import pandas as pd

MAX_DEPTH = 64


class Unencodable(TypeError):
    """A value that cannot cross: the sample fails."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _text(v: object) -> str:
    """A JSON string where the codec wrote one; anything else is a malformed value."""
    if not isinstance(v, str):
        raise Unencodable("malformed value")
    return v


def _items(v: object) -> list[object]:
    """A JSON array where the codec wrote one; anything else is a malformed value."""
    if not isinstance(v, list):
        raise Unencodable("malformed value")
    return v


def encode(value: object, depth: int = 0) -> object:
    """A JSON-ready form of `value`; exact types only (a subclass may override `__eq__`)."""
    if depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        return {"t": "float", "v": repr(value)}
    if type(value) is complex:
        return {"t": "complex", "v": [repr(value.real), repr(value.imag)]}
    if type(value) is bytes:
        return {"t": "bytes", "v": _b64(value)}
    if kind in (list, tuple, set, frozenset) and isinstance(value, (list, tuple, set, frozenset)):
        return {"t": kind.__name__, "v": [encode(item, depth + 1) for item in value]}
    if type(value) is dict:
        return {"t": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if type(value) is datetime.timedelta:
        return {"t": "timedelta", "v": repr(value.total_seconds())}
    if kind in (datetime.datetime, datetime.date, datetime.time) and isinstance(value, (datetime.date, datetime.time)):
        return {"t": kind.__name__, "v": value.isoformat()}
    if type(value) is slice:
        return {"t": "slice", "v": [encode(value.start), encode(value.stop), encode(value.step)]}
    root = kind.__module__.split(".")[0]
    if root == "numpy":
        return _encode_numpy(value)
    if root == "pandas":
        return _encode_pandas(value)
    raise Unencodable(f"a value of type {kind.__module__}.{kind.__qualname__} cannot be compared safely")


def _encode_numpy(value: object) -> dict[str, object]:
    import numpy as np

    if type(value) in (np.ndarray, np.recarray, np.matrix) and isinstance(value, np.ndarray):
        array = np.asarray(value) if type(value) is np.matrix else value.view(np.ndarray)
        tag = {np.ndarray: "ndarray", np.recarray: "recarray", np.matrix: "matrix"}[type(value)]
    elif isinstance(value, np.generic) and type(value).__module__ == "numpy":
        array = np.asarray(value)
        tag = "npscalar"
    else:
        raise Unencodable(f"numpy value of type {type(value).__qualname__}")
    if array.dtype.hasobject:
        raise Unencodable("numpy arrays of Python objects cannot be compared safely")
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return {"t": tag, "v": _b64(buf.getvalue())}


def _arrow(frame: pd.DataFrame) -> object:
    """A frame as an Arrow IPC stream; a frame Arrow cannot type (a column mixing
    strings and numbers) column by column, its object columns as encoded values."""
    import pyarrow as pa

    try:
        table = pa.Table.from_pandas(frame, nthreads=1)  # no thread: a sample without a cgroup may start none
    except (pa.ArrowException, TypeError, ValueError):
        return {"columns": encode(list(frame.columns)), "index": _encode_pandas(frame.index),
                "data": [_column(frame.iloc[:, i]) for i in range(frame.shape[1])]}
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(use_threads=False)) as writer:
        writer.write_table(table)
    return _b64(sink.getvalue().to_pybytes())


def _column(series: pd.Series) -> dict[str, object]:
    if series.dtype == object:
        return {"dtype": "object", "values": encode(list(series))}
    return {"dtype": None, "frame": _arrow(series.to_frame(name="__values__").reset_index(drop=True))}


def _encode_pandas(value: pd.Timestamp | pd.DataFrame | pd.Series | pd.Index) -> dict[str, object]:
    import pandas as pd

    if type(value) is pd.Timestamp:
        return {"t": "timestamp", "v": value.isoformat()}
    if type(value) is pd.DataFrame:
        return {"t": "dataframe", "v": _arrow(value)}
    if type(value) is pd.Series:
        return {"t": "series", "name": encode(value.name), "v": _arrow(value.to_frame(name="__values__"))}
    if isinstance(value, pd.Index) and type(value).__module__.split(".")[0] == "pandas":
        if value.dtype == object:
            return {"t": "index_values", "v": encode(list(value)), "name": encode(value.name)}
        return {"t": "index", "v": _arrow(pd.DataFrame(index=value))}
    raise Unencodable(f"pandas value of type {type(value).__qualname__}")


def _frame(raw: object) -> pd.DataFrame:
    import pandas as pd
    import pyarrow as pa

    if isinstance(raw, dict):  # column by column (see _arrow)
        columns = decode(raw["columns"])
        data = {}
        for i, col in enumerate(raw["data"]):
            if col["dtype"] == "object":
                data[i] = pd.Series(decode(col["values"]), dtype=object)
            else:
                data[i] = _frame(col["frame"])["__values__"]
        frame = pd.DataFrame({i: s.to_numpy() if s.dtype == object else s.array for i, s in data.items()},
                             index=decode(raw["index"]))
        frame.columns = pd.Index(columns)
        return frame
    stream = pa.ipc.open_stream(base64.b64decode(_text(raw)), options=pa.ipc.IpcReadOptions(use_threads=False))
    return stream.read_all().to_pandas(use_threads=False)


def _numpy(tag: str, v: object) -> object:
    import numpy as np

    array = np.load(io.BytesIO(base64.b64decode(_text(v))), allow_pickle=False)
    if tag == "npscalar":
        return array[()]
    return array.view(np.recarray) if tag == "recarray" else np.asmatrix(array) if tag == "matrix" else array


def _timestamp(v: object) -> object:
    import pandas as pd

    return pd.Timestamp(v)


def _index_values(v: object, data: dict[str, object]) -> object:
    import pandas as pd

    return pd.Index(decode(v), dtype=object, name=decode(data.get("name")))


def _series(v: object, data: dict[str, object]) -> object:
    series = _frame(v)["__values__"]
    series.name = decode(data.get("name"))
    return series


def _container(make: Callable[[list[object]], object]) -> Callable[[object, dict[str, object]], object]:
    return lambda v, _: make([decode(item) for item in _items(v)])


def _array(tag: str) -> Callable[[object, dict[str, object]], object]:
    return lambda v, _: _numpy(tag, v)


_CONTAINERS: dict[str, Callable[[list[object]], object]] = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}
# tag -> (its value, the whole record) -> the value `encode` was given
_DECODERS: dict[str, Callable[[object, dict[str, object]], object]] = {
    "float": lambda v, _: float(_text(v)),
    "complex": lambda v, _: complex(float(_text(_items(v)[0])), float(_text(_items(v)[1]))),
    "bytes": lambda v, _: base64.b64decode(_text(v)),
    **{tag: _container(make) for tag, make in _CONTAINERS.items()},
    "dict": lambda v, _: {decode(k): decode(val) for k, val in map(_items, _items(v))},
    "timedelta": lambda v, _: datetime.timedelta(seconds=float(_text(v))),
    "datetime": lambda v, _: datetime.datetime.fromisoformat(_text(v)),
    "date": lambda v, _: datetime.date.fromisoformat(_text(v)),
    "time": lambda v, _: datetime.time.fromisoformat(_text(v)),
    "slice": lambda v, _: slice(decode(_items(v)[0]), decode(_items(v)[1]), decode(_items(v)[2])),
    **{tag: _array(tag) for tag in ("ndarray", "npscalar", "recarray", "matrix")},
    "timestamp": lambda v, _: _timestamp(v),
    "index_values": _index_values,
    "dataframe": lambda v, _: _frame(v),
    "series": _series,
    "index": lambda v, _: _frame(v).index,
}


def decode(data: object) -> object:
    """The value `encode` made, rebuilt from data only."""
    if data is None or isinstance(data, (bool, int, str)):
        return data
    if not isinstance(data, dict) or "t" not in data:
        raise Unencodable("malformed value")
    tag = data["t"]
    decoder = _DECODERS.get(tag) if isinstance(tag, str) else None
    if decoder is None:
        raise Unencodable(f"unknown tag {tag!r}")
    return decoder(data.get("v"), data)
