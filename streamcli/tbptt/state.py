"""``RowState``: a model's per-row hidden state, carried from batch to batch by stream, not by row.

Each batch, ``begin(batch)`` gives the state the model starts from and ``update(final)`` takes the state it
ended with. Between the two, the state is keyed by *where each row's stream goes on*: ``(source, stream,
next position, replayed)`` after the row's last valid step. A row whose first valid step continues stream ``s``
at position ``p`` takes the state saved for that key, whichever row it was in, so rows may be permuted or the
batch regridded (a resume on another batch size). A row whose first valid step has ``is_first`` starts from
zeros. A continuing row whose state is not known (never saved, or two rows claim the same key) also starts from
zeros, and is flagged in ``unknown`` and counted in ``unknown_total``; ``on_unknown="raise"`` makes it an error.
After a resume on another global batch the loader marks each row's first step ``is_first``; a stream in flight
there still takes its saved state, and ``is_first`` (the flags to reset at) leaves that step out.

A row that is all padding keeps its state and key (the state does not advance on padding). ``state_dict()``
holds the states by key, on the CPU, so it loads into a run of any batch size beside the loader's own state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from streamcli import seal as _seal
from streamcli.batch import Batch
from streamcli.errors import ConfigError, LoaderUsageError, StateError
from streamcli.tbptt.runner import State

FORMAT = "streamcli.RowState/1"
ON_UNKNOWN = ("zero", "raise")


class RowState:
    """Per-row hidden state for truncated BPTT, restored by stream after a reset, a permutation or a regrid.

    Args:
        batch_dim: the batch axis of each state tensor; 1 is the layout of ``nn.RNN``/``GRU``/``LSTM`` hidden
            state, ``(layers, B, H)``, whatever their ``batch_first``.
        detach: cut the graph of the carried state at each batch (truncated BPTT); False keeps it.
        segment: the loader's ``segment`` (``loader.segment``). After ``load_state_dict`` the loader may mark a
            stream's first step after the resume with ``is_first`` (a resume on another global batch): such a
            step still takes its stream's saved state unless its position begins a stream (0, or a multiple
            of ``segment``).
        on_unknown: "zero" (a continuing row of unknown state starts from zeros, flagged in ``unknown``) or
            "raise" (a ``StateError`` naming the rows).
        device: where loaded states go (by default they stay on the CPU, where ``state_dict`` puts them).
    """

    def __init__(
        self,
        *,
        batch_dim: int = 1,
        detach: bool = True,
        segment: int = 0,
        on_unknown: str = "zero",
        device: torch.device | str | None = None,
    ) -> None:
        if on_unknown not in ON_UNKNOWN:
            raise ConfigError(f"{on_unknown=} is not one of {', '.join(ON_UNKNOWN)}")
        if segment < 0:
            raise ConfigError(f"{segment=} must be >= 0 (the loader's segment; 0 for whole items)")
        self.batch_dim, self.detach, self.segment, self.on_unknown = batch_dim, detach, segment, on_unknown
        self.device = None if device is None else torch.device(device)
        self._keys: torch.Tensor | None = None  # (rows, 4) int64; a row of -1 holds no stream
        self._states: tuple[torch.Tensor, ...] | None = None
        self._is_tuple = False
        self._loaded = False  # rows were just loaded: they are keyed by stream only, not by row
        self._pending: torch.Tensor | None = None  # the keys after the batch given by the last begin()
        self._unknown: torch.Tensor | None = None
        self._unknown_total: torch.Tensor | int = 0
        self._is_first: torch.Tensor | None = None

    # ------------------------------------------------------------------------------------------ per batch
    def begin(self, batch: Batch) -> State | None:
        """The state to start ``batch`` from, with the batch on axis ``batch_dim``; None (all zeros, as
        ``nn.RNN`` takes it) while no state has been saved yet."""
        if self._pending is not None:
            raise LoaderUsageError("RowState.begin was called twice; call update(final_state) after each batch")
        self._is_first = batch.is_first
        flags = {name: getattr(batch, name) for name in ("is_first", "valid", "stream", "position", "replayed")}
        source = batch.source if batch.source is not None else torch.zeros_like(batch.stream)
        flags["source"] = source
        if batch.layout == "BT":
            flags = {name: t.t() for name, t in flags.items()}
        valid = flags["valid"].bool()
        n_steps, n_rows = valid.shape
        cols = torch.arange(n_rows, device=valid.device)
        any_valid = valid.any(0)
        first_t = valid.int().argmax(0)  # the first maximum: a row's first valid step
        last_t = n_steps - 1 - valid.flip(0).int().argmax(0)
        start_key, end_key = _key(flags, first_t, cols), _key(flags, last_t, cols)
        end_key[:, 2] += 1  # where the stream goes on
        fresh = flags["is_first"].bool()[first_t, cols]
        if self._loaded:  # a resume may set is_first on a stream that goes on: rejoin it unless it begins there
            position = start_key[:, 2]
            begins = position == 0
            if self.segment:
                begins |= position % self.segment == 0
            fresh &= begins
        continuing = any_valid & ~fresh

        none = torch.full_like(end_key, -1)
        if self._keys is None or self._keys.shape[0] == 0 or self._states is None:
            found = torch.zeros_like(any_valid)
            self._finish(continuing & ~found, torch.where(any_valid[:, None], end_key, none))
            return None
        saved = self._keys.to(valid.device)
        n_saved = saved.shape[0]
        match = (start_key[:, None, :] == saved[None, :, :]).all(2)  # (rows, saved rows)
        own = torch.zeros_like(any_valid)
        keep = torch.zeros_like(any_valid)  # an all-padding row keeps its own state
        if not self._loaded:
            mine = cols < n_saved
            own[mine] = match[cols[mine], cols[mine]]
            keep = ~any_valid & mine
        found = continuing & (own | (match.sum(1) == 1))
        index = torch.where(own | keep, cols, match.int().argmax(1)).clamp(max=n_saved - 1)
        use = found | keep
        kept_key = torch.where(keep[:, None], saved[index], none)
        if self._loaded:  # the steps rejoined across a resume's is_first must not reset the state
            is_first = flags["is_first"].bool().clone()
            is_first[first_t, cols] &= ~found
            self._is_first = is_first.t() if batch.layout == "BT" else is_first
        self._finish(continuing & ~found, torch.where(any_valid[:, None], end_key, kept_key))
        out = tuple(self._take(s, index, use) for s in self._states)
        return out if self._is_tuple else out[0]

    def update(self, final: State) -> None:
        """Take the state after the batch given by the last ``begin`` (detached unless ``detach=False``)."""
        if self._pending is None:
            raise LoaderUsageError("RowState.update was called without begin(batch) before it")
        states = (final,) if isinstance(final, torch.Tensor) else tuple(final)
        rows = self._pending.shape[0]
        for s in states:
            if s.dim() <= self.batch_dim or s.shape[self.batch_dim] != rows:
                raise ConfigError(
                    f"the state has shape {tuple(s.shape)}; axis {self.batch_dim} (batch_dim) must hold the "
                    f"batch's {rows} rows"
                )
        self._states = tuple(s.detach() if self.detach else s for s in states)
        self._is_tuple = not isinstance(final, torch.Tensor)
        self._keys, self._pending, self._loaded = self._pending, None, False

    @property
    def is_first(self) -> torch.Tensor:
        """The steps to reset the state at in the batch of the last ``begin`` (pass it to ``run_rnn``):
        ``batch.is_first``, less the first step of a stream rejoined across a resume (see ``segment``)."""
        if self._is_first is None:
            raise LoaderUsageError("RowState.is_first is read before begin(batch)")
        return self._is_first

    @property
    def unknown(self) -> torch.Tensor | None:
        """(B,) bool for the last ``begin``: rows that continue a stream whose state was not known (given zeros)."""
        return self._unknown

    @property
    def unknown_total(self) -> int:
        """Rows given zeros for an unknown state, over every ``begin`` so far."""
        return int(self._unknown_total)

    def reset(self) -> None:
        """Forget every state (the next ``begin`` gives zeros; continuing rows are then counted unknown)."""
        self._keys = self._states = self._pending = self._unknown = self._is_first = None
        self._loaded = False

    # --------------------------------------------------------------------------------------------- resume
    def state_dict(self) -> dict[str, Any]:
        """The states after the last ``update``, on the CPU, keyed by ``(source, stream, next position,
        replayed)``; rows that hold no stream are left out. Save it with the loader's ``state_dict()``."""
        out: dict[str, Any] = {"format": FORMAT, "batch_dim": self.batch_dim, "tuple": self._is_tuple}
        if self._keys is None or self._states is None:
            return {**out, "keys": [], "states": [], "digest": _seal.digest({**out, "keys": []})}
        rows = (self._keys[:, 1] >= 0).nonzero().squeeze(1)
        keys = self._keys.index_select(0, rows).cpu().tolist()
        states = [s.detach().index_select(self.batch_dim, rows.to(s.device)).cpu() for s in self._states]
        # The seal covers the keys (which stream and position each state goes on at), not the tensors' values.
        return {**out, "keys": keys, "states": states, "digest": _seal.digest({**out, "keys": keys})}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``, of a run with any batch size); raises ``StateError``
        naming the field if it is not such a state. A refused state changes nothing."""
        if state.get("format") != FORMAT:
            raise StateError(f"not a RowState state: format {state.get('format')!r}, expected {FORMAT!r}")
        if state.get("batch_dim") != self.batch_dim:
            raise StateError(f"the state was saved with batch_dim={state.get('batch_dim')}, here {self.batch_dim}")
        _check_seal(state)
        fields = "[source, stream, position, replayed]"
        try:
            keys = torch.tensor(state["keys"], dtype=torch.int64)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise StateError(f"the state's 'keys' are not a list of {fields}: {exc}") from None
        keys = keys.reshape(0, 4) if keys.numel() == 0 else keys
        if keys.dim() != 2 or keys.shape[1] != 4:
            raise StateError(f"the state's 'keys' have shape {tuple(keys.shape)}, not a list of {fields}")
        states = state.get("states")
        if not isinstance(states, list | tuple) or not all(isinstance(s, torch.Tensor) for s in states):
            raise StateError("the state's 'states' are not a list of tensors")
        for s in states:
            if s.dim() <= self.batch_dim or s.shape[self.batch_dim] != keys.shape[0]:
                raise StateError(
                    f"a saved state of shape {tuple(s.shape)} does not hold {keys.shape[0]} rows on axis "
                    f"{self.batch_dim}, one per key"
                )
        if keys.shape[0] and not states:
            raise StateError(f"the state has {keys.shape[0]} keys but no states")
        self.reset()
        if keys.shape[0]:
            self._keys = keys
            self._states = tuple(s if self.device is None else s.to(self.device) for s in states)
            self._is_tuple = bool(state.get("tuple"))
        self._loaded = True

    # -------------------------------------------------------------------------------------------- helpers
    def _finish(self, unknown: torch.Tensor, end_keys: torch.Tensor) -> None:
        if self.on_unknown == "raise" and bool(unknown.any()):
            rows = unknown.nonzero().squeeze(1).tolist()
            raise StateError(
                f"rows {rows[:8]} continue a stream whose state is not known (it was never saved, or two rows "
                'claim it); load the RowState saved with the loader\'s state, or use on_unknown="zero"'
            )
        self._unknown = unknown
        self._unknown_total = self._unknown_total + unknown.sum()
        self._pending = end_keys

    def _take(self, saved: torch.Tensor, index: torch.Tensor, use: torch.Tensor) -> torch.Tensor:
        shape = [1] * saved.dim()
        shape[self.batch_dim] = use.numel()
        rows = saved.index_select(self.batch_dim, index.to(saved.device))
        return torch.where(use.to(saved.device).view(shape), rows, rows.new_zeros(()))


def _key(flags: dict[str, torch.Tensor], t: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """(B, 4) int64: (source, stream, position, replayed) at step ``t[b]`` of each row ``b``."""
    names = ("source", "stream", "position", "replayed")
    return torch.stack([flags[name][t, cols].long() for name in names], 1)


def _check_seal(state: Mapping[str, Any]) -> None:
    """Refuse a state whose keys (or settings) changed after ``state_dict()``; one without a digest (an older
    streamcli's) passes."""
    if _seal.KEY not in state:
        return
    try:
        now = _seal.digest({k: state.get(k) for k in ("format", "batch_dim", "tuple", "keys")})
    except (TypeError, ValueError) as exc:
        raise StateError(f"the state's 'keys' are not plain JSON data: {exc}") from None
    if state[_seal.KEY] != now:
        raise StateError(
            f"the RowState state's digest does not match the sha256 of its keys ({now[:23]}...): they were changed "
            "after state_dict() saved them; pass an unmodified RowState.state_dict()"
        )
