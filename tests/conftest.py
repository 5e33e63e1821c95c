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


# Long tests (real-data round trips, high compression levels, fuzzing, CLI builds, worker
# processes), by module and test name prefix: the quick tier is `pytest -m "not slow"`.
SLOW = {
    "test_channel.py": ("test_round_trip_any_values_high_levels", "test_extremes_round_trip",
                        "test_model_round_trip", "test_match_and_ranked_modes_round_trip"),
    "test_cli.py": ("test_build_quiet_verbose_and_stdout", "test_build_on_real_daphnet",
                    "test_encode_decode_round_trip_on_real_csv"),
    "test_numcodecs.py": ("test_integers_round_trip_exactly", "test_zarr_local_store_read",
                          "test_floats_lossless_by_default", "test_zarr_zip_store",
                          "test_registered_in_a_fresh_process", "test_trained_model_by_id"),
    "test_fuzz.py": ("test_fuzz",),
    "test_model.py": ("test_a_packet_from_another_model", "test_decimal_float_channels",
                      "test_packet_stream_end_marker", "test_the_model_pays",
                      "test_files_name_the_model", "test_packets_round_trip_any_values"),
    "test_plot.py": ("test_cli_plot_writes_all_four",),
    "test_codec.py": ("test_real_signals_beat_general_compressors",
                      "test_floats_decode_within_the_quantizer_bound"),
    "test_text_fast.py": ("test_readme_text_example_runs_as_a_script",),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        prefixes = SLOW.get(Path(str(item.fspath)).name, ())
        if item.name.startswith(prefixes):
            item.add_marker(pytest.mark.slow)
