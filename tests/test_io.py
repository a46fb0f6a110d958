"""Atomic writes and exclusive outputs: one writer per output, across processes; nothing left behind."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ewa.io import OutputBusy, atomic_path, exclusive_output, write_json


def hold(path, how: str) -> subprocess.Popen:
    """Another process inside `how` (atomic_path or exclusive_output) on `path` until told to finish."""
    code = (f"import sys\nfrom ewa.io import {how}\nwith {how}({str(path)!r}) as p:\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n"
            + ("    p.write_text('from the first writer')\n" if how == "atomic_path" else ""))
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.parametrize("how", ["atomic_path", "exclusive_output"])
def test_a_second_writer_of_a_file_refuses_while_the_first_writes(tmp_path, how):
    out = tmp_path / "table.json"
    first = hold(out, how)
    try:
        with pytest.raises(OutputBusy, match=rf"{out}: another run is writing it \(ewa on host .* pid {first.pid} "):
            write_json(out, {"from": "the second writer"})
    finally:
        first.communicate("")
    assert first.returncode == 0
    if how == "atomic_path":
        assert out.read_text() == "from the first writer"
    assert sorted(p.name for p in tmp_path.iterdir()) == (["table.json"] if how == "atomic_path" else [])


def test_a_writer_holding_its_output_writes_it_atomically_and_clears_a_killed_runs_temporaries(tmp_path):
    out = tmp_path / "out.json"
    (tmp_path / ".out.json.k1ll3d00.tmp").mkdir()  # what a killed run's atomic write leaves
    (tmp_path / ".out.json.provenance.k1ll3d00.tmp").mkdir()  # another output's: not ours to remove
    with exclusive_output(out):
        write_json(out, {"a": 1})  # re-entrant: the process already holds the lock
    assert json.loads(out.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.json.provenance.k1ll3d00.tmp", "out.json"]


def test_a_failed_write_publishes_nothing(tmp_path):
    out = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_path(out) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert list(tmp_path.iterdir()) == []
