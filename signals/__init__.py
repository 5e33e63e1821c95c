"""signals: quantize sensor signals into integer alphabets, read numeric CSV files."""

from .csvio import CsvChannels, CsvError, read_csv
from .model import SignalModel, split_documents
from .quantize import (QUANTIZERS, GaussianQuantizer, LloydMaxQuantizer, MuLawQuantizer,
                       QuantileQuantizer, Quantizer, UniformQuantizer, quantizer_from_dict)

__all__ = ["CsvChannels", "CsvError", "read_csv", "SignalModel", "split_documents",
           "Quantizer", "UniformQuantizer", "QuantileQuantizer", "GaussianQuantizer",
           "MuLawQuantizer", "LloydMaxQuantizer", "QUANTIZERS", "quantizer_from_dict"]
