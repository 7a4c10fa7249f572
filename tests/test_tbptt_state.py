"""``run_rnn`` and ``RowState`` against step-by-step references: the module called one step at a time (resetting
at ``is_first``, skipping padding), and each stream run alone from its first step to its last."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from streamcli import Batch, StreamLoader
from streamcli.errors import ConfigError, StateError
from streamcli.tbptt import RowState, State, run_rnn
from tests._sources import CountingSource

KINDS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


def make_rnn(kind: str, layers: int = 1, batch_first: bool = False, dtype: torch.dtype = torch.float64) -> nn.RNNBase:
    torch.manual_seed(7)
    rnn: nn.RNNBase = KINDS[kind](3, 5, num_layers=layers, batch_first=batch_first)
    return rnn.to(dtype)


def as_tuple(state: State) -> tuple[torch.Tensor, ...]:
    return (state,) if isinstance(state, torch.Tensor) else tuple(state)


def reference(
    rnn: nn.RNNBase, x: torch.Tensor, is_first: torch.Tensor, valid: torch.Tensor, hx: State | None
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """The module one step at a time: zero the state at ``is_first``, keep it (and output zeros) on padding."""
    bf = rnn.batch_first
    xs, first, ok = (x.transpose(0, 1), is_first.t(), valid.t()) if bf else (x, is_first, valid)
    rows = xs.shape[1]
    if hx is None:
        h = xs.new_zeros(rnn.num_layers, rows, rnn.hidden_size)
        states: tuple[torch.Tensor, ...] = (h, h.clone()) if isinstance(rnn, nn.LSTM) else (h,)
    else:
        states = as_tuple(hx)
    outs = []
    for t in range(xs.shape[0]):
        reset = (first[t] & ok[t])[None, :, None]
        states = tuple(torch.where(reset, s.new_zeros(()), s) for s in states)
        step = xs[t][:, None] if bf else xs[t][None]
        y, new = rnn(step, states if isinstance(rnn, nn.LSTM) else states[0])
        keep = ok[t][None, :, None]
        states = tuple(torch.where(keep, n, s) for n, s in zip(as_tuple(new), states, strict=True))
        outs.append(torch.where(ok[t][:, None], y[:, 0] if bf else y[0], y.new_zeros(())))
    out = torch.stack(outs)
    return (out.transpose(0, 1) if bf else out), states


def random_flags(steps: int, rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, B) flags with runs of length 1, resets at the first step, padding in the middle and at the end,
    a row that is all padding and a packed row (streams back to back)."""
    g = torch.Generator().manual_seed(seed)
    valid = torch.rand(steps, rows, generator=g) > 0.2
    is_first = (torch.rand(steps, rows, generator=g) < 0.3) & valid
    valid[:, 0] = False  # all padding
    valid[:, 1], is_first[:, 1] = True, False
    is_first[::2, 1] = True  # runs of length 2, then 1 at the end if T is odd
    valid[:, 2], is_first[:, 2] = True, True  # every run of length 1
    valid[steps // 2 :, 3], is_first[:, 3] = False, False  # a stream that ends, then padding
    is_first[0, 4] = True  # a row that begins a new stream at the first step
    return is_first, valid


def as_hx(states: list[torch.Tensor], kind: str) -> State | None:
    return None if not states else (tuple(states) if kind == "lstm" else states[0])


CASES = [(kind, layers, bf) for kind in KINDS for layers in (1, 2) for bf in (False, True)]


@pytest.mark.parametrize(("kind", "layers", "batch_first"), CASES)
@pytest.mark.parametrize("carry", [True, False])
def test_the_runner_matches_the_step_by_step_reference_with_its_gradients(
    kind: str, layers: int, batch_first: bool, carry: bool
) -> None:
    rnn = make_rnn(kind, layers, batch_first)
    steps, rows = 9, 7
    for seed in range(3):
        is_first, valid = random_flags(steps, rows, seed)
        g = torch.Generator().manual_seed(100 + seed)
        x = torch.randn(steps, rows, 3, generator=g, dtype=torch.float64)
        if batch_first:
            x, is_first, valid = x.transpose(0, 1).contiguous(), is_first.t(), valid.t()
        hx: State | None = None
        if carry:
            h = torch.randn(layers, rows, 5, generator=g, dtype=torch.float64)
            hx = (h, torch.randn_like(h)) if kind == "lstm" else h
        got_inputs = [t.clone().requires_grad_() for t in (x, *(as_tuple(hx) if hx is not None else ()))]
        want_inputs = [t.detach().clone().requires_grad_() for t in got_inputs]
        out, final = run_rnn(rnn, got_inputs[0], is_first, valid, as_hx(got_inputs[1:], kind))
        ref_out, ref_final = reference(rnn, want_inputs[0], is_first, valid, as_hx(want_inputs[1:], kind))
        torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
        for a, b in zip(as_tuple(final), ref_final, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)

        w = torch.randn(out.shape, generator=g, dtype=torch.float64)
        grads = []
        for o, f, inputs in ((out, final, got_inputs), (ref_out, ref_final, want_inputs)):
            rnn.zero_grad()
            loss = (o * w).sum() + sum((s * s).sum() for s in as_tuple(f))
            torch.autograd.backward(loss)
            grads.append([i.grad for i in inputs] + [p.grad.clone() for p in rnn.parameters() if p.grad is not None])
        assert len(grads[0]) == len(grads[1]) == len(got_inputs) + len(list(rnn.parameters()))
        for a, b in zip(*grads, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_an_lstm_with_a_projection_matches_the_reference() -> None:
    torch.manual_seed(3)
    rnn = nn.LSTM(3, 6, num_layers=2, proj_size=4).double()
    is_first, valid = random_flags(8, 6, seed=9)
    x = torch.randn(8, 6, 3, dtype=torch.float64)
    hx = (torch.randn(2, 6, 4, dtype=torch.float64), torch.randn(2, 6, 6, dtype=torch.float64))
    out, final = run_rnn(rnn, x, is_first, valid, hx)
    bf_free = nn.LSTM(3, 6, num_layers=2, proj_size=4).double()
    bf_free.load_state_dict(rnn.state_dict())
    ref_out, ref_final = reference(bf_free, x, is_first, valid, hx)
    torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
    for a, b in zip(as_tuple(final), ref_final, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_a_batch_of_padding_only_returns_zeros_and_the_state_it_was_given() -> None:
    rnn = make_rnn("gru")
    h = torch.randn(1, 3, 5, dtype=torch.float64)
    out, final = run_rnn(rnn, torch.randn(4, 3, 3, dtype=torch.float64), torch.zeros(4, 3, dtype=torch.bool),
                         torch.zeros(4, 3, dtype=torch.bool), h)  # fmt: skip
    assert torch.equal(out, torch.zeros(4, 3, 5, dtype=torch.float64))
    assert torch.equal(as_tuple(final)[0], h)


def test_the_runner_refuses_a_bidirectional_module_and_flags_of_another_shape() -> None:
    x = torch.zeros(4, 2, 3)
    flags = torch.ones(4, 2, dtype=torch.bool)
    with pytest.raises(ConfigError, match="bidirectional=False"):
        run_rnn(nn.GRU(3, 5, bidirectional=True), x, flags, flags)
    with pytest.raises(ConfigError, match=r'layout="BT"'):
        run_rnn(nn.GRU(3, 5, batch_first=True), x.transpose(0, 1), flags, flags)  # (T, B) flags for a (B, T) x
    with pytest.raises(ConfigError, match="B = 2 rows"):
        run_rnn(nn.GRU(3, 5), x, flags, flags, torch.zeros(1, 3, 5))


# ----------------------------------------------------------------------------------------------- RowState


def features(x: torch.Tensor) -> torch.Tensor:
    """A float input for each step ``[item, position]`` of ``CountingSource``: the same wherever the step lands."""
    i, p = x[..., 0].double(), x[..., 1].double()
    return torch.stack([torch.sin(0.7 * i + 0.3 * p), torch.cos(1.3 * i - 0.2 * p), 0.1 * p / (1 + i)], -1)


def stream_reference(rnn: nn.RNNBase, lengths: list[int]) -> dict[tuple[int, int], torch.Tensor]:
    """Each stream alone, from zeros over all its steps: output by (stream, position)."""
    out = {}
    with torch.no_grad():
        for item, n in enumerate(lengths):
            x = features(torch.tensor([[item, p] for p in range(n)]))
            y, _ = rnn(x[None] if rnn.batch_first else x[:, None])
            for p in range(n):
                out[item, p] = y[0, p] if rnn.batch_first else y[p, 0]
    return out


Key = tuple[int, int]


def check_batch(batch: Batch, out: torch.Tensor, want: dict[Key, torch.Tensor], seen: set[Key]) -> None:
    valid = batch.valid.bool()
    for a, b in valid.nonzero().tolist():
        key = (int(batch.stream[a, b]), int(batch.position[a, b]))
        torch.testing.assert_close(out[a, b], want[key], rtol=0, atol=1e-12, msg=f"stream {key[0]} position {key[1]}")
        seen.add(key)
    assert bool((out[~valid] == 0).all())


def run_batch(rnn: nn.RNNBase, state: RowState, batch: Batch) -> torch.Tensor:
    hx = state.begin(batch)
    with torch.no_grad():
        out, final = run_rnn(rnn, features(batch["x"]), state.is_first, batch.valid, hx)
    state.update(final)
    return out


LENGTHS = [5, 9, 3, 12, 7, 4, 6, 1, 10]


@pytest.mark.parametrize("boundary", ["pad", "pack"])
@pytest.mark.parametrize(("kind", "layout"), [("lstm", "TB"), ("gru", "BT")])
def test_row_state_over_a_loader_matches_each_stream_run_alone(boundary: str, kind: str, layout: str) -> None:
    rnn = make_rnn(kind, 2, batch_first=layout == "BT")
    want = stream_reference(rnn, LENGTHS)
    state, seen = RowState(), set[Key]()
    with StreamLoader(CountingSource(LENGTHS), 3, 4, boundary=boundary, layout=layout, seed=1) as loader:
        for batch in loader:
            check_batch(batch, run_batch(rnn, state, batch), want, seen)
    assert seen == set(want)
    assert state.unknown_total == 0


def regrid(batch: Batch, order: list[int], rows: int) -> Batch:
    """``batch`` (TB) with its row ``b`` moved to row ``order[b]`` of ``rows``; the other rows all padding."""
    index = torch.tensor(order)

    def move(t: torch.Tensor, fill: int | bool) -> torch.Tensor:
        out = torch.full((t.shape[0], rows, *t.shape[2:]), fill, dtype=t.dtype)
        out[:, index] = t
        return out

    reset = torch.zeros(rows, dtype=torch.bool)
    reset[index] = batch.reset
    return Batch(
        data={"x": move(batch["x"], 0)}, is_first=move(batch.is_first, False), reset=reset,
        valid=move(batch.valid, False), stream=move(batch.stream, -1), position=move(batch.position, -1),
        replayed=move(batch.replayed, False),
    )  # fmt: skip


def resumed_batches(loader: StreamLoader, mark_first: bool) -> Iterator[Batch]:
    """The loader's next batches regridded from 3 rows to 5 in a shuffled order, as a run on another batch size
    would lay the same streams out; ``mark_first`` also sets ``is_first`` on each row's first valid step after
    the resume, as the loader does after a resume on another global batch."""
    g = torch.Generator().manual_seed(5)
    for i, batch in enumerate(loader):
        moved = regrid(batch, torch.randperm(5, generator=g)[:3].tolist(), 5)
        if mark_first and i == 0:
            valid = moved.valid
            first_t = valid.int().argmax(0)
            cols = valid.any(0).nonzero().squeeze(1)
            moved.is_first[first_t[cols], cols] = True
        yield moved


def run_to_checkpoint(rnn: nn.RNNBase, boundary: str, path: str, seen: set[Key]) -> dict[str, Any]:
    """Two batches of 3 rows through ``RowState``, then the loader's and the rows' state saved together."""
    want, state = stream_reference(rnn, LENGTHS), RowState()
    with StreamLoader(CountingSource(LENGTHS), 3, 4, boundary=boundary, seed=3) as loader:
        for _, batch in zip(range(2), loader, strict=False):
            check_batch(batch, run_batch(rnn, state, batch), want, seen)
        torch.save({"loader": loader.state_dict(), "rows": state.state_dict()}, path)
    checkpoint: dict[str, Any] = torch.load(path)
    in_flight = [k for k in checkpoint["rows"]["keys"] if k[2] < LENGTHS[k[1]]]
    assert len(in_flight) >= 2  # streams cross the checkpoint, so the resume has states to restore
    return checkpoint


@pytest.mark.parametrize("boundary", ["pad", "pack"])
@pytest.mark.parametrize("mark_first", [False, True])
def test_a_saved_row_state_follows_each_stream_into_its_new_row_after_a_regrid(
    boundary: str, mark_first: bool, tmp_path: Path
) -> None:
    rnn = make_rnn("lstm", 2)
    want, seen = stream_reference(rnn, LENGTHS), set[Key]()
    checkpoint = run_to_checkpoint(rnn, boundary, str(tmp_path / "checkpoint.pt"), seen)
    restored = RowState(on_unknown="raise")
    restored.load_state_dict(checkpoint["rows"])
    with StreamLoader(CountingSource(LENGTHS), 3, 4, boundary=boundary, seed=3) as loader:
        loader.load_state_dict(checkpoint["loader"])
        for batch in resumed_batches(loader, mark_first):
            check_batch(batch, run_batch(rnn, restored, batch), want, seen)
    assert seen == set(want)
    assert restored.unknown_total == 0


@pytest.mark.parametrize("boundary", ["pad", "pack"])
def test_a_saved_row_state_follows_each_stream_on_a_loader_of_another_batch_size(boundary: str, tmp_path: Path) -> None:
    rnn = make_rnn("gru", 1)
    want, seen = stream_reference(rnn, LENGTHS), set[Key]()
    checkpoint = run_to_checkpoint(rnn, boundary, str(tmp_path / "checkpoint.pt"), seen)
    restored = RowState(on_unknown="raise")
    restored.load_state_dict(checkpoint["rows"])
    with StreamLoader(CountingSource(LENGTHS), 5, 4, boundary=boundary, seed=3) as loader:
        loader.load_state_dict(checkpoint["loader"])  # another global batch: the epoch's rest is re-planned
        for batch in loader:
            check_batch(batch, run_batch(rnn, restored, batch), want, seen)
    assert seen == set(want)
    assert restored.unknown_total == 0


def test_without_its_saved_state_a_continuing_row_gets_zeros_and_is_flagged() -> None:
    state = RowState()
    with StreamLoader(CountingSource(LENGTHS), 3, 4, seed=1) as loader:
        batches = iter(loader)
        state.begin(next(batches))
        state.update(torch.ones(1, 3, 5))
        state.reset()
        second = next(batches)
        hx = state.begin(second)
    assert hx is None
    assert not bool(second.reset.all())
    assert state.unknown is not None
    assert state.unknown.tolist() == (~second.reset).tolist()
    assert state.unknown_total == int((~second.reset).sum())
    strict = RowState(on_unknown="raise")
    with pytest.raises(StateError, match="continue a stream whose state is not known"):
        strict.begin(second)


def synthetic(stream: list[int], position: list[int], is_first: list[bool] | None = None) -> Batch:
    """A one-step (T=1) batch: row b at (stream[b], position[b]); stream -1 is padding."""
    s, p = torch.tensor([stream]), torch.tensor([position])
    first = torch.tensor([is_first]) if is_first is not None else torch.zeros_like(s, dtype=torch.bool)
    return Batch(data={}, is_first=first, reset=first[0], valid=s >= 0, stream=s, position=p,
                 replayed=torch.zeros_like(first))  # fmt: skip


def test_a_padding_row_keeps_its_state_and_two_rows_claiming_one_stream_are_flagged() -> None:
    state = RowState(batch_dim=0)
    assert state.begin(synthetic([4, 6, 8], [0, 0, 0], [True, True, True])) is None
    state.update(torch.tensor([[1.0], [2.0], [3.0]]))
    hx = state.begin(synthetic([-1, 8, 6], [-1, 1, 1]))  # row 0 pads; rows 1 and 2 swap streams
    assert isinstance(hx, torch.Tensor)
    assert hx.tolist() == [[1.0], [3.0], [2.0]]
    state.update(hx)
    saved = state.state_dict()
    assert saved["keys"] == [[0, 4, 1, 0], [0, 8, 2, 0], [0, 6, 2, 0]]
    saved["keys"][1] = [0, 6, 2, 0]  # two rows now claim stream 6 at position 2
    del saved["digest"]  # (unsealed, as an older streamcli saved it: the seal would refuse the change first)
    state.load_state_dict(saved)
    hx = state.begin(synthetic([6, 4], [2, 1]))
    assert isinstance(hx, torch.Tensor)
    assert hx.tolist() == [[0.0], [1.0]]
    assert state.unknown is not None and state.unknown.tolist() == [True, False]


def test_a_segment_that_begins_where_the_saved_one_ended_is_not_joined_after_a_resume() -> None:
    state = RowState(batch_dim=0, segment=4)
    state.begin(synthetic([2, 3], [2, 1], [True, True]))
    state.update(torch.tensor([[5.0], [7.0]]))
    state.load_state_dict(state.state_dict())  # stream 2 goes on at 3, stream 3 at 2
    hx = state.begin(synthetic([3, 2], [2, 3], [True, True]))  # is_first after a resume, mid-segment: rejoined
    assert isinstance(hx, torch.Tensor)
    assert hx.tolist() == [[7.0], [5.0]]
    state.update(torch.tensor([[8.0], [9.0]]))
    state.load_state_dict(state.state_dict())  # stream 3 goes on at 3, stream 2 at 4
    hx = state.begin(synthetic([2, 3], [4, 3], [True, True]))  # stream 2 at 4 begins segment 1: fresh
    assert isinstance(hx, torch.Tensor)
    assert hx.tolist() == [[0.0], [8.0]]


def test_row_state_refuses_a_foreign_state_and_a_state_of_the_wrong_size() -> None:
    state = RowState()
    with pytest.raises(StateError, match="not a RowState state"):
        state.load_state_dict({"format": "other"})
    good = {"format": "streamcli.RowState/1", "batch_dim": 1, "tuple": False, "keys": [[0, 1, 2, 0]]}
    with pytest.raises(StateError, match="does not hold 1 rows"):
        state.load_state_dict({**good, "states": [torch.zeros(1, 2, 5)]})
    with pytest.raises(StateError, match="batch_dim=0"):
        state.load_state_dict({**good, "batch_dim": 0, "states": [torch.zeros(1, 1, 5)]})
    with pytest.raises(StateError, match="'keys' have shape"):
        state.load_state_dict({**good, "keys": [[1, 2]], "states": [torch.zeros(1, 1, 5)]})
    state.begin(synthetic([1], [0], [True]))
    with pytest.raises(ConfigError, match="must hold the batch's 1 rows"):
        state.update(torch.zeros(1, 2, 5))
    with pytest.raises(RuntimeError, match="begin was called twice"):
        state.begin(synthetic([1], [0], [True]))


def test_float32_agrees_with_the_reference_to_rounding() -> None:
    """Not bit for bit: the module multiplies the inputs of all steps at once, the reference one step at a time."""
    rnn = make_rnn("lstm", 2, dtype=torch.float32)
    is_first, valid = random_flags(16, 8, seed=4)
    x = torch.randn(16, 8, 3)
    with torch.no_grad():
        out, _ = run_rnn(rnn, x, is_first, valid)
        ref, _ = reference(rnn, x, is_first, valid, None)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_importing_streamcli_imports_torch_only_once_a_tbptt_name_is_used() -> None:
    code = (
        "import sys, streamcli; assert 'torch' not in sys.modules, 'torch imported'; "
        "assert streamcli.RowState is streamcli.tbptt.RowState and 'torch' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
