"""signals: quantize sensor signals into integer alphabets, read numeric CSV files."""

from .csvio import CsvChannels, CsvError, read_csv
from .model import SignalModel, split_documents
from .quantize import UniformQuantizer

__all__ = ["CsvChannels", "CsvError", "read_csv", "SignalModel", "split_documents",
           "UniformQuantizer"]
