"""ubpe text: byte-level BPE for text."""

from __future__ import annotations

import io
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import click
import numpy as np

from ubpe.serialization import temporary_folder
from ubpe.text import ByteTokenizer

from ._common import STDIO, Reporter, check_output, output_options, single_output, write_output


class _FileOnly(click.Path):
    """A path that is read as a file: '-' (standard input) is a usage error, not a file that
    does not exist (a folder is bad input, exit 1, as for the other commands)."""

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if str(value) == "-":
            self.fail("is read from a file; standard input ('-') is not accepted here", param,
                      ctx)
        return super().convert(value, param, ctx)


FILE_ONLY = _FileOnly()


@click.group()
def text():
    """Byte-level BPE for text (UTF-8 bytes as the alphabet)."""


@text.command("train")
@click.argument("files", nargs=-1, required=True, type=FILE_ONLY)
@output_options("Model file to write (JSON); '-' for standard output.")
@click.option("--vocab-size", default=8192, show_default=True, type=click.IntRange(256),
              help="Ordinary tokens: 256 bytes plus merges (special tokens come after).")
@click.option("--n-candidates", default=1, show_default=True, type=click.IntRange(1),
              help="Pairs considered per training round (1 = classic BPE).")
@click.option("--pattern", default="gpt2", show_default=True,
              help="Pre-tokenization: gpt2, cl100k, o200k, llama3, a regular expression, "
                   "or 'none' for no splitting.")
@click.option("--special", multiple=True, metavar="TOKEN",
              help="A special token such as '<|endoftext|>' (repeatable).")
@click.option("--min-frequency", default=2, show_default=True, type=click.IntRange(1),
              help="Minimum number of occurrences for a pair to be merged.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1),
              help="Threads for pre-tokenizing and counting the files.")
def text_train(files, output, to_stdout, force, report: Reporter, vocab_size, n_candidates,
               pattern, special, min_frequency, workers):
    """Train a byte-level tokenizer on UTF-8 text FILES.

    Prints a summary on stderr (-q: none, and no progress bar); writes the
    model atomically, with a checksum.
    """
    dst = single_output(files, output=output, to_stdout=to_stdout, force=force, binary=False)
    t0 = time.perf_counter()
    tok = ByteTokenizer(vocab_size, n_candidates=n_candidates,
                        pattern=None if pattern == "none" else pattern,
                        special_tokens=special, min_frequency=min_frequency,
                        progress=False if report.quiet else None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok.fit([Path(f) for f in files], workers=workers)
    if dst == STDIO:
        with temporary_folder() as tmp:
            tok.save(Path(tmp) / "model.json")
            write_output(dst, (Path(tmp) / "model.json").read_bytes())
    else:
        tok.save(dst)
    for w in caught:
        report.warn(str(w.message))
    report.info(f"trained {tok.n_vocab:,} tokens ({tok.tokenizer_.n_tokens_:,} ordinary + "
                f"{len(tok.special_tokens_)} special) on {len(files)} file(s) in "
                f"{time.perf_counter() - t0:.2f} s; wrote {'standard output' if dst == STDIO else dst}")


def _read_text(source) -> str:
    """A file or stdin as text, line endings as they are (CRLF stays CRLF)."""
    return _decode_utf8(sys.stdin.buffer.read() if str(source) == "-" else Path(source).read_bytes(),
                        source)


def _decode_utf8(data: bytes, source) -> str:
    """``data`` as UTF-8, or ValueError naming ``source``, the line and the byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{'standard input' if str(source) == '-' else source}, line {line}, "
                         f"byte {e.start}: not UTF-8 ({e.reason})") from None


@text.command("encode")
@click.argument("model_path", metavar="MODEL", type=FILE_ONLY)
@click.argument("source", metavar="[FILE|-]", default="-")
@output_options("File of token ids to write (default: standard output).")
@click.option("--npy", type=click.Path(dir_okay=False, path_type=Path),
              help="Write all ids as one int32 .npy array instead of text lines.")
@click.option("--allow-special", is_flag=True,
              help="Encode special tokens in the text as special ids (else they are an error).")
@click.option("--special-as-text", is_flag=True,
              help="Encode special tokens in the text as ordinary text (else they are an error).")
def text_encode(model_path, source, output, to_stdout, force, report: Reporter, npy,
                allow_special, special_as_text):
    """Encode a text file (or stdin) into token ids: the ids of the model's encoding of the
    whole text (as ByteTokenizer.encode), separated by spaces, a line ending after each id
    whose bytes end a line of the text."""
    if allow_special and special_as_text:
        raise click.UsageError("--allow-special and --special-as-text exclude each other")
    inputs = [model_path] + ([source] if source != STDIO else [])
    if npy:
        if output is not None or to_stdout:
            raise click.UsageError("--npy names the output: no -o or -c with it")
        check_output(str(npy), [str(p) for p in inputs], force=force, binary=True)
    else:  # (standard output by default: a filter)
        dst = single_output(inputs, output=output, to_stdout=to_stdout or output is None,
                            force=force, binary=False)
    tok = ByteTokenizer.load(model_path)
    content = _read_text(source)
    kwargs = {"allowed_special": "all"} if allow_special else (
        {"disallowed_special": ()} if special_as_text else {})
    try:
        ids = tok.encode_to_numpy(content, **kwargs).astype(np.int64)
    except ValueError as e:
        if "special token" not in str(e):
            raise
        where = str(e).split(";")[0].replace("text contains", "holds")
        raise ValueError(f"{source}: {where}: --allow-special encodes it as its special id, "
                         f"--special-as-text as ordinary text") from None
    if npy:
        buf = io.BytesIO()
        np.save(buf, ids.astype(np.int32))
        write_output(str(npy), buf.getvalue())
        report.info(f"{len(content.encode()):,} bytes -> {ids.size:,} tokens; wrote "
                    f"{'standard output' if str(npy) == STDIO else npy}")
        return
    ends = np.array([b.endswith(b"\n") for b in _token_bytes(tok)], bool)
    cuts = np.flatnonzero(ends[ids]) + 1
    lines = np.split(ids, cuts[cuts < ids.size]) if ids.size else []
    write_output(dst, "".join(" ".join(map(str, line.tolist())) + "\n" for line in lines).encode())
    if dst != STDIO:
        report.info(f"{len(content.encode()):,} bytes -> {ids.size:,} tokens in {len(lines):,} "
                    f"lines; wrote {dst}")


def _token_bytes(tok: ByteTokenizer) -> list[bytes]:
    """The bytes of every id of ``tok``, special ids included (b"" for an unused id)."""
    out = [b""] * tok.n_vocab
    for b, i in tok.mergeable_ranks().items():  # (a rank is the token's id)
        out[i] = b
    for name, i in tok.special_tokens_.items():
        out[i] = name.encode()
    return out


@text.command("decode")
@click.argument("model_path", metavar="MODEL", type=FILE_ONLY)
@click.argument("source", metavar="[FILE|-]", default="-")
@output_options("Text file to write (default: standard output).")
def text_decode(model_path, source, output, to_stdout, force, report: Reporter):
    """Decode ids (lines from 'ubpe text encode', or a .npy file) back to text: the bytes
    that were encoded."""
    inputs = [model_path] + ([source] if source != STDIO else [])
    dst = single_output(inputs, output=output, to_stdout=to_stdout or output is None, force=force,
                        binary=False)  # (standard output by default: a filter)
    tok = ByteTokenizer.load(model_path)
    raw = sys.stdin.buffer.read() if str(source) == "-" else Path(source).read_bytes()
    name = "standard input" if str(source) == "-" else source  # (in messages)
    if raw.startswith(b"\x93NUMPY"):  # a .npy file (as 'ubpe text encode --npy' writes)
        from signals.readers import read_npy
        try:
            ids = read_npy(io.BytesIO(raw), len(raw))
        except (ValueError, EOFError) as e:
            raise ValueError(f"{name}: not a readable .npy file ({e})") from None
        try:
            data = tok.decode_bytes(ids)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name}: {e}") from None
    else:
        parts = []
        for n, line in enumerate(_decode_utf8(raw, source).splitlines(), 1):
            fields = line.split()
            if not all(f.isascii() and f.isdigit() for f in fields):
                raise ValueError(f"{name}, line {n}: expected token ids (decimal digits) "
                                 f"separated by spaces")
            try:
                parts.append(tok.decode_bytes([int(f) for f in fields]))
            except ValueError as e:
                raise ValueError(f"{name}, line {n}: {e}") from None
        data = b"".join(parts)
    write_output(dst, data)
    if dst != STDIO:
        report.info(f"{len(data):,} bytes; wrote {dst}")


@text.command("stats")
@click.argument("model_path", metavar="MODEL", type=FILE_ONLY)
@click.argument("files", nargs=-1, required=True,
                type=click.Path(path_type=Path))
def text_stats(model_path, files):
    """Bytes per token and vocabulary usage of a model on text FILES."""
    tok = ByteTokenizer.load(model_path)
    used = np.zeros(tok.n_vocab, bool)
    total_bytes = total_tokens = 0
    for f in files:
        content = _read_text(f)
        ids = tok.encode_to_numpy(content, disallowed_special=()).astype(np.int64)
        used[ids] = True
        n_bytes = len(content.encode())
        total_bytes += n_bytes
        total_tokens += ids.size
        click.echo(f"{f}: {n_bytes:,} bytes, {ids.size:,} tokens, "
                   f"{n_bytes / max(ids.size, 1):.3f} bytes per token")
    click.echo(f"total: {total_bytes / max(total_tokens, 1):.3f} bytes per token; "
               f"{used.sum():,} of {tok.n_vocab:,} tokens used ({used.mean():.1%})")
