"""``run_rnn``: one call of an ``nn.RNN``/``nn.GRU``/``nn.LSTM`` over a batch that resets at ``is_first``.

With ``boundary="pack"`` a row holds several streams, so the hidden state must restart at every ``is_first``
inside the batch, and padding (``valid`` False) must not advance it. Looping over the steps in Python does
that but is slow. Instead each row is cut into *runs* (its valid steps between resets), and the module runs once
on all of them as one ``PackedSequence``, gathered from ``x`` by index (no padded copy of the runs):

- **cut**: a run starts at a valid step with ``is_first`` and at each row's first valid step;
- **gather**: the valid steps, time step after time step of each run, runs longest first (the packed order);
- **start**: a row's first run continues the state given for the row (``hx``) unless it starts with
  ``is_first``; every other run starts from zeros;
- **scatter**: outputs go back to their steps (zeros on padding), and the state returned for a row is the one
  after its last valid step (the given state, unchanged, for a row that is all padding).

The result is the same as calling the module one step at a time with those rules (``tests/test_tbptt_state.py``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from streamcli.errors import ConfigError

State = torch.Tensor | tuple[torch.Tensor, ...]
"""A hidden state: one tensor (RNN, GRU) or a tuple of them (an LSTM's ``(h, c)``)."""


def run_rnn(
    rnn: nn.RNNBase, x: torch.Tensor, is_first: torch.Tensor, valid: torch.Tensor, hx: State | None = None
) -> tuple[torch.Tensor, State]:
    """Run ``rnn`` over ``x``, resetting the state at ``is_first`` and skipping padding, in one module call.

    Args:
        rnn: a unidirectional ``nn.RNN``, ``nn.GRU`` or ``nn.LSTM`` (``batch_first`` either way).
        x: ``(T, B, F)``, or ``(B, T, F)`` when ``rnn.batch_first``.
        is_first: bool flags in the same layout as ``x``'s first two axes (``batch.is_first`` of a loader with
            ``layout="BT"`` for a batch-first module, ``"TB"`` otherwise): the state resets before such a step.
        valid: bool flags in the same layout (``batch.valid``): padding steps leave the state as it is.
        hx: the state each row starts from unless its first valid step has ``is_first``, as the module takes
            it (``(layers, B, H)``, a tuple ``(h, c)`` for an LSTM); None for zeros (``RowState.begin``
            gives it).

    Returns:
        ``(output, state)``: the output in ``x``'s layout with zeros on padding, and each row's state after
        its last valid step, in the module's layout (a tuple for an LSTM).
    """
    _check(rnn, x, is_first, valid)
    lstm = isinstance(rnn, nn.LSTM)
    batch_first = bool(rnn.batch_first)
    device = x.device
    is_first, valid = is_first.to(device, torch.bool), valid.to(device, torch.bool)
    rows_first = (valid, is_first) if batch_first else (valid.t(), is_first.t())
    valid_bt, first_bt = rows_first[0].reshape(-1), rows_first[1].reshape(-1)
    n_rows, n_steps = rows_first[0].shape
    states = _zero_states(rnn, n_rows, x) if hx is None else _as_tuple(hx, lstm)
    if any(s.dim() != 3 or s.shape[1] != n_rows for s in states):
        shapes = ", ".join(str(tuple(s.shape)) for s in states)
        raise ConfigError(f"hx has shape {shapes}; it must be (layers, B, H) with B = {n_rows} rows")
    out_size = rnn.proj_size if lstm and rnn.proj_size > 0 else rnn.hidden_size
    flat = x.reshape(n_rows * n_steps, x.shape[-1])
    out_flat = x.new_zeros(n_rows * n_steps, out_size)

    steps = valid_bt.nonzero().squeeze(1)  # valid steps in (row, time) order: a row's steps are consecutive
    if steps.numel() == 0:
        return out_flat.view(*x.shape[:2], out_size), _as_state(states, lstm)
    row = steps // n_steps
    # Where the valid step sits in ``x`` and in the output (their own layout).
    at = steps if batch_first else (steps % n_steps) * n_rows + row

    new_row = torch.ones_like(row, dtype=torch.bool)
    new_row[1:] = row[1:] != row[:-1]
    starts_run = first_bt[steps] | new_row
    run = starts_run.long().cumsum(0) - 1  # each valid step's run
    run_start = starts_run.nonzero().squeeze(1)  # (S,): the index (among valid steps) where each run begins
    n_runs = run_start.numel()
    k = torch.arange(steps.numel(), device=device) - run_start[run]  # each step's place within its run
    lengths = torch.bincount(run, minlength=n_runs)
    order, batch_sizes, sorted_runs = _packed_order(lengths, run, k)
    packed_at = at.index_select(0, order)  # where each element of the packed data sits in x and the output

    run_row = row[run_start]
    carry = new_row[run_start] & ~first_bt[steps[run_start]]  # a row's first run, not a fresh stream
    if hx is None:
        init = _zero_states(rnn, n_runs, x)
    else:
        init = tuple(torch.where(carry[None, :, None], s.index_select(1, run_row), s.new_zeros(())) for s in states)
    packed = PackedSequence(flat.index_select(0, packed_at), batch_sizes, sorted_runs, _invert(sorted_runs))
    out_packed, last = rnn(packed, init if lstm else init[0])
    out = out_flat.index_copy(0, packed_at, out_packed.data).view(*x.shape[:2], out_size)

    runs_of_row = torch.bincount(run_row, minlength=n_rows)
    last_run = (runs_of_row.cumsum(0) - 1).clamp(min=0)  # runs are numbered row after row
    has_run = (runs_of_row > 0)[None, :, None]
    finals = tuple(
        torch.where(has_run, s_last.index_select(1, last_run), s)
        for s_last, s in zip(_as_tuple(last, lstm), states, strict=True)
    )
    return out, _as_state(finals, lstm)


def _packed_order(
    lengths: torch.Tensor, run: torch.Tensor, k: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The valid steps in ``PackedSequence`` order (time step after time step, runs longest first), without a
    padded copy: returns that order (indices into the valid steps), the batch sizes (on the CPU, as the module
    takes them) and the runs sorted longest first."""
    sorted_lengths, sorted_runs = torch.sort(lengths, descending=True, stable=True)
    rank = _invert(sorted_runs)
    lengths_cpu = sorted_lengths.cpu()
    longest = int(lengths_cpu[0])
    # batch_sizes[t]: the runs longer than t, which are the first ones in sorted order.
    ends = torch.bincount(lengths_cpu, minlength=longest + 1)[1:]
    batch_sizes = lengths.numel() - (ends.cumsum(0) - ends)
    offsets = (batch_sizes.cumsum(0) - batch_sizes).to(k.device)
    packed_at = offsets[k] + rank[run]  # each valid step's index in the packed data
    return _invert(packed_at), batch_sizes, sorted_runs


def _invert(permutation: torch.Tensor) -> torch.Tensor:
    inverse = torch.empty_like(permutation)
    inverse[permutation] = torch.arange(permutation.numel(), device=permutation.device)
    return inverse


def _check(rnn: nn.Module, x: torch.Tensor, is_first: torch.Tensor, valid: torch.Tensor) -> None:
    if not isinstance(rnn, nn.RNNBase):
        raise ConfigError(f"run_rnn takes an nn.RNN, nn.GRU or nn.LSTM, not {type(rnn).__name__}")
    if rnn.bidirectional:
        raise ConfigError(
            "run_rnn got a bidirectional module: its reverse direction cannot carry a state from batch to "
            "batch; use bidirectional=False"
        )
    if x.dim() != 3:
        raise ConfigError(f"run_rnn takes a batched x of 3 axes, got shape {tuple(x.shape)}")
    if tuple(is_first.shape) != tuple(x.shape[:2]) or tuple(valid.shape) != tuple(x.shape[:2]):
        layout = "(B, T)" if rnn.batch_first else "(T, B)"
        raise ConfigError(
            f"is_first {tuple(is_first.shape)} and valid {tuple(valid.shape)} must match x's first two axes "
            f"{tuple(x.shape[:2])}, {layout} for this module (batch_first={rnn.batch_first}); take the flags from "
            f'a loader with layout="{"BT" if rnn.batch_first else "TB"}"'
        )


def _zero_states(rnn: nn.RNNBase, rows: int, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = x.new_zeros(rnn.num_layers, rows, rnn.proj_size or rnn.hidden_size)
    if isinstance(rnn, nn.LSTM):
        return h, x.new_zeros(rnn.num_layers, rows, rnn.hidden_size)
    return (h,)


def _as_tuple(state: State, lstm: bool) -> tuple[torch.Tensor, ...]:
    if isinstance(state, torch.Tensor):
        if lstm:
            raise ConfigError("an LSTM's state is a tuple (h, c), got one tensor")
        return (state,)
    if len(state) != (2 if lstm else 1):
        raise ConfigError(f"the state is a tuple of {len(state)} tensors; an LSTM takes (h, c), an RNN or GRU one")
    return tuple(state)


def _as_state(states: tuple[torch.Tensor, ...], lstm: bool) -> State:
    return states if lstm else states[0]
