"""Where a loader's records come from, one record at a time: a file, a glob or a directory of shards
(JSON Lines, gzipped JSON Lines or parquet, e.g. a Hugging Face release's `data/test-*.parquet`).

Memory stays flat in the number of records: JSON Lines are read a line at a time, parquet a batch of
rows at a time through pyarrow (a row group is the most it holds), and only the columns the loader
reads. A bad source (a glob matching nothing, a shard without a column the loader needs) is a UserError
naming the file; a bad record is a ProblemError the loader yields, so `--skip-invalid` can count it.
"""
from __future__ import annotations

import glob
import gzip
import json
import zlib
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ewa.errors import UserError
from ewa.problems import Problem, ProblemError

SHARD_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
# Rows converted to Python objects at once: a competitive-programming row may carry megabytes of tests.
PARQUET_BATCH_ROWS = 16


def shard_paths(input: str, fmt: str) -> list[Path]:
    """The files `input` names, in order: the file itself, the glob's matches, or a directory's shards."""
    why = unreadable_input(input)
    if why:
        raise UserError(f"{fmt}: --input {input}: {why}")
    path = Path(input)
    if path.is_dir():
        return _directory_shards(path)
    return _glob_files(input) if glob.has_magic(input) else [path]


def unreadable_input(input: str) -> str | None:
    """Why `input` names nothing to read, or None (the workflow checks a config's inputs when it plans)."""
    path = Path(input)
    if path.is_dir():
        return None if _directory_shards(path) else f"directory holds no shard ({', '.join(SHARD_SUFFIXES)})"
    if glob.has_magic(input):
        return None if _glob_files(input) else "the pattern matches no file"
    return None if path.is_file() else "no such file"


def _directory_shards(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(SHARD_SUFFIXES))


def _glob_files(pattern: str) -> list[Path]:
    return sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_file())


def read_records(input: str, fmt: str, columns: Iterable[str] = (), required: Iterable[str] = ()
                 ) -> Iterator[tuple[str, dict | ProblemError]]:
    """(where, record) for every record of every shard; `where` ("file:line: ") starts error messages.
    A line that is not a JSON object comes as a ProblemError. `columns`: the parquet columns to read
    (all when empty); `required`: those a parquet shard must have."""
    for path in shard_paths(input, fmt):
        if path.name.endswith(".parquet"):
            yield from _parquet_records(path, fmt, list(columns), list(required))
        else:
            yield from _jsonl_records(path)


def _jsonl_records(path: Path) -> Iterator[tuple[str, dict | ProblemError]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    # Bytes, decoded a line at a time, so bytes that are not UTF-8 are blamed on their line.
    with opener(path, "rb") as f:
        for lineno, raw in enumerate(_lines(f, path), 1):
            where = f"{path}:{lineno}: "
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield where, ProblemError(f"{where}not valid UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1})")
                continue
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                yield where, ProblemError(f"{where}not valid JSON ({e.msg})")
                continue
            yield where, rec if isinstance(rec, dict) else ProblemError(
                f"{where}expected a JSON object, got {type(rec).__name__}")


def _lines(f, path: Path) -> Iterator[bytes]:
    """A binary file's lines; one that cannot be read (a gzip file truncated, corrupt or not gzip at all) is
    a UserError naming it."""
    try:
        yield from f
    except (OSError, EOFError, zlib.error) as e:
        raise UserError(f"{path}: cannot be read ({e})") from None


def _parquet_records(path: Path, fmt: str, columns: list[str], required: list[str]
                     ) -> Iterator[tuple[str, dict]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # pre_buffer's read cache and the decoding threads grow the peak memory with the shard's size
        shard = pq.ParquetFile(path, pre_buffer=False)
    except (pa.ArrowException, OSError) as e:
        raise UserError(f"{path}: not a readable parquet file ({e})") from None
    names = set(shard.schema_arrow.names)
    missing = [c for c in required if c not in names]
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(missing)} (a {fmt} shard needs "
                        f"{', '.join(required)})")
    wanted = [c for c in columns if c in names] or None  # columns the loader never reads stay on disk
    row = 0
    with shard:
        for batch in shard.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=wanted, use_threads=False):
            for rec in batch.to_pylist():
                row += 1
                yield f"{path}:{row}: ", rec


def converted(records: Iterable[tuple[str, dict | ProblemError]], convert: Callable[[dict, str], object]
              ) -> Iterator:
    """convert(record, where) for each record; a record's ProblemError is yielded, not raised. A problem
    whose id an earlier record already gave is a ProblemError naming both records (only the ids and
    where they were read are kept)."""
    first = {}
    for where, rec in records:
        if isinstance(rec, ProblemError):
            yield rec
            continue
        try:
            item = convert(rec, where)
        except ProblemError as e:
            yield e
            continue
        if isinstance(item, Problem):
            if item.id in first:
                yield ProblemError(f"{where}problem {item.id!r}: field 'id' is duplicated (first read at "
                                   f"{first[item.id].rstrip(': ')})")
                continue
            first[item.id] = where
        yield item
