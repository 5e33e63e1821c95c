"""signals: lossless (or bounded-error) compression and tokenization of sensor signals.

Arrays: :func:`compress` / :func:`decompress` / :func:`inspect`, and
:func:`compress_stream` / :func:`decompress_stream` for data larger than
memory. Whole files (CSV byte for byte, WAV, NumPy): :func:`compress_file` /
:func:`decompress_file`. The pipeline and its stages: ``ARCHITECTURE.md``.
"""

from .codec import SignalFormatError, compress, compress_stream, decompress, decompress_stream, inspect
from .files import compress_file, decompress_file
from .model import SignalModel
from .quantize import (
                    QUANTIZERS,
                    GaussianQuantizer,
                    LloydMaxQuantizer,
                    MuLawQuantizer,
                    QuantileQuantizer,
                    Quantizer,
                    UniformQuantizer,
                    quantizer_from_dict,
)
from .readers import CsvChannels, CsvError, read_csv, read_signal

__all__ = ["compress", "decompress", "inspect", "compress_stream", "decompress_stream",
           "compress_file", "decompress_file", "SignalFormatError",
           "CsvChannels", "CsvError", "read_csv", "read_signal", "SignalModel",
           "Quantizer", "UniformQuantizer", "QuantileQuantizer", "GaussianQuantizer",
           "MuLawQuantizer", "LloydMaxQuantizer", "QUANTIZERS", "quantizer_from_dict"]
