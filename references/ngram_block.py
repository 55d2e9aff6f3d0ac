"""Reference for ``kernels.ngram_block.ngram_block``: no-repeat-n-gram blocking, one row at a time.

The rule (as in Hugging Face's ``no_repeat_ngram_size``): the next token must not complete an
n-gram that already occurs in the row. The last ``n - 1`` generated tokens are the prefix; for
every earlier position i where ``tokens[i : i + n - 1]`` equals the prefix, the token that followed
there, ``tokens[i + n - 1]``, gets logit -inf. With n = 1 the prefix is empty and every generated
token is banned; with n > length there is no complete n-gram and nothing is banned. An id outside
``[0, vocab)`` names no logit and bans nothing.

The loop is plain Python over the rows (the rule as written, the truth the kernel is held to); the
bans of all rows are applied by one indexed store at the end, so that on a GPU the reference costs
one host copy of the ids and one store, not a launch per row. ``torch.compile`` is told to leave the
loop alone: tracing a Python loop over the ids would specialise on their values (a recompile per
call, each unrolling the whole loop: over a minute at 256 rows of 128 ids on an H100 host). The
loop is a helper marked ``torch.compiler.disable`` and called from the reference, because
``torch.compile`` of a function marked so unwraps the mark and traces it anyway; so the harness's
"compile" column for this op is eager run through the compiled wrapper.
"""

from __future__ import annotations

import torch


def ngram_block(tokens: torch.Tensor, logits: torch.Tensor, n: int) -> torch.Tensor:
    return _ngram_block_rows(tokens, logits, n)


@torch.compiler.disable
def _ngram_block_rows(tokens: torch.Tensor, logits: torch.Tensor, n: int) -> torch.Tensor:
    out = logits.clone()
    vocab = logits.shape[-1]
    rows: list[int] = []
    cols: list[int] = []
    for b, row in enumerate(tokens.tolist()):
        prefix = row[len(row) - (n - 1):] if n > 1 else []
        banned = {
            row[i + n - 1]
            for i in range(len(row) - n + 1)
            if row[i : i + n - 1] == prefix and 0 <= row[i + n - 1] < vocab
        }
        rows.extend([b] * len(banned))
        cols.extend(sorted(banned))
    if rows:
        index = torch.tensor([rows, cols], dtype=torch.int64).to(out.device)
        out[index[0], index[1]] = float("-inf")
    return out
