"""Dask: many files on a LocalCluster (2 workers, threads in this process), and dask arrays to zarr."""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")

import signals  # noqa: E402
from signals.parallel import cluster, compress_files, read_files  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


@pytest.fixture(scope="module")
def client():
    with cluster(workers=2, processes=False) as c:
        yield c


@pytest.fixture
def files(tmp_path, ecg_csv):
    mv = signals.read_csv(ecg_csv).channels[0]
    counts = np.round(mv / 0.005).astype(np.int64)
    paths = []
    for i in range(4):
        p = tmp_path / f"rec{i}.npz"
        seg = counts[i * 5000:(i + 1) * 5000]
        np.savez(p, lead=seg, diff=np.diff(seg, prepend=0))
        paths.append(p)
    return paths


def test_compress_files_one_task_per_file(client, files, tmp_path):
    out = tmp_path / "out"
    results = compress_files(files, out_dir=out, scheduler=client)
    assert [r["source"] for r in results] == [str(f) for f in files]
    for f, r in zip(files, results):
        data = (out / (f.name + ".ubpe")).read_bytes()
        assert len(data) == r["bytes"] and r["samples"] == 10000
        arrays = np.load(f)
        assert np.array_equal(signals.decompress(data), np.stack([arrays["lead"], arrays["diff"]]))
    assert sorted(p.name for p in out.iterdir()) == sorted(f.name + ".ubpe" for f in files)
    workers = set(client.scheduler_info()["workers"])
    assert len(workers) == 2 and all(r["worker"] in workers for r in results)  # ran as tasks


def test_a_failed_file_leaves_no_partial_output(client, files, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK\x03\x04 not a zip file")
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="not a readable npz"):
        compress_files([files[0], bad], out_dir=out, scheduler=client)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["rec0.npz.ubpe"]  # the good one written whole, no temporary file left


def test_an_output_never_overwrites_an_input_nor_an_existing_file(files, tmp_path):
    """outputs=[the other input, ...] replaced that recording with the first's container, and
    an existing output was overwritten without a word."""
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    a.write_bytes(files[0].read_bytes())
    b.write_bytes(files[1].read_bytes())
    before = b.read_bytes()
    (tmp_path / "hard.npz").hardlink_to(b)
    for outs in ([b, tmp_path / "b.ubpe"], [tmp_path / "x.ubpe", tmp_path / "." / "a.npz"],
                 [tmp_path / "hard.npz", tmp_path / "y.ubpe"]):
        for force in (False, True):
            with pytest.raises(ValueError, match="is the input"):
                compress_files([a, b], outputs=outs, force=force, processes=False, workers=1)
    assert b.read_bytes() == before and not (tmp_path / "b.ubpe").exists()
    (tmp_path / "b.npz.ubpe").write_bytes(b"keep")
    with pytest.raises(FileExistsError, match="b.npz.ubpe exists"):
        compress_files([a, b], processes=False, workers=1)
    assert (tmp_path / "b.npz.ubpe").read_bytes() == b"keep"
    assert not (tmp_path / "a.npz.ubpe").exists()  # (refused before any task)
    done = compress_files([a, b], force=True, processes=False, workers=1)
    assert [len(r["output"]) > 0 for r in done] == [True, True]
    assert (tmp_path / "b.npz.ubpe").read_bytes()[:8] == b"UBPE-SIG"


def test_a_link_to_nowhere_is_an_existing_output_and_a_small_csv_says_stored_whole(tmp_path):
    """A dangling symlink at the output was replaced without force; a CSV stored whole was
    reported as 0 samples and 9728 bits per value."""
    src = tmp_path / "w.csv"
    src.write_bytes((Path(__file__).parent / "data" / "seattle_weather_150.csv").read_bytes())
    (tmp_path / "out.ubpe").symlink_to(tmp_path / "elsewhere" / "t.ubpe")
    with pytest.raises(FileExistsError):
        compress_files([src], outputs=[tmp_path / "out.ubpe"], processes=False, workers=1)
    assert (tmp_path / "out.ubpe").is_symlink()
    [r] = compress_files([src], processes=False, workers=1)
    assert r["stored_whole"] in ("zstd", "lzma2") and r["samples"] is None
    assert r["bits_per_sample"] is None and r["bytes"] == (tmp_path / "w.csv.ubpe").stat().st_size


def test_outputs_must_be_distinct(files, tmp_path):
    with pytest.raises(ValueError, match="same output"):
        compress_files(files[:2], outputs=[tmp_path / "x", tmp_path / "x"])
    with pytest.raises(ValueError, match="2 outputs for 3"):
        compress_files(files[:3], outputs=[tmp_path / "x", tmp_path / "y"])
    assert compress_files([]) == []
    # (one file named two ways: both were written there, the second over the first)
    with pytest.raises(ValueError, match="same output"):
        compress_files(files[:2], outputs=[tmp_path / "x", tmp_path / "sub" / ".." / "x"])


def test_read_files_for_build(client, files):
    names, chans = read_files(files, scheduler=client, max_samples=1000, seed=3)
    assert names[:2] == ["rec0:lead", "rec0:diff"] and len(chans) == 8
    assert all(c.size == 1000 for c in chans)
    names2, chans2 = read_files(files, scheduler=client, max_samples=1000, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(chans, chans2))  # reproducible
    full = np.load(files[0])["lead"]
    w = chans[0]
    starts = [i for i in range(full.size - 999) if np.array_equal(full[i:i + 1000], w)]
    assert starts  # a window of the file
    model = signals.SignalModel(n_levels=512, vocab_size=600, progress=False).fit(chans, names)
    assert model.tokenizer_.n_tokens_ > 512


def test_dask_array_to_zarr_with_the_codec(client, tmp_path, ecg_csv):
    zarr = pytest.importorskip("zarr")
    da = pytest.importorskip("dask.array")
    from signals.numcodecs_codec import UBPEZarrCodec
    mv = signals.read_csv(ecg_csv).channels[0][:40000]
    x = np.stack([np.round(mv / 0.005), np.round(mv / 0.01)], axis=1).astype(np.int16)
    z = zarr.create_array(zarr.storage.LocalStore(tmp_path / "x.zarr"), shape=x.shape,
                          chunks=(4096, 2), dtype=x.dtype, serializer=UBPEZarrCodec(),
                          compressors=None)
    import dask
    # dask writes in chunks of "array.chunk-size" bytes (128 MiB by default): a whole small
    # array in one task. One zarr chunk per task here, 4096 x 2 x 2 bytes:
    with dask.config.set({"array.chunk-size": 4096 * 2 * 2}):
        darr = da.from_array(x, chunks=(4096, 2))
        assert darr.numblocks == (10, 1)
        darr.to_zarr(z)  # 10 tasks, on the cluster's 2 workers
    assert np.array_equal(zarr.open_array(tmp_path / "x.zarr", mode="r")[:], x)


@pytest.mark.slow
def test_cli_compress_with_workers_gives_back_the_files(tmp_path):
    from click.testing import CliRunner

    from ubpe.cli import main
    src = Path(__file__).resolve().parent / "data"
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    files[0].write_bytes((src / "seattle_weather_150.csv").read_bytes())
    files[1].write_bytes((src / "daphnet_accel_150.csv").read_bytes())
    r = CliRunner().invoke(main, ["compress", *map(str, files), "--workers", "2"])
    assert r.exit_code == 0, r.output
    for f in files:
        r = CliRunner().invoke(main, ["decompress", f"{f}.ubpe", "-o", str(f) + ".back"])
        assert r.exit_code == 0 and Path(str(f) + ".back").read_bytes() == f.read_bytes()


@pytest.mark.parametrize("name, limit, samples", [
    ("daphnet_accel_150.csv", "FRAME_BYTES", None),
    ("speech_0880.wav", "WAV_FRAME_BYTES", 47840),  # (coded as one container before)
])
def test_a_file_above_its_frame_size_is_a_stream_in_bounded_memory(client, tmp_path, monkeypatch,
                                                                    name, limit, samples):
    import io

    import signals.files as F
    data = (Path(__file__).parent / "data" / name).read_bytes()
    monkeypatch.setattr(F, limit, len(data) // 3)  # threads in this process see it
    src = tmp_path / f"big{Path(name).suffix}"
    src.write_bytes(data)
    [r] = compress_files([src], out_dir=tmp_path / "out", scheduler=client, level=1)
    packed = (tmp_path / "out" / f"{src.name}.ubpe").read_bytes()
    assert F.is_stream(packed) and r["bytes"] == len(packed) and r["samples"] > 0
    assert samples is None or r["samples"] == samples
    back = io.BytesIO()
    F.decompress_file_stream(io.BytesIO(packed), back)
    assert back.getvalue() == data


def test_failed_files_are_reported_and_the_others_compressed(client, files, tmp_path):
    # (a bad input was a failed Dask task: the worker logged its traceback, and the command
    # line named only the first failure)
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b\n1,2\n3\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    plain = tmp_path / "no_suffix"  # read by its first bytes, as the command line reads it
    plain.write_bytes(b"x,y\n1,2\n3,4\n")
    out = tmp_path / "out"
    done = compress_files([ragged, files[0], folder, plain], out_dir=out, scheduler=client,
                          errors="report")
    assert [type(r.get("error")) for r in done] == [signals.CsvError, type(None),
                                                    IsADirectoryError, type(None)]
    assert "line 3: 1 fields, expected 2" in str(done[0]["error"])
    assert (out / "no_suffix.ubpe").read_bytes() and done[1]["samples"] == 10000
    with pytest.raises(ValueError, match="errors must be"):
        compress_files(files[:1], errors="ignore")


def test_cli_workers_report_every_failure_in_one_line(tmp_path, files):
    import subprocess
    import sys
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b\n1,2\n3\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    r = subprocess.run([sys.executable, "-m", "ubpe", "compress", "--workers", "1", str(ragged),
                        str(files[0]), str(folder)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert [ln for ln in lines if ln.startswith("ubpe: ") and not ln.startswith("ubpe: warning")] == [
        f"ubpe: {ragged}, line 3: 1 fields, expected 2", f"ubpe: {folder}: Is a directory"]
    assert "Traceback" not in r.stderr and "distributed.worker" not in r.stderr
    assert (tmp_path / "rec0.npz.ubpe").exists()


def test_a_signal_removes_the_workers_temporary_files(tmp_path):
    """Ctrl-C during --workers left the workers' .NAME.XXXX.tmp behind: the parent knew only
    its own temporary files. The outputs in progress are registered; their temporaries go."""
    from ubpe.serialization import PENDING_OUTPUTS, remove_temporary_files
    out = tmp_path / "a [1].csv.ubpe"  # (glob characters in the name)
    tmp = tmp_path / ".a [1].csv.ubpe.x1y2.tmp"
    other = tmp_path / ".b.csv.ubpe.x1y2.tmp"
    tmp.write_bytes(b"partial")
    other.write_bytes(b"someone else's")
    PENDING_OUTPUTS.add(str(out))
    try:
        remove_temporary_files()
    finally:
        PENDING_OUTPUTS.discard(str(out))
    assert not tmp.exists() and other.exists()


def test_tasks_in_threads_leave_warnings_to_the_process(client, tmp_path):
    """In threads of one process (this client), a task does not swap the process's warning hook
    (``catch_warnings`` is not safe there: a review found a per-thread hook could recurse or
    go stale): its warnings are shown as any warning is, and its result's list is empty. In a
    worker process of its own, the CLI test below."""
    import warnings
    paths = []
    for i in range(4):
        p = tmp_path / f"d{i}.npz"
        (np.savez_compressed if i % 2 else np.savez)(p, a=np.arange(50) + i)  # (deflated: kept)
        paths.append(p)
    before = warnings.showwarning
    with warnings.catch_warnings():  # (this module's filter ignores them)
        warnings.simplefilter("default", UserWarning)
        with pytest.warns(UserWarning, match="kept as they are, not coded") as shown:
            results = compress_files(paths, out_dir=tmp_path / "out", scheduler=client)
    assert sorted(str(w.message).split(":")[0] for w in shown) == [str(p) for p in paths[1::2]]
    assert all(r["warnings"] == [] for r in results) and warnings.showwarning is before
    assert [r["bits_per_sample"] is None for r in results] == [False, True, False, True]


def test_cli_workers_show_warnings_as_the_cli_does(tmp_path):
    """`ubpe compress --workers 2`: each worker process's warnings come back with its result and
    are shown as the CLI's own, once each, hidden by -q (a process of its own: its workers'
    stderr is the terminal's, where Python's form, file and line, was printed; a re-review
    found the worker's thread count read from an attribute that distributed does not have)."""
    import subprocess
    import sys
    for name in ("a", "b"):
        np.savez_compressed(tmp_path / f"{name}.npz", a=np.arange(9))
    cmd = [sys.executable, "-m", "ubpe", "compress", str(tmp_path / "a.npz"),
           str(tmp_path / "b.npz"), "--workers", "2", "-f"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for name in ("a", "b"):
        assert r.stderr.count(f"ubpe: warning: {tmp_path / name}.npz: kept as they are") == 1
    assert "UserWarning" not in r.stderr and "no values coded" in r.stderr
    r = subprocess.run(cmd + ["-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "warning" not in r.stderr.lower(), r.stderr
