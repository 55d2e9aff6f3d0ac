"""The baseline store: one file per (device, torch, triton), merged updates, loud failures."""

import json
import os

import pytest

from harness import baseline as baseline_module
from harness.baseline import SCHEMA, UNNAMED_TIMING, VERSION, BaselineError, BaselineStore, timing_of

H100 = ("NVIDIA H100 80GB HBM3", "2.11.0+cu130", "3.6.0")
A100 = ("NVIDIA A100-SXM4-80GB", "2.11.0+cu130", "3.6.0")
KEY = "softmax/forward/cols=1024,rows=8192/float16/triton"
OTHER = "layernorm/backward/cols=4096,rows=1024/bfloat16/triton"


@pytest.fixture
def store(tmp_path):
    return BaselineStore(tmp_path / "baselines")


def test_path_is_a_safe_slug_of_the_three_names(store):
    path = store.path_for(*H100)
    assert path.parent == store.directory
    assert path.name == "nvidia-h100-80gb-hbm3__torch-2.11.0+cu130__triton-3.6.0.json"
    odd = store.path_for("GPU / weird_name: 1", "2.5.0a0+git1234", "3.6.0").name
    assert "/" not in odd and " " not in odd and odd.count("__") == 2


@pytest.mark.parametrize("argument", ["device", "torch_version", "triton_version"])
@pytest.mark.parametrize("bad", ["", "   ", None, "///"])
def test_path_rejects_empty_names(store, argument, bad):
    names = dict(zip(("device", "torch_version", "triton_version"), H100))
    names[argument] = bad
    with pytest.raises(ValueError, match=argument):
        store.path_for(**names)


def test_missing_file_is_an_empty_baseline(store):
    assert store.load(*H100) == {}
    assert not store.directory.exists()  # loading creates nothing


def test_round_trip(store):
    path = store.update(*H100, {KEY: [1.0, 3.0, 2.0]}, commit="abc123")
    assert path == store.path_for(*H100)
    records = store.load(*H100)
    assert set(records) == {KEY}
    record = records[KEY]
    assert record["samples_ms"] == [1.0, 3.0, 2.0]
    assert record["median_ms"] == 2.0
    assert record["commit"] == "abc123"
    assert record["recorded_at"].endswith("+00:00")
    data = json.loads(path.read_text())
    assert (data["schema"], data["version"]) == (SCHEMA, VERSION)
    assert (data["device"], data["torch"], data["triton"]) == H100


def test_update_merges_and_replaces_only_the_given_keys(store):
    store.update(*H100, {KEY: [1.0, 1.1], OTHER: [5.0]}, commit="old")
    store.update(*H100, {KEY: {"samples_ms": [2.0, 2.2]}}, commit="new")
    records = store.load(*H100)
    assert records[KEY]["samples_ms"] == [2.0, 2.2] and records[KEY]["commit"] == "new"
    assert records[OTHER]["samples_ms"] == [5.0] and records[OTHER]["commit"] == "old"


def test_each_record_is_one_line_so_diffs_stay_small(store):
    path = store.update(*H100, {KEY: [1.0] * 50, OTHER: [2.0] * 50})
    lines = path.read_text().splitlines()
    assert sum(KEY in line for line in lines) == 1 and len(lines) < 15


def test_other_device_files_are_never_touched(store):
    other = store.update(*A100, {KEY: [3.0]})
    other.write_bytes(b"{corrupt")  # even a corrupt file of another device is left alone
    store.update(*H100, {KEY: [1.0]})
    store.update(*H100, {OTHER: [1.0]})
    assert other.read_bytes() == b"{corrupt"
    assert sorted(p.name for p in store.directory.iterdir()) == sorted(
        [other.name, store.path_for(*H100).name]
    )


def test_corrupt_json_names_the_file_and_the_fix(store):
    path = store.path_for(*H100)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": "harness-baseline", ')
    with pytest.raises(BaselineError) as info:
        store.load(*H100)
    message = str(info.value)
    assert str(path) in message and "not valid JSON" in message
    assert "git checkout" in message and "--update-baseline" in message


def _write(store, data, identity=H100):
    path = store.path_for(*identity)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _valid():
    return {
        "schema": SCHEMA, "version": VERSION,
        "device": H100[0], "torch": H100[1], "triton": H100[2],
        "records": {KEY: {"samples_ms": [1.0], "median_ms": 1.0,
                          "recorded_at": "2025-01-01T00:00:00+00:00", "commit": None}},
    }


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda d: d.update(version=2), "version 2"),
        (lambda d: d.update(schema="something-else"), "schema"),
        (lambda d: d.update(device="NVIDIA A100"), "device"),
        (lambda d: d.update(records=[]), "records"),
        (lambda d: d["records"][KEY].pop("median_ms"), "missing median_ms"),
        (lambda d: d["records"][KEY].update(samples_ms=[]), "samples_ms"),
        (lambda d: d["records"][KEY].update(samples_ms=[1.0, -2.0]), "samples_ms[1]"),
        (lambda d: d["records"][KEY].update(median_ms="fast"), "median_ms"),
        (lambda d: d["records"][KEY].update(recorded_at="yesterday"), "recorded_at"),
        (lambda d: d["records"][KEY].update(commit=42), "commit"),
        (lambda d: d["records"][KEY].update(timing=""), "timing"),
        (lambda d: d["records"][KEY].update(timing=7), "timing"),
    ],
)
def test_wrong_schema_version_or_malformed_records_raise(store, change, words):
    data = _valid()
    assert _write(store, data) and store.load(*H100)  # the unchanged document is valid
    change(data)
    path = _write(store, data)
    with pytest.raises(BaselineError) as info:
        store.load(*H100)
    assert str(path) in str(info.value) and words in str(info.value)


def test_update_refuses_to_overwrite_a_corrupt_file(store):
    path = store.path_for(*H100)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"records": {\x00 garbage')
    with pytest.raises(BaselineError, match="force"):
        store.update(*H100, {KEY: [1.0]})
    assert path.read_bytes() == b'{"records": {\x00 garbage'
    assert os.listdir(path.parent) == [path.name]


def test_forced_update_preserves_the_corrupt_file_then_writes_a_fresh_one(store, monkeypatch):
    path = store.path_for(*H100)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not json")
    store.update(*H100, {KEY: [1.0]}, force=True)
    store.update(*H100, {OTHER: [2.0]})  # the fresh file is valid and merges as usual
    assert set(store.load(*H100)) == {KEY, OTHER}
    preserved = [p for p in path.parent.iterdir() if p != path]
    assert len(preserved) == 1 and preserved[0].name.startswith(path.name + ".corrupt-")
    assert preserved[0].read_bytes() == b"not json"

    # a second corruption within the same second keeps the first preserved copy too
    monkeypatch.setattr(baseline_module, "_utc_now", lambda: _fixed_time())
    for _ in range(2):
        path.write_bytes(b"[]")
        store.update(*H100, {KEY: [1.0]}, force=True)
    names = sorted(p.name for p in path.parent.iterdir())
    assert len(names) == 4 and f"{path.name}.corrupt-20250102T030405Z" in names


def _fixed_time():
    from datetime import datetime, timezone

    return datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_writes_are_atomic_and_leave_no_temporaries(store, monkeypatch):
    path = store.update(*H100, {KEY: [1.0]})
    original = path.read_bytes()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        store.update(*H100, {KEY: [9.0]})
    assert path.read_bytes() == original
    assert os.listdir(path.parent) == [path.name]


@pytest.mark.parametrize(
    "records, words",
    [
        ({KEY: []}, "records['softmax"),
        ({KEY: [1.0, float("nan")]}, "[1] = nan"),
        ({KEY: [1.0, float("inf")]}, "[1] = inf"),
        ({KEY: [0.0]}, "[0] = 0.0"),
        ({KEY: [-1.0]}, "[0] = -1.0"),
        ({KEY: ["1.0"]}, "[0] = '1.0'"),
        ({KEY: "1.0"}, "records['softmax"),
        ({KEY: {"median_ms": 1.0}}, "samples_ms"),
        ({KEY: {"samples_ms": [1.0], "timing": ""}}, "['timing']"),
        ({"": [1.0]}, "key"),
        ({3: [1.0]}, "key"),
        ({}, "records"),
    ],
)
def test_invalid_records_are_rejected_before_anything_is_written(store, records, words):
    with pytest.raises(ValueError) as info:
        store.update(*H100, records)
    assert words in str(info.value)
    assert not store.directory.exists()


def test_invalid_commit_is_rejected(store):
    with pytest.raises(ValueError, match="commit"):
        store.update(*H100, {KEY: [1.0]}, commit=123)


def test_records_name_their_timing_method(store):
    """Timings of two methods do not compare (harness.bench.timing), so each record keeps its own:
    from the record's mapping, else the update's ``timing``, else none (read as UNNAMED_TIMING)."""
    store.update(*H100, {KEY: {"samples_ms": [1.0], "timing": "method-a"}, OTHER: [2.0]}, timing="method-b")
    records = store.load(*H100)
    assert (records[KEY]["timing"], records[OTHER]["timing"]) == ("method-a", "method-b")
    store.update(*H100, {KEY: [1.5]})  # re-recorded without a method: the old one is not carried over
    records = store.load(*H100)
    assert "timing" not in records[KEY] and timing_of(records[KEY]) == UNNAMED_TIMING
    assert timing_of(records[OTHER]) == "method-b"


@pytest.mark.parametrize("bad", ["", "  ", 3])
def test_invalid_timing_is_rejected(store, bad):
    with pytest.raises(ValueError, match="timing"):
        store.update(*H100, {KEY: [1.0]}, timing=bad)
    assert not store.directory.exists()


def test_a_stored_null_timing_reads_as_unnamed(store):
    data = _valid()
    data["records"][KEY]["timing"] = None
    _write(store, data)
    assert timing_of(store.load(*H100)[KEY]) == UNNAMED_TIMING
