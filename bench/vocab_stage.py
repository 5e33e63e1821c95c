"""Would a UBPE vocabulary over the residual tokens pay inside a trained model? (issue 15)

    .venv/bin/python bench/vocab_stage.py [--data ../shared/data] [--packet 256]

For each dev signal, a channel model (``fit_channel_model``: predictor,
match model, adaptive filter, context tables, each kept where it pays) is
fitted on the first 70% and the last 30% is cut into packets. The residual
tokens of the training packets (the hybrid-integer tokens the rANS coder
sees) then train a UBPE vocabulary (``ubpe.Tokenizer``, ``n_candidates=8``)
of 2, 4 and 8 times the token alphabet; the validation packets are encoded
with it (``shortest``) and costed with a static order-0 table of the merged
ids fitted on the training packets (count + 1/2), plus their raw bits and
32 bits of framing per packet, the same framing the model's figure counts.
The model's own figure is its coded size (context tables, match buckets).
A ratio below 1 means the vocabulary stage would pay.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.datasets import DEFAULT_DATA, load_all  # noqa: E402
from signals import channel as C  # noqa: E402
from signals import entropy as E  # noqa: E402
from ubpe import Tokenizer  # noqa: E402

SIGNALS = ["ECG MIT-BIH 208", "PPG heartpy", "Seattle temperature", "speech LibriVox 16k",
           "TMY3 GHI", "TMY3 DNI", "ACSF1 appliance power", "PLAID appliance current"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--packet", type=int, default=256)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    sets = load_all(args.data, SIGNALS)
    print(f"`python bench/vocab_stage.py --packet {args.packet}`: bits/sample on the held-out 30% "
          f"in packets of {args.packet}\n")
    print("| signal | model (coded) | + vocabulary 2x | 4x | 8x | best ratio | tokens/sample at the "
          "best |")
    print("|---|---|---|---|---|---|---|")
    for name, ds in sets.items():
        x = ds.channels[0]
        cut = int(0.7 * x.size)
        m = C.fit_channel_model([x[:cut]], packet_size=args.packet)
        tr = C._packets([x[:cut]], args.packet)
        va = C._packets([x[cut:]], args.packet)
        n_va = sum(p.size for p in va)
        own = C._packet_bits(m, va) / n_va
        a = E.alphabet_size(m.k, m.msb)
        t_tr = [C._model_tokens(p, m)[1].astype(np.int64) for p in tr]
        t_va = [C._model_tokens(p, m) for p in va]
        raw = sum(float(q[2].sum()) for q in t_va)
        cells, best = [], (np.inf, 0.0)
        for v in (2 * a, 4 * a, 8 * a):
            tok = Tokenizer(a, v, n_candidates=8).fit(t_tr)
            enc_tr = [tok.encode(t, method="shortest") for t in t_tr]
            enc_va = [tok.encode(q[1].astype(np.int64), method="shortest") for q in t_va]
            cnt = np.bincount(np.concatenate(enc_tr), minlength=v).astype(float) + 0.5
            logp = -np.log2(cnt / cnt.sum())
            bits = (sum(float(logp[e].sum()) + 32 for e in enc_va) + raw) / n_va
            cells.append(f"{bits:.3f}")
            if bits < best[0]:
                best = (bits, sum(e.size for e in enc_va) / n_va)
        print(f"| {name} | {own:.3f} | {' | '.join(cells)} | {best[0] / own:.3f} | "
              f"{best[1]:.3f} |", flush=True)


if __name__ == "__main__":
    main()
