"""Time the reference UBPE packages (run by bench/run.py inside their own venv).

Usage: python _baseline_ubpe.py TASK.json  ->  prints one JSON line.

The task gives ``impl`` ("cython" or "native"), ``kind`` ("fit",
"encode" or "weighted"), the corpus as a list of documents (lists of ints), the alphabet
size, ``n_tokens``, ``n_candidates`` and ``repeat``. Fitting times
``UBPEClassic.fit`` (merges applied by rank, like ours); encoding fits once,
then times ``encode`` over every document. "weighted" fits the non-classic
``UBPE`` (whose encoder searches segmentations for the best tf-idf score),
times ``encode(doc, top_n=1)`` and returns the model dump, the encodings and
their scores, so that ubpe can search the very same vocabulary.
"""

import json
import statistics
import sys
import time


def main():
    task = json.load(open(sys.argv[1]))
    if task["impl"] == "cython":
        from ubpe_cython import UBPE, UBPEClassic
        cls = (UBPE if task["kind"] == "weighted" else UBPEClassic)[int]
    else:
        from ubpe_native import UBPE, UBPEClassic
        cls = UBPE if task["kind"] == "weighted" else UBPEClassic
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
    elif task["kind"] == "weighted":
        tok = fit()
        times = []
        for _ in range(task["repeat"]):
            t = time.perf_counter()
            encoded = [tok.encode(d, top_n=1)[0] for d in docs]
            times.append(time.perf_counter() - t)
        out["seconds"] = statistics.median(times)
        out["encodings"] = [ids for ids, _ in encoded]
        out["scores"] = [score for _, score in encoded]
        out["model"] = json.loads(tok.dumps())
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
