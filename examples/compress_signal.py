"""Tokenize a real ECG from Python and check the reconstruction.

Run from the repository root:  python examples/compress_signal.py
"""

from pathlib import Path

import numpy as np

from signals import SignalModel, read_csv

here = Path(__file__).parent
ecg = read_csv(here / "data" / "mitbih208_ecg.csv").channels[0]  # (108000,) float64, mV

model = SignalModel(n_levels=1024, vocab_size=4096, n_candidates=8, doc_length=3600,
                    progress=False)
model.fit([ecg], names=["ecg_mV"])
(tokens,) = model.encode([ecg])
(back,) = model.decode([tokens])

bound = model.quantizers_[0].max_error_[0]
print(f"samples {ecg.size:,} -> tokens {tokens.size:,} "
      f"({ecg.size / tokens.size:.2f} samples per token)")
print(f"max reconstruction error {np.abs(back - ecg).max():.5f} mV (bound {bound:.5f} mV)")
assert np.abs(back - ecg).max() <= bound + 1e-12
