"""Every dev signal of the shared data folder, as integer channels.

    from bench.datasets import load_all
    for name, ds in load_all(Path("../shared/data")).items(): ds.channels, ds.rate

Each entry is a :class:`Dataset`: a list of 1-D int64 channels, a sample rate,
and how the integers were made. Float recordings become integers the way the
issues measured them (ADC units where known, else a 1024-level uniform
quantizer fitted on the whole set, the project's default). A file that is
missing is skipped with a message on stderr.
"""

from __future__ import annotations

import sys
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


def _default_data() -> Path:
    """The nearest ``shared/data`` above the repository (a checkout's ``../shared/data``)."""
    for up in Path(__file__).resolve().parents[1:]:
        if (up / "shared" / "data").is_dir():
            return up / "shared" / "data"
    return Path("../shared/data")


DEFAULT_DATA = _default_data()


@dataclass
class Dataset:
    name: str
    channels: list[np.ndarray]
    rate: int
    note: str = ""
    recordings: list[list[np.ndarray]] = field(default_factory=list)  # per channel, when a set

    @property
    def n(self) -> int:
        return sum(c.size for c in self.channels)


def _ts_recordings(path: Path) -> list[np.ndarray]:
    """sktime .ts: drop '#'/'@' lines and the ':label' tail; one float array per line."""
    out = []
    for line in path.read_text().splitlines():
        if not line.strip() or line[0] in "#@":
            continue
        body = line.rsplit(":", 1)[0]
        out.append(np.array(body.split(","), np.float64))
    return out


def _quantize_set(recs: list[np.ndarray], levels: int = 1024) -> list[np.ndarray]:
    lo = min(r.min() for r in recs)
    hi = max(r.max() for r in recs)
    step = (hi - lo) / (levels - 1)
    return [np.round((r - lo) / step).astype(np.int64) for r in recs]


def load_all(data: Path = DEFAULT_DATA, only: list[str] | None = None) -> dict[str, Dataset]:
    """name -> Dataset for every dev signal found under ``data/signals``."""
    sig = Path(data) / "signals"
    out: dict[str, Dataset] = {}

    def want(name):
        return only is None or any(o.lower() in name.lower() for o in only)

    def skip(what):
        print(f"[datasets] skipped {what}: not found under {sig}", file=sys.stderr)

    def add(name, fn, *files):
        if not want(name):
            return
        if not all((sig / f).exists() for f in files):
            skip(name)
            return
        ds = fn()
        ds.name = name
        out[name] = ds

    add("ECG MIT-BIH 208", lambda: Dataset("", [np.round(np.load(sig / "mitbih208_ecg.npz")["ecg"]
                                                          / 0.005).astype(np.int64)], 360,
                                           "ADC units (0.005 mV)"), "mitbih208_ecg.npz")
    add("ECG pywt small", lambda: Dataset("", [np.load(sig / "pywt_ecg_small.npz")["data"]
                                               .astype(np.int64)], 360, "integers as stored"),
        "pywt_ecg_small.npz")

    def daphnet():
        a = np.loadtxt(sig / "daphnet_S06R02E0_accel.csv", delimiter=",", skiprows=1,
                       usecols=range(1, 10)).astype(np.int64)
        return Dataset("", [c.copy() for c in a.T], 64, "9 axes, integers as stored")
    add("Daphnet accel (9 ch)", daphnet, "daphnet_S06R02E0_accel.csv")
    add("PPG heartpy", lambda: Dataset("", [np.loadtxt(sig / "heartpy_ppg.csv", delimiter=",",
                                                       skiprows=1, usecols=[1]).astype(np.int64)],
                                       67, "raw ADC"), "heartpy_ppg.csv")
    add("Seattle temperature", lambda: Dataset("", [np.round(10 * np.loadtxt(
        sig / "seattle_temps.csv", delimiter=",", skiprows=1, usecols=[1])).astype(np.int64)], 1,
        "0.1 F"), "seattle_temps.csv")

    def weather():
        w = np.loadtxt(sig / "seattle_weather.csv", delimiter=",", skiprows=1, usecols=[1, 2, 3, 4])
        return Dataset("", [c.copy() for c in np.round(w * 10).astype(np.int64).T], 1,
                       "4 columns, 0.1 units")
    add("Seattle weather (4 ch)", weather, "seattle_weather.csv")

    def speech():
        pcm = []
        for f in sorted((sig / "librivox_speech_16k").glob("*.wav")):
            with wave.open(str(f)) as wf:
                pcm.append(np.frombuffer(wf.readframes(wf.getnframes()), "<i2").astype(np.int64))
        return Dataset("", [np.concatenate(pcm)], 16000, "int16 PCM, 5 clips joined",
                       [pcm])
    add("speech LibriVox 16k", speech, "librivox_speech_16k")

    def tmy(col):
        def f():
            v = np.loadtxt(sig / "pvlib_tmy3_723170.csv", delimiter=",", skiprows=2, usecols=[col],
                           dtype=np.float64)
            return Dataset("", [v.astype(np.int64)], 1, "W/m^2, hourly")
        return f
    add("TMY3 GHI", tmy(4), "pvlib_tmy3_723170.csv")
    add("TMY3 DNI", tmy(7), "pvlib_tmy3_723170.csv")

    def ts(fname, rate, what):
        def f():
            recs = _quantize_set(_ts_recordings(sig / fname))
            return Dataset("", [np.concatenate(recs)], rate,
                           f"{what}; {len(recs)} recordings joined, 1024-level uniform quantizer",
                           [recs])
        return f
    add("ACSF1 appliance power", ts("ucr_acsf1_train.ts", 1, "z-normalised power"),
        "ucr_acsf1_train.ts")
    add("PLAID appliance current", ts("ucr_plaid_train.ts", 30000, "z-normalised current, 30 kHz"),
        "ucr_plaid_train.ts")
    return out
