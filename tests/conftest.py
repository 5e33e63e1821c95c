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


@pytest.fixture
def cascade_bytes(monkeypatch):
    """The adaptive cascade byte (``lms``) of each mode-4 payload read during the test, in
    order (a list that the test reads)."""
    from signals import channel
    seen: list[int] = []
    read_side = channel._read_block_side

    def spy(rd, n):
        out = read_side(rd, n)
        seen.append(rd.data[rd.pos + 3])  # after (mh, t, tbits): lms
        return out
    monkeypatch.setattr(channel, "_read_block_side", spy)
    return seen


@pytest.fixture(scope="session")
def ecg_codes(ecg_csv):
    """MIT-BIH record 208, first 20,000 samples, quantized to 256 levels."""
    from signals import UniformQuantizer, read_csv
    x = read_csv(ecg_csv).channels[0][:20000]
    return UniformQuantizer(256).fit(x).encode(x)


# Long tests (real-data round trips, high compression levels, fuzzing, CLI builds, worker
# processes), by module and test name prefix: the quick tier is `pytest -m "not slow"`.
SLOW = {
    "test_cm.py": ("test_mode_6_round_trips_extreme_values",),
    "test_channel.py": ("test_round_trip_any_values", "test_extremes_round_trip",
                        "test_model_round_trip", "test_match_and_ranked_modes_round_trip"),
    "test_cli.py": ("test_build_quiet_verbose_and_stdout", "test_build_on_real_daphnet",
                    "test_encode_decode_round_trip_on_real_csv", "test_encode_decode_through_pipes"),
    "test_numcodecs.py": ("test_integers_round_trip_exactly", "test_zarr_local_store_read",
                          "test_max_error_bound_floats", "test_max_error_bound_integers",
                          "test_zarr_v2_compressor", "test_channels_follow_axis",
                          "test_floats_lossless_by_default", "test_zarr_zip_store",
                          "test_registered_in_a_fresh_process", "test_trained_model_by_id"),
    "test_fuzz.py": ("test_fuzz",),
    "test_table.py": ("test_generated_csv_round_trip", "test_mutated_parts_decode_or_raise"),
    "test_model.py": ("test_a_packet_from_another_model", "test_decimal_float_channels",
                      "test_packet_overhead_is_small",
                      "test_packet_stream_end_marker", "test_the_model_pays",
                      "test_files_name_the_model", "test_packets_round_trip_any_values"),
    "test_plot.py": ("test_cli_plot_writes_all_four", "test_tokens_spans_match_tokens",
                     "test_bits_values_are_compress_sizes", "test_tokens_with_a_trained_model",
                     "test_cli_plot_reads_ubpe_files"),
    "test_codec.py": ("test_real_signals_beat_general_compressors", "test_stream_round_trip",
                      "test_floats_decode_within_the_quantizer_bound",
                      "test_integers_round_trip_exactly", "test_cli_compress_decompress_inspect"),
    "test_predict.py": ("test_block_lpc_and_match_residuals_are_consistent",),
    "test_parallel.py": ("test_dask_array_to_zarr_with_the_codec", "test_compress_files_one_task",
                         "test_read_files_for_build"),
    "test_signals.py": ("test_signal_model_round_trip_and_save",
                        "test_every_quantizer_respects_its_bound_and_serializes"),
    "test_text_fast.py": ("test_readme_text_example_runs_as_a_script",),
    "test_text_hf.py": ("test_oniguruma_pieces_match_regex_on_arbitrary_text",),
}


# whole modules: the optional integrations (matplotlib, dask, zarr imports cost seconds)
SLOW_MODULES = {"test_plot.py", "test_parallel.py", "test_numcodecs.py", "test_formats.py"}

# fixtures that train a model on real data: every test using one is slow
SLOW_FIXTURES = {"daphnet_model", "ecg_model", "trained_model"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = Path(str(item.fspath)).name
        if module in SLOW_MODULES or item.name.startswith(SLOW.get(module, ())) or \
                SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
