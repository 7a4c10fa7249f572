"""Truncated BPTT over streamcli batches: a hidden state that follows its stream, and a reset-aware RNN runner.

``RowState`` keeps a model's per-row state from batch to batch, resetting rows at ``is_first`` and restoring each
stream's state in whatever row the stream continues (also after a resume on another batch size).
``run_rnn`` runs an ``nn.RNN``/``nn.GRU``/``nn.LSTM`` over a batch in one call, resetting at every ``is_first``
inside it and skipping padding::

    state = RowState()
    for batch in loader:
        hx = state.begin(batch)
        out, hn = run_rnn(rnn, embed(batch["x"]), state.is_first, batch.valid, hx)
        state.update(hn)

This package imports torch; ``import streamcli`` alone does not (it loads this package on first use of a name).
"""

from streamcli.tbptt.runner import State, run_rnn
from streamcli.tbptt.state import RowState

__all__ = ["RowState", "State", "run_rnn"]
assert sorted(__all__) == __all__
