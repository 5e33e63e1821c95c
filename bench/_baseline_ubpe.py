"""Time the reference UBPE packages (run by bench/run.py inside their own venv).

Usage: python _baseline_ubpe.py TASK.json  ->  prints one JSON line.

The task gives ``impl`` ("cython" or "native"), ``kind`` ("fit" or
"encode"), the corpus as a list of documents (lists of ints), the alphabet
size, ``n_tokens``, ``n_candidates`` and ``repeat``. Fitting times
``UBPEClassic.fit`` (merges applied by rank, like ours); encoding fits once,
then times ``encode`` over every document.
"""

import json
import statistics
import sys
import time


def main():
    task = json.load(open(sys.argv[1]))
    if task["impl"] == "cython":
        from ubpe_cython import UBPEClassic
        cls = UBPEClassic[int]
    else:
        from ubpe_native import UBPEClassic
        cls = UBPEClassic
    docs = task["docs"]
    alphabet = {i: i for i in range(task["alphabet_size"])}

    def fit():
        tok = cls(alphabet=alphabet, n_tokens=task["n_tokens"])
        tok.fit(docs, n_candidates=task["n_candidates"], quiet=True)
        return tok

    out = {}
    if task["kind"] == "fit":
        times = []
        for _ in range(task["repeat"]):
            t = time.perf_counter()
            fit()
            times.append(time.perf_counter() - t)
        out["seconds"] = statistics.median(times)
        out["runs"] = times
    else:
        tok = fit()
        times, n_tokens = [], 0
        for _ in range(task["repeat"]):
            t = time.perf_counter()
            n_tokens = sum(len(tok.encode(d)[0][0]) for d in docs)
            times.append(time.perf_counter() - t)
        out["seconds"] = statistics.median(times)
        out["tokens"] = n_tokens
    print(json.dumps(out))


if __name__ == "__main__":
    main()
