"""signals: quantize sensor signals into integer alphabets, read numeric CSV files."""

from .codec import SignalFormatError, compress, compress_stream, decompress, decompress_stream
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

__all__ = ["compress", "decompress", "compress_stream", "decompress_stream",
           "SignalFormatError", "CsvChannels", "CsvError", "read_csv", "read_signal", "SignalModel",
           "Quantizer", "UniformQuantizer", "QuantileQuantizer", "GaussianQuantizer",
           "MuLawQuantizer", "LloydMaxQuantizer", "QUANTIZERS", "quantizer_from_dict"]
