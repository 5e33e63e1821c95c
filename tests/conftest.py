from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "data"


@pytest.fixture(scope="session")
def daphnet_csv():
    return DATA / "daphnet_accel.csv"


@pytest.fixture(scope="session")
def ecg_csv():
    return DATA / "mitbih208_ecg.csv"


@pytest.fixture(scope="session")
def ecg_codes(ecg_csv):
    """MIT-BIH record 208, first 20,000 samples, quantized to 256 levels."""
    from signals import UniformQuantizer, read_csv
    x = read_csv(ecg_csv).channels[0][:20000]
    return UniformQuantizer(256).fit(x).encode(x)
