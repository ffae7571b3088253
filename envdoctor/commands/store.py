"""The fleet store: `envdoctor fleet DIR --store fleet.parquet` writes, and `envdoctor fleet
fleet.parquet` reads back, one row per node × check (× GPU, for a finding about some GPUs).

The rows are the findings each report was saved with (or, with ``--rejudge``, today's), exactly the
ones `fleet` counts: the store is written from the same :class:`~envdoctor.commands.saved.Summary`
objects the fleet's tables are built from, never judged again, and reading it back yields those
summaries, so both print the same tables. Every string is redacted before it is written, as
`fleet`'s output is (the configuration key is a digest of the unredacted configuration, so two
nodes that differ only in a secret are grouped as `fleet` groups them).

Columns (one Parquet file, zstd, dictionary-encoded; ``envdoctor.store`` = ``STORE_VERSION`` in the
file's key-value metadata):

==================== =========== ====================================================================
report               int32       the report's sequence number in the fleet's input (a node's rows)
node                 string      hostname (``launch.hostname``), else the file's name; ``/rankN`` for
                                 a rank of a cluster report
path                 string      the file it was read from (``FILE#R`` for a cluster rank)
report_time          timestamp   the report's ``created_at`` (UTC, microseconds); null if unreadable
envdoctor_version    string      the envdoctor that wrote the report
check                string      the check id; null on a report's only row when it has no finding
                                 and on an unreadable file's row
status               string      ok | warn | fail | skip | error; ``unreadable`` for a file `fleet`
                                 could not read (``error`` says why)
gpu                  int32       the GPU index for a finding about some GPUs (one row each), else null
config               string      the configuration `fleet` groups by (a SHA-1 of its signature)
driver … shm         string      the configuration's aspects, as in `fleet --json` ``aspects``:
                                 driver, cuda_driver, torch, torch_build, cudnn, nccl, gpus, python,
                                 kernel, distro, glibc, container, shm
env                  string      JSON object: the compared NCCL_/CUDA_/TORCH_… variables
packages             string      JSON object: package -> version
error                string      why the file is unreadable; null otherwise
==================== =========== ====================================================================

pyarrow is imported only here, only when a store is written or read (pip into envdoctor's own
environment; the ``fleet`` extra of a clone adds it: ``pip install '.[fleet]'``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar

from envdoctor.knowledge.compare import ASPECTS
from envdoctor.redact import redact_text, redact_tree
from envdoctor.report import ReportError


class Summary(Protocol):
    """What this module reads of :class:`envdoctor.commands.saved.Summary` (never imported here:
    saved imports this module), and what :func:`read_store` makes through the class it is given."""

    path: str
    node: str
    error: str | None
    key: str
    sig: dict[str, Any] | None
    failing: list[tuple[str, str]]
    rows: list[tuple[str, str, tuple[int, ...]]] | None
    created: Any
    version: Any


S = TypeVar("S", bound=Summary)

#: The store's own format (bumped when a column changes meaning); in the file's metadata.
STORE_VERSION = "1"
META_KEY = b"envdoctor.store"
ASPECT_COLUMNS: tuple[str, ...] = tuple(a.name for a in ASPECTS)
UNREADABLE = "unreadable"
DISTRIBUTION = "gpu-envdoctor"


def fleet_requirement() -> str:
    """The ``fleet`` extra's requirement as pyproject.toml declares it (read from the installed
    metadata: one home), or plain ``pyarrow`` where no metadata can be read (a source tree)."""
    from importlib import metadata

    try:
        declared = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        declared = []
    for line in declared:
        spec, _, marker = line.partition(";")
        if spec.strip().startswith("pyarrow") and "fleet" in marker:
            return spec.strip()
    return "pyarrow"


def install_line() -> str:
    """envdoctor is not on a package index (no ``envdoctor[fleet]`` to install): pyarrow goes into the
    interpreter envdoctor runs in."""
    from envdoctor.knowledge.remedies import pip_install

    return str(pip_install(sys.executable, fleet_requirement(), quote=True))

#: Reports per row group (a row group is written, and read, at once).
BATCH = 4096
#: Parquet's page compression (zstd: small and fast to read; "none" lets a test search the bytes).
COMPRESSION = "zstd"
_STATUSES = ("ok", "warn", "fail", "skip", "error")
_MAX_GPUS = 64


class StoreError(ReportError):
    """A store that cannot be written or read: one line, exit 2."""


def pyarrow_missing() -> str | None:
    """One line saying how to install pyarrow when it is not importable, else None."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return f"a Parquet fleet store needs pyarrow, which is not installed: {install_line()}"
    return None


def _pyarrow() -> Any:
    missing = pyarrow_missing()
    if missing:
        raise StoreError(missing)
    import pyarrow

    return pyarrow


def is_store(path: str) -> bool:
    """True for a regular file that starts with Parquet's magic bytes."""
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def split_items(items: Sequence[str]) -> Iterator[tuple[list[str], bool]]:
    """The command line's items in order, as runs of report files/folders and single stores."""
    run: list[str] = []
    for item in items:
        if is_store(item):
            if run:
                yield run, False
                run = []
            yield [item], True
        else:
            run.append(item)
    if run:
        yield run, False


def finding_rows(findings: Any) -> list[tuple[str, str, tuple[int, ...]]]:
    """(check id, status, GPU indices) of each well-formed finding of a saved report, as saved;
    the same findings, and the same test, `fleet`'s failure counts read."""
    out: list[tuple[str, str, tuple[int, ...]]] = []
    for f in findings if type(findings) is list else ():
        if type(f) is not dict and not isinstance(f, Mapping):  # dict first: an abc check costs more
            continue
        cid, status = f.get("id"), f.get("status")
        if not isinstance(cid, str) or status not in _STATUSES:  # a tuple: an unhashable status never raises
            continue
        gpus = f.get("gpus")
        idx: tuple[int, ...] = ()
        if gpus and type(gpus) is list:
            idx = tuple(g for g in gpus if type(g) is int and 0 <= g < 1 << 31)[:_MAX_GPUS]
        out.append((cid[:100], status, idx))
    return out


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    try:
        return when.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return None


def _text(value: Any, limit: int = 1 << 16) -> str | None:
    """Redacted, as `fleet` prints it (bounded only against hostile content: `fleet` bounds what it keeps)."""
    return redact_text(value[:limit]) if isinstance(value, str) else None


def schema() -> Any:
    pa = _pyarrow()
    fields = [pa.field("report", pa.int32(), nullable=False), pa.field("node", pa.string()),
              pa.field("path", pa.string()), pa.field("report_time", pa.timestamp("us", tz="UTC")),
              pa.field("envdoctor_version", pa.string()), pa.field("check", pa.string()),
              pa.field("status", pa.string()), pa.field("gpu", pa.int32()), pa.field("config", pa.string()),
              *(pa.field(name, pa.string()) for name in ASPECT_COLUMNS),
              pa.field("env", pa.string()), pa.field("packages", pa.string()), pa.field("error", pa.string())]
    return pa.schema(fields, metadata={META_KEY: STORE_VERSION.encode()})


class StoreWriter:
    """Streams summaries into a Parquet file, :data:`BATCH` reports per row group, so memory does
    not grow with the fleet. Written to a hidden file beside the target, renamed on :meth:`close`."""

    def __init__(self, path: str) -> None:
        self._pa = _pyarrow()
        import pyarrow.parquet as pq

        self.path = path
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            raise StoreError(f"--store {path} is a folder, not a file name")
        if not os.path.isdir(folder):
            raise StoreError(f"--store {path}: the folder {folder} does not exist")
        self._tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
        self._schema = schema()
        try:
            self._writer: Any = pq.ParquetWriter(self._tmp, self._schema, compression=COMPRESSION)
        except OSError as exc:
            raise StoreError(f"--store {path}: cannot write ({exc.strerror or exc})") from None
        self._configs: dict[str, tuple[Any, ...]] = {}  # key -> redacted aspect values, env, packages
        self._count = 0
        self._reset()

    def _reset(self) -> None:
        self._reports: list[tuple[Any, ...]] = []  # (report, node, path, time, version, config, error)
        self._row_of: list[int] = []  # row -> index into self._reports
        self._check: list[str | None] = []
        self._status: list[str | None] = []
        self._gpu: list[int | None] = []

    def add(self, s: Summary) -> None:
        """One report (or unreadable file) and its findings."""
        index = len(self._reports)
        if s.error:
            self._reports.append((self._count, _text(s.node), _text(s.path), None, None, None, _text(s.error)))
            self._row(index, None, UNREADABLE, None)
        else:
            if s.key not in self._configs:
                sig = redact_tree(s.sig or {})
                aspects = sig.get("aspects") or {}
                self._configs[s.key] = (*(aspects.get(n) for n in ASPECT_COLUMNS),
                                        json.dumps(sig.get("env") or {}, sort_keys=True, ensure_ascii=False),
                                        json.dumps(sig.get("packages") or {}, sort_keys=True, ensure_ascii=False))
            when = _time(s.created)
            self._reports.append((self._count, _text(s.node), _text(s.path), when, _text(s.version, 100), s.key, None))
            rows = s.rows if s.rows is not None else [(c, st, ()) for c, st in s.failing]
            if not rows:
                self._row(index, None, None, None)
            for cid, status, gpus in rows:
                if gpus:
                    for g in gpus:
                        self._row(index, cid, status, g)
                else:
                    self._row(index, cid, status, None)
        self._count += 1
        if len(self._reports) >= BATCH:
            self._flush()

    def _row(self, index: int, check: str | None, status: str | None, gpu: int | None) -> None:
        self._row_of.append(index)
        self._check.append(check)
        self._status.append(status)
        self._gpu.append(gpu)

    def _flush(self) -> None:
        if not self._reports:
            return
        pa = self._pa
        cols = list(zip(*self._reports, strict=True))
        per_config = [self._configs.get(k) if k is not None else None for k in cols[5]]
        width = len(ASPECT_COLUMNS) + 2
        config_cols = [[c[i] if c is not None else None for c in per_config] for i in range(width)]
        take = pa.array(self._row_of, pa.int32())
        names = ["report", "node", "path", "report_time", "envdoctor_version", "config", "error"]
        types = {"report": pa.int32(), "report_time": pa.timestamp("us", tz="UTC")}
        by_report = {n: pa.array(list(v), types.get(n, pa.string())) for n, v in zip(names, cols, strict=True)}
        for name, values in zip((*ASPECT_COLUMNS, "env", "packages"), config_cols, strict=True):
            by_report[name] = pa.array(values, pa.string())
        row_level = {"check": pa.array(self._check, pa.string()), "status": pa.array(self._status, pa.string()),
                     "gpu": pa.array(self._gpu, pa.int32())}
        arrays = [row_level[f.name] if f.name in row_level else by_report[f.name].take(take) for f in self._schema]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self._schema))
        self._reset()

    def close(self) -> None:
        """The last row group written and the file renamed into place."""
        try:
            self._flush()
            self._writer.close()
            os.replace(self._tmp, self.path)
        except OSError as exc:
            raise StoreError(f"--store {self.path}: cannot write ({exc.strerror or exc})") from None

    def abort(self) -> None:
        """Nothing left behind when the store was not completed (a no-op after :meth:`close`)."""
        try:
            self._writer.close()
        except Exception:  # noqa: BLE001 - already closed, or the write failed: the file goes anyway
            pass
        try:
            os.unlink(self._tmp)
        except OSError:
            pass


# -- reading -----------------------------------------------------------------------------------
_READ = ("report", "node", "path", "check", "status", "config", "error", *ASPECT_COLUMNS, "env", "packages")


def read_store(path: str, make: Callable[..., S]) -> Iterator[S]:
    """The summaries a store was written from, in their order: a report's node, path,
    configuration (its signature the first time it is met) and failing checks, or an unreadable
    file's error, each made as ``make(path, node, error=…)`` / ``make(path, node, key=…)`` (the
    Summary class). Raises StoreError (one line) for a file that is not an envdoctor store."""
    pa = _pyarrow()
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(f"{path} is not a readable Parquet file ({str(exc)[:200]})") from None
    meta = pf.schema_arrow.metadata or {}
    if meta.get(META_KEY) != STORE_VERSION.encode():
        found = meta.get(META_KEY)
        raise StoreError(f"{path} is a Parquet file but not an envdoctor fleet store of format {STORE_VERSION}"
                         + (f" (format {found.decode('utf-8', 'replace')[:20]})" if found else ""))
    missing = [c for c in _READ if c not in pf.schema_arrow.names]
    if missing:
        raise StoreError(f"{path} is an envdoctor fleet store without the column(s) {', '.join(missing)}")
    # Strings kept dictionary-encoded: a node's name or a configuration is decoded once, not per row.
    pf = pq.ParquetFile(path, read_dictionary=["node", "path", "check", "status", "config", *ASPECT_COLUMNS,
                                               "env", "packages"])
    seen: set[str] = set()
    pending: S | None = None
    last = None
    try:
        for batch in pf.iter_batches(batch_size=1 << 16, columns=list(_READ)):
            if not batch.num_rows:
                continue
            fresh, failing = _batch(pa, pc, batch, last, seen, make)
            for rid, cid, st in failing:
                target = fresh.get(rid) or (pending if rid == last else None)
                if target is not None and cid is not None:
                    target.failing.append((cid, st))
            if fresh and pending is not None:
                yield pending
                pending = None
            found = list(fresh.values())
            yield from found[:-1]
            if found:
                pending = found[-1]
            last = batch.column("report")[batch.num_rows - 1].as_py()
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(f"{path}: the store is damaged ({str(exc)[:200]})") from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:  # columns of the wrong types
        raise StoreError(f"{path}: the store is damaged ({type(exc).__name__}: {str(exc)[:200]})") from None
    if pending is not None:
        yield pending


def _batch(pa: Any, pc: Any, batch: Any, last: Any, seen: set[str],
           make: Callable[..., S]) -> tuple[dict[Any, S], list[tuple[Any, ...]]]:
    """One record batch: the reports that start in it (report number -> Summary, in order) and its
    failing rows (report number, check, status); vectorised, only those rows become Python."""
    report = batch.column("report")
    n = len(report)
    starts = [0] if report[0].as_py() != last else []
    if n > 1:
        changed = pc.not_equal(report.slice(1), report.slice(0, n - 1))
        starts += [i + 1 for i in pc.indices_nonzero(changed).to_pylist()]
    first = pa.array(starts, pa.int64())
    ids = report.take(first).to_pylist()
    node, where, config, error, status = (batch.column(c).take(first).to_pylist()
                                          for c in ("node", "path", "config", "error", "status"))
    fresh: dict[Any, S] = {}
    for i, rid in enumerate(ids):
        if error[i] is not None or status[i] == UNREADABLE:
            fresh[rid] = make(where[i] or "", node[i] or "", error=error[i] or UNREADABLE)
            continue
        key = config[i] or ""
        s = fresh[rid] = make(where[i] or "", node[i] or "", key=key)
        if key not in seen:
            seen.add(key)
            s.sig = _signature(batch, starts[i])
    mask = pc.is_in(batch.column("status").cast(pa.string()), value_set=pa.array(["fail", "error"]))
    failing = list(zip(*(pc.filter(batch.column(c), mask).to_pylist() for c in ("report", "check", "status")),
                       strict=True))
    return fresh, failing


def _signature(batch: Any, row: int) -> dict[str, Any]:
    aspects = {name: batch.column(name)[row].as_py() for name in ASPECT_COLUMNS}
    out: dict[str, Any] = {"aspects": aspects}
    for name in ("env", "packages"):
        try:
            value = json.loads(batch.column(name)[row].as_py() or "{}")
        except ValueError:
            value = {}
        out[name] = {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
    return out


def check_store_args(items: Sequence[str], store: str | None) -> None:
    """Refusals before any report is read: pyarrow missing where a store is written or read, a
    store given as input to another store."""
    stored = [item for item in items if is_store(item)]
    if store or stored:
        missing = pyarrow_missing()
        if missing:
            raise StoreError(missing)
    if store and stored:
        raise StoreError(f"--store writes a store from reports; {stored[0]} is already a store")
