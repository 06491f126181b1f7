"""Bounded, model-ready summaries of live Python objects — run only in a forked child.

Every function here may call user code (`__repr__`, `__len__`, `describe()`),
so none of them is ever called in the kernel process: the tools in this package run
them through `fork.run_in_fork`. Each object gets a time budget
(`time_limit`, SIGALRM in the child), so an object whose `__repr__` sleeps
costs its budget and the others are still summarised; each summary has a
character budget, so a 1,700-column DataFrame or a 10 GB array reads the same
size as a small one.

Names that look like secrets are listed by name and type only
(`looks_secret`); their values are never read.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import math
import re
import reprlib
import signal
import sys
import time
import types
from collections.abc import Iterator, Mapping, Sequence, Set
from typing import Any

from phoenix_nb.tools.kernel_port import LastException

# Whole name parts that mark a secret, plus plural and squashed forms
# a user writes as often ("credentials", "apikey").
SECRET_PARTS = frozenset(
    {
        "KEY",
        "KEYS",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "COOKIE",
        "COOKIES",
        "DSN",
        "PAT",
        "APIKEY",
        "ACCESSKEY",
        "SECRETKEY",
        "PRIVATEKEY",
        "AUTHTOKEN",
        "PASSPHRASE",
    }
)
SAMPLE_ROWS = 1_000_000  # rows a DataFrame's null counts and describe() read at most
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
WITHHELD = "[withheld: the name looks like a secret]"


def name_parts(name: str) -> list[str]:
    """`API_TOKEN` -> API, TOKEN; `apiKey` -> API, KEY; `db2Password` -> DB, 2, PASSWORD."""
    return [p.upper() for p in _PARTS.findall(name)]


def looks_secret(name: str) -> bool:
    return any(part in SECRET_PARTS for part in name_parts(name))


class OutOfTime(BaseException):
    """The object's summary used up its time budget (a BaseException: reprlib and user
    code that catch Exception must not swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise OutOfTime in the child after `seconds` (SIGALRM; the child has no wakeup fd)."""

    def expire(_signum: int, _frame: Any) -> None:
        raise OutOfTime(f"gave up after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = max(limit - 40, 0)
    return f"{text[:keep]}… [{len(text) - keep:,} more characters]"


_REPR = reprlib.Repr()
_REPR.maxstring = 200
_REPR.maxother = 200
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxdict = 10
_REPR.maxlevel = 3


def short_repr(value: Any, limit: int = 200) -> str:
    """A bounded repr: containers elided by reprlib, anything else cut."""
    try:
        text = _REPR.repr(value)
    except OutOfTime:
        raise
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}: {exc}>"
    return cut(text, limit)


def type_name(value: Any) -> str:
    cls = type(value)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    if module in ("builtins", "__main__"):
        return str(name)
    top = module.split(".")[0]
    return f"{top}.{name}"


def _module_of(value: Any) -> str:
    return str(getattr(type(value), "__module__", "") or "")


def _is(value: Any, module: str, cls: str) -> bool:
    """isinstance against a class only if its module is already imported (never import it)."""
    mod = sys.modules.get(module)
    target = getattr(mod, cls, None) if mod is not None else None
    return isinstance(target, type) and isinstance(value, target)


def is_dataframe(value: Any) -> bool:
    return _is(value, "pandas", "DataFrame")


def is_series(value: Any) -> bool:
    return _is(value, "pandas", "Series")


def is_polars_frame(value: Any) -> bool:
    return _is(value, "polars", "DataFrame")


def is_ndarray(value: Any) -> bool:
    return _is(value, "numpy", "ndarray")


def as_figure(value: Any) -> Any:
    """The matplotlib Figure behind a Figure or Axes, else None."""
    if _is(value, "matplotlib.figure", "Figure"):
        return value
    if _is(value, "matplotlib.axes", "Axes"):
        return value.figure
    return None


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


# ----------------------------------------------------------------------- listing


def _is_listable(name: str, value: Any, hidden: Set[str]) -> bool:
    if name.startswith("_") or name in hidden:
        return False
    if isinstance(value, types.ModuleType):
        return False
    module = _module_of(value)
    if module.startswith(("phoenix_nb", "IPython", "ipykernel")):
        return False  # the agent's and the kernel's own objects
    if isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        # Functions and classes the user defined in the notebook, not imported ones.
        return getattr(value, "__module__", None) == "__main__"
    return True


def shape_and_size(value: Any) -> tuple[str, str, int | None]:
    """(shape or length, dtype(s), approximate bytes) without reading element values."""
    if is_dataframe(value):
        rows, cols = value.shape
        dtypes = value.dtypes.value_counts()
        kinds = ", ".join(f"{k}×{v}" if v > 1 else str(k) for k, v in dtypes.items())
        size = int(value.memory_usage(index=True, deep=False).sum())
        return f"{rows:,} × {cols:,}", cut(kinds, 80), size
    if is_series(value):
        return f"{len(value):,}", str(value.dtype), int(value.memory_usage(index=True, deep=False))
    if is_polars_frame(value):
        rows, cols = value.shape
        return f"{rows:,} × {cols:,}", "", int(value.estimated_size())
    if is_ndarray(value):
        return " × ".join(f"{d:,}" for d in value.shape) or "scalar", str(value.dtype), value.nbytes
    if isinstance(value, str | bytes | bytearray):
        return f"{len(value):,}", "", sys.getsizeof(value)
    if isinstance(value, Mapping | Sequence | Set):
        try:
            return f"{len(value):,}", "", sys.getsizeof(value)
        except Exception:
            return "", "", None
    try:
        return "", "", sys.getsizeof(value)
    except Exception:
        return "", "", None


def list_variables(
    namespace: Mapping[str, Any],
    hidden: Set[str],
    *,
    limit: int = 100,
    budget: float = 0.5,
    total_budget: float = 8.0,
) -> tuple[list[dict[str, Any]], int]:
    """The user's variables, largest first: [{name, type, shape, dtype, bytes, secret}], total.

    Each size costs at most `budget` seconds (a `__len__` may hang) and all of
    them `total_budget`; past it, variables are listed by name and type only.
    """
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + total_budget
    for name in list(namespace):
        if not isinstance(name, str):
            continue
        value = namespace[name]
        if not _is_listable(name, value, hidden):
            continue
        row: dict[str, Any] = {"name": name, "type": type_name(value)}
        if looks_secret(name):
            row["secret"] = True
        elif time.monotonic() > deadline:
            row["note"] = "size not measured (listing time used up)"
        else:
            try:
                with time_limit(budget):
                    row["shape"], row["dtype"], row["bytes"] = shape_and_size(value)
            except (Exception, OutOfTime) as exc:
                row["note"] = f"size unknown ({type(exc).__name__})"
        rows.append(row)
    rows.sort(key=lambda r: (-(r.get("bytes") or 0), r["name"]))
    return rows[:limit], len(rows)


def format_listing(rows: Sequence[Mapping[str, Any]], total: int) -> str:
    if not rows:
        return "No user variables in the kernel."
    lines = [f"{total} user variable{'s' if total != 1 else ''}, largest first:"]
    for r in rows:
        if r.get("secret"):
            lines.append(f"- {r['name']}: {r['type']} (value withheld: the name looks secret)")
            continue
        bits = [r["type"]]
        if r.get("shape"):
            bits.append(f"shape {r['shape']}" if "×" in r["shape"] else f"len {r['shape']}")
        if r.get("dtype"):
            bits.append(f"dtype {r['dtype']}")
        if r.get("bytes") is not None:
            bits.append(f"~{human_bytes(r['bytes'])}")
        if r.get("note"):
            bits.append(r["note"])
        lines.append(f"- {r['name']}: " + ", ".join(bits))
    if total > len(rows):
        lines.append(f"… {total - len(rows)} smaller variables not listed")
    return "\n".join(lines)


# ------------------------------------------------------------------------ summaries


def _frame_summary(df: Any, budget: int) -> str:
    import pandas as pd

    rows, cols = df.shape
    size = int(df.memory_usage(index=True, deep=False).sum())
    shown = min(cols, 40)
    head_cols = df.columns[:shown]
    # A huge frame is measured on its first rows, within the time budget, and says so.
    part = df.iloc[:SAMPLE_ROWS] if rows > SAMPLE_ROWS else df
    sampled = f" (counted in the first {SAMPLE_ROWS:,} rows)" if part is not df else ""
    nulls = part.iloc[:, :shown].isna().sum()  # by position: column names may repeat
    lines = [f"pandas.DataFrame: {rows:,} rows × {cols:,} columns, ~{human_bytes(size)}"]
    lines.append(f"index: {type(df.index).__name__}, {short_repr(df.index.name, 60)}")
    lines.append(f"columns (first {shown} of {cols:,}): name, dtype, nulls{sampled}")
    for i, column in enumerate(head_cols):
        name = cut(str(column), 60)
        null = int(nulls.iloc[i])
        lines.append(f"  {name}: {df.dtypes.iloc[i]}, {null:,} null")
    if cols > shown:
        rest = df.dtypes.iloc[shown:].astype(str).value_counts()
        kinds = ", ".join(f"{k} ×{v}" for k, v in rest.items())
        lines.append(f"  … {cols - shown:,} more columns ({cut(kinds, 200)})")
    with pd.option_context("display.width", 160, "display.max_colwidth", 30):
        head = df.iloc[:5, :12].to_string(max_cols=12, max_colwidth=30)
        lines.append(f"head(5), first {min(cols, 12)} columns:\n{cut(head, 2500)}")
        numeric = part.select_dtypes("number")
        if numeric.shape[1]:
            described = numeric.iloc[:, :8].describe().to_string(max_cols=8)
            lines.append(
                f"describe(), first {min(numeric.shape[1], 8)} numeric columns{sampled}:\n"
                f"{cut(described, 2500)}"
            )
    return cut("\n".join(lines), budget)


def _series_summary(s: Any, budget: int) -> str:
    lines = [
        f"pandas.Series {short_repr(s.name, 60)}: length {len(s):,}, dtype {s.dtype}, "
        f"{int(s.isna().sum()):,} null"
    ]
    lines.append(f"head(5):\n{cut(s.head(5).to_string(max_rows=5), 1000)}")
    try:
        lines.append(f"describe():\n{cut(s.describe().to_string(), 1000)}")
    except Exception as exc:
        lines.append(f"describe() failed: {type(exc).__name__}")
    return cut("\n".join(lines), budget)


def _polars_summary(df: Any, budget: int) -> str:
    rows, cols = df.shape
    shown = min(cols, 40)
    part = df.head(SAMPLE_ROWS) if rows > SAMPLE_ROWS else df
    sampled = f" (counted in the first {SAMPLE_ROWS:,} rows)" if rows > SAMPLE_ROWS else ""
    nulls = part.select(part.columns[:shown]).null_count().row(0) if shown else ()
    size = human_bytes(df.estimated_size())
    lines = [f"polars.DataFrame: {rows:,} rows × {cols:,} columns, ~{size}"]
    lines.append(f"columns (first {shown} of {cols:,}): name, dtype, nulls{sampled}")
    for (name, dtype), null in zip(list(df.schema.items())[:shown], nulls, strict=False):
        lines.append(f"  {cut(str(name), 60)}: {dtype}, {int(null):,} null")
    if cols > shown:
        lines.append(f"  … {cols - shown:,} more columns")
    head = part.select(part.columns[:12]).head(5)
    lines.append(f"head(5), first {min(cols, 12)} columns:\n{cut(str(head), 2500)}")
    with contextlib.suppress(Exception):
        described = part.select(part.columns[:8]).describe()
        lines.append(
            f"describe(), first {min(cols, 8)} columns{sampled}:\n{cut(str(described), 2500)}"
        )
    return cut("\n".join(lines), budget)


def _array_summary(a: Any, budget: int) -> str:
    import numpy as np

    shape = " × ".join(f"{d:,}" for d in a.shape) or "scalar"
    lines = [f"numpy.ndarray: shape {shape}, dtype {a.dtype}, {human_bytes(a.nbytes)}"]
    if a.size and (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        sample, note = a, ""
        if a.size > 5_000_000:
            step = math.ceil(a.size / 5_000_000)
            flat = a.reshape(-1) if a.flags.c_contiguous else a.ravel()[:5_000_000]
            sample, note = flat[::step], f" (over a sample of {flat[::step].size:,})"
        with np.errstate(all="ignore"):
            lo, hi = np.nanmin(sample), np.nanmax(sample)
            mean = np.nanmean(sample.astype(np.float64)) if sample.dtype != np.bool_ else None
            nans = int(np.isnan(sample).sum()) if np.issubdtype(a.dtype, np.floating) else 0
        stats = f"min {lo}, max {hi}" + (f", mean {mean:.6g}" if mean is not None else "")
        if nans:
            stats += f", {nans:,} NaN"
        lines.append(stats + note)
    with np.printoptions(threshold=60, edgeitems=3, linewidth=120):
        lines.append(f"sample:\n{cut(np.array2string(a), 2000)}")
    return cut("\n".join(lines), budget)


def _mapping_summary(m: Mapping[Any, Any], budget: int) -> str:
    lines = [f"{type_name(m)}: {len(m):,} items"]
    for i, (k, v) in enumerate(m.items()):
        if i >= 15:
            lines.append(f"  … {len(m) - 15:,} more")
            break
        shown = WITHHELD if isinstance(k, str) and looks_secret(k) else short_repr(v, 150)
        lines.append(f"  {short_repr(k, 60)}: {shown}")
    return cut("\n".join(lines), budget)


def _collection_summary(c: Any, budget: int) -> str:
    n = len(c)
    kinds: dict[str, int] = {}
    items = []
    for i, item in enumerate(c):
        if i >= 15:
            break
        items.append(short_repr(item, 150))
        kinds[type_name(item)] = kinds.get(type_name(item), 0) + 1
    lines = [f"{type_name(c)}: {n:,} items (first items' types: {kinds})"]
    lines += [f"  [{i}] {text}" for i, text in enumerate(items)]
    if n > len(items):
        lines.append(f"  … {n - len(items):,} more")
    return cut("\n".join(lines), budget)


def _text_summary(value: str | bytes | bytearray, budget: int) -> str:
    kind = "characters" if isinstance(value, str) else "bytes"
    head = value[:500]
    more = f"\n… {len(value) - 500:,} more {kind}" if len(value) > 500 else ""
    return cut(f"{type_name(value)}: {len(value):,} {kind}\nhead: {head!r}{more}", budget)


def _object_summary(value: Any, budget: int) -> str:
    lines = [f"{type_name(value)}: {short_repr(value, 1000)}"]
    doc_of = getattr(type(value), "__module__", "")
    if callable(value) and isinstance(value, types.FunctionType | type):
        import inspect

        with contextlib.suppress(TypeError, ValueError):
            lines.append(f"signature: {value.__name__}{inspect.signature(value)}")
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict) and attrs:
        lines.append("attributes:")
        for i, (k, v) in enumerate(attrs.items()):
            if i >= 20:
                lines.append(f"  … {len(attrs) - 20} more")
                break
            shown = WITHHELD if looks_secret(str(k)) else short_repr(v, 120)
            lines.append(f"  {k} ({type_name(v)}): {shown}")
    public = [n for n in dir(value) if not n.startswith("_")][:40]
    if public:
        lines.append(f"public names ({doc_of}): " + ", ".join(public))
    return cut("\n".join(lines), budget)


def figure_png(fig: Any, *, max_edge: int = 1568, max_bytes: int = 1 << 20) -> bytes | None:
    """The figure as PNG, long edge ≤ max_edge px and ≤ max_bytes (lower dpi until it fits)."""
    width, height = fig.get_size_inches()
    dpi = min(100.0, max_edge / max(width, height, 0.01))
    for _ in range(4):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        data = buf.getvalue()
        if len(data) <= max_bytes:
            return data
        dpi /= 2
    return None


def summarize(name: str, value: Any, budget: int) -> tuple[str, bytes | None]:
    """(text, PNG or None) for one variable."""
    if looks_secret(name):
        return f"{name}: {type_name(value)} — value withheld (the name looks secret)", None
    figure = as_figure(value)
    if figure is not None:
        png = figure_png(figure)
        axes = figure.get_axes()
        titles = [a.get_title() for a in axes if a.get_title()]
        width, height = figure.get_size_inches() * figure.dpi
        text = (
            f"{name}: matplotlib figure, {width:.0f}×{height:.0f} px, {len(axes)} axes"
            + (f", titles {titles[:5]}" if titles else "")
            + ("; image attached" if png else "; image too large to attach")
        )
        return text, png
    if is_dataframe(value):
        body = _frame_summary(value, budget)
    elif is_series(value):
        body = _series_summary(value, budget)
    elif is_polars_frame(value):
        body = _polars_summary(value, budget)
    elif is_ndarray(value):
        body = _array_summary(value, budget)
    elif isinstance(value, str | bytes | bytearray):
        body = _text_summary(value, budget)
    elif isinstance(value, Mapping):
        body = _mapping_summary(value, budget)
    elif isinstance(value, Sequence | Set):
        body = _collection_summary(value, budget)
    else:
        body = _object_summary(value, budget)
    return cut(f"{name}: {body}", budget), None


# ------------------------------------------------------------------------ exceptions

_INTERNAL = ("/IPython/", "/ipykernel/", "/phoenix_nb/", "/asyncio/")


def _frame_locals(frame: types.FrameType, code: types.CodeType, budget: float) -> list[str]:
    if code.co_name == "<module>":
        # A cell's frame: its locals are the whole namespace; show the names it used.
        names = [n for n in code.co_names if n in frame.f_globals]
        scope: Mapping[str, Any] = frame.f_globals
    else:
        scope = frame.f_locals
        names = list(scope)
    out = []
    for name in names[:12]:
        value = scope[name]
        if isinstance(value, types.ModuleType):
            continue
        if looks_secret(name):
            out.append(f"{name}: {type_name(value)} (withheld)")
            continue
        try:
            with time_limit(budget):
                out.append(f"{name} = {short_repr(value, 150)} ({type_name(value)})")
        except OutOfTime:
            out.append(f"{name}: {type_name(value)} (repr took too long)")
    if len(names) > 12:
        out.append(f"… {len(names) - 12} more")
    return out


def summarize_exception(exc: LastException, *, budget: int = 8000) -> str:
    """Type, message, and the traceback's frames with their locals summarised."""
    try:
        with time_limit(1.0):
            message = cut(str(exc.value), 500)
    except OutOfTime:
        message = "<str() took longer than 1 s>"
    except Exception as error:
        message = f"<str() failed: {type(error).__name__}>"
    where = f" (cell [{exc.execution_count}])" if exc.execution_count else ""
    lines = [f"Last exception{where}: {exc.type.__name__}: {message}"]
    frames: list[tuple[types.FrameType, int]] = []
    tb = exc.traceback
    while tb is not None:
        frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    user = [(f, n) for f, n in frames if not any(p in f.f_code.co_filename for p in _INTERNAL)]
    if len(user) > 8:
        lines.append(f"({len(user) - 8} outer frames omitted)")
        user = user[-8:]
    lines.append("Traceback (most recent call last), with each frame's locals:")
    for frame, lineno in user:
        code = frame.f_code
        lines.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}')
        source = linecache.getline(code.co_filename, lineno, frame.f_globals).strip()
        if source:
            lines.append(f"    {cut(source, 200)}")
        for local in _frame_locals(frame, code, 0.5):
            lines.append(f"      {local}")
    cause = exc.value.__cause__ or exc.value.__context__
    if cause is not None:
        lines.append(f"(raised while handling {type(cause).__name__})")
    return cut("\n".join(lines), budget)
