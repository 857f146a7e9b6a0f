"""Common torch.nn building blocks on the simulated NPU (torch_mspti.sim): each runs forward and
backward on ``npu`` and on CPU from the same seed, and the outputs, input and parameter gradients,
buffers (batch-norm running statistics) and, for optimizers, the parameters and optimizer state
after 3 steps must be equal within float32 tolerances. One more check profiles a small conv net
step and looks for the convolution kernels in the trace.

Every check runs in one child process (sim_support.run_checks), launch mode direct.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sim_support import require_simulator, result, run_checks

CHECKS = r'''
import copy, json, os, tempfile, traceback
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

def _to(x, dev):
    if isinstance(x, torch.Tensor):
        return x.detach().clone().to(dev)
    if isinstance(x, (tuple, list)):
        return type(x)(_to(e, dev) for e in x)
    return x

def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, nn.utils.rnn.PackedSequence):
        return [x.data]
    if isinstance(x, (tuple, list)):
        return [t for e in x for t in _tensors(e)]
    return []

def _close(npu, cpu, what, on_npu=True, **tol):
    """assert_close of an npu result and its CPU reference; on_npu=False: no device check."""
    if cpu is None or npu is None:
        assert cpu is None and npu is None, f"{what}: cpu {cpu is None and 'None'} vs npu {npu is None and 'None'}"
        return 0
    assert not on_npu or npu.device.type == "npu", f"{what} is on {npu.device}"
    assert_close(npu.cpu(), cpu, msg=lambda m: f"{what}: {m}", **tol)
    return 1

def _step(module, inputs, dev, grad_inputs, pack):
    ins = [_to(x, dev) for x in inputs]
    for i in grad_inputs:
        ins[i].requires_grad_()
    args = pack(ins) if pack else ins
    outs = _tensors(module(*args))  # pooling indices too
    gen = torch.Generator().manual_seed(7)  # the same output weights on both devices
    loss = sum((t * torch.randn(t.shape, generator=gen).to(dev)).sum() for t in outs if t.is_floating_point())
    loss.backward()
    return outs, [ins[i].grad for i in grad_inputs]

def compare(make, inputs, grad_inputs=(0,), steps=1, pack=None, **tol):
    """Runs `make()` (a module) on CPU and a deep copy on npu `steps` times; returns the number of
    tensors compared (outputs, input and parameter gradients, buffers)."""
    torch.manual_seed(0)
    ref = make()
    dut = copy.deepcopy(ref).to("npu")
    n = 0
    for step in range(steps):
        oc, gc = _step(ref, inputs, "cpu", grad_inputs, pack)
        on, gn = _step(dut, inputs, "npu", grad_inputs, pack)
        assert len(oc) == len(on) and oc, "no outputs"
        for i, (a, b) in enumerate(zip(on, oc)):
            n += _close(a, b, f"step {step} output {i}", **tol)
        for i, (a, b) in enumerate(zip(gn, gc)):
            n += _close(a, b, f"step {step} grad of input {i}", **tol)
    dp = dict(dut.named_parameters())
    for name, p in ref.named_parameters():
        n += _close(dp[name].grad, p.grad, f"grad of {name}", **tol)
    db = dict(dut.named_buffers())
    for name, b in ref.named_buffers():
        n += _close(db[name], b, f"buffer {name}", **tol)
    return n

class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
    def forward(self, *args):
        return self.fn(*args)

class WithParams(nn.Module):
    """A loss or functional block behind a Linear, so that parameters get gradients too."""
    def __init__(self, inner, features):
        super().__init__()
        self.lin = nn.Linear(features, features)
        self.inner = inner
    def forward(self, x, *rest):
        return self.inner(self.lin(x), *rest)

torch.manual_seed(123)
X1 = torch.randn(2, 4, 11)
X2 = torch.randn(2, 4, 9, 10)
X3 = torch.randn(2, 3, 5, 6, 6)
SEQ = torch.randn(3, 6, 5)  # batch_first (batch 3, time 6, features 5)
EMB = torch.tensor([[1, 0, 3, 7], [0, 9, 3, 3]])

class _MHA(nn.Module):
    def __init__(self, m, kw):
        super().__init__()
        self.m, self.kw = m, kw
    def forward(self, x, *masks):
        kw = dict(self.kw)
        if masks:
            kw["key_padding_mask"] = masks[0]
        return self.m(x, x, x, **kw)

class _Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    def forward(self, tgt, memory):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        return self.m(tgt, memory, tgt_mask=mask, tgt_is_causal=True)

class _BagWithOffsets(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 5, mode="sum")
    def forward(self, idx, offsets, weights):
        return self.bag(idx, offsets, per_sample_weights=weights)

class _LSTMWithState(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.LSTM(5, 4, 2, batch_first=True)
    def forward(self, x, h, c):
        return self.m(x, (h, c))

def _sdpa(**kw):
    return Fn(lambda q, k, v, *mask: F.scaled_dot_product_attention(q, k, v, *mask, **kw))

def _packed(ins):
    return [nn.utils.rnn.pack_padded_sequence(ins[0], torch.tensor([6, 4, 2]), batch_first=True)]

def _ctc(lp, targets):
    T, N = lp.shape[0], lp.shape[1]
    return F.ctc_loss(lp.log_softmax(2), targets, torch.full((N,), T, dtype=torch.long),
                      torch.tensor([3, 2], dtype=torch.long))

Q = torch.randn(2, 2, 5, 8)
BOOL_MASK = torch.rand(5, 5) > 0.3
BOOL_MASK[:, 0] = True
FLOAT_MASK = torch.randn(2, 1, 5, 5)
LOGITS = torch.randn(6, 5)
LABELS = torch.tensor([0, 2, 4, 2, 1, 3])
TARGET = torch.rand(6, 5)

BLOCKS = {
    "conv1d": lambda: compare(lambda: nn.Conv1d(4, 6, 3, stride=2, padding=1), [X1]),
    "conv2d": lambda: compare(lambda: nn.Conv2d(4, 6, 3, padding=(1, 2), dilation=(1, 2), groups=2), [X2]),
    "conv2d_nobias": lambda: compare(lambda: nn.Conv2d(4, 2, (2, 3), stride=(2, 1), bias=False), [X2]),
    "conv3d": lambda: compare(lambda: nn.Conv3d(3, 4, 3, padding=1), [X3]),
    "conv_transpose1d": lambda: compare(lambda: nn.ConvTranspose1d(4, 3, 3, stride=2, output_padding=1), [X1]),
    "conv_transpose2d": lambda: compare(lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2), [X2]),
    "maxpool1d": lambda: compare(lambda: nn.MaxPool1d(3, stride=2, return_indices=True), [X1]),
    "maxpool2d": lambda: compare(lambda: nn.MaxPool2d(2, return_indices=True, ceil_mode=True), [X2]),
    "avgpool1d": lambda: compare(lambda: nn.AvgPool1d(3, stride=2, padding=1), [X1]),
    "avgpool2d": lambda: compare(lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), [X2]),
    "adaptive_avgpool2d": lambda: compare(lambda: nn.AdaptiveAvgPool2d((4, 3)), [X2]),
    "adaptive_maxpool2d": lambda: compare(lambda: nn.AdaptiveMaxPool2d((4, 3), return_indices=True), [X2]),
    "batchnorm1d_train": lambda: compare(lambda: nn.BatchNorm1d(4), [X1], steps=3),
    "batchnorm2d_train": lambda: compare(lambda: nn.BatchNorm2d(4, momentum=0.3), [X2], steps=3),
    "batchnorm2d_eval": lambda: compare(lambda: _eval(nn.BatchNorm2d(4)), [X2], steps=2),
    "layernorm": lambda: compare(lambda: nn.LayerNorm([9, 10]), [X2]),
    "groupnorm": lambda: compare(lambda: nn.GroupNorm(2, 4), [X2]),
    "instancenorm2d": lambda: compare(lambda: nn.InstanceNorm2d(4, affine=True, track_running_stats=True), [X2],
                                      steps=2),
    "embedding": lambda: compare(lambda: nn.Embedding(10, 5, padding_idx=0), [EMB], grad_inputs=()),
    "embeddingbag": lambda: compare(lambda: nn.EmbeddingBag(10, 5, mode="mean"), [EMB], grad_inputs=()),
    "embeddingbag_offsets": lambda: compare(_BagWithOffsets, [EMB.flatten(), torch.tensor([0, 3, 3]), torch.rand(8)],
                                            grad_inputs=(2,)),
    "rnn_tanh": lambda: compare(lambda: nn.RNN(5, 4, 2, bidirectional=True, batch_first=True), [SEQ]),
    "rnn_relu": lambda: compare(lambda: nn.RNN(5, 4, nonlinearity="relu", batch_first=True), [SEQ]),
    "lstm": lambda: compare(lambda: nn.LSTM(5, 4, 2, bidirectional=True, batch_first=True), [SEQ], steps=2),
    "lstm_state": lambda: compare(_LSTMWithState, [SEQ, torch.randn(2, 3, 4), torch.randn(2, 3, 4)],
                                  grad_inputs=(0, 1, 2)),
    "lstm_packed": lambda: compare(lambda: nn.LSTM(5, 4, batch_first=True), [SEQ], pack=_packed),
    "gru": lambda: compare(lambda: nn.GRU(5, 4, 2, bidirectional=True, batch_first=True), [SEQ], steps=2),
    "gru_seq_first": lambda: compare(lambda: nn.GRU(5, 4), [SEQ]),
    "lstm_cell": lambda: compare(lambda: nn.LSTMCell(5, 4), [SEQ[:, 0]]),
    "gru_cell": lambda: compare(lambda: nn.GRUCell(5, 4), [SEQ[:, 0]]),
    "multihead_attention": lambda: compare(lambda: _MHA(nn.MultiheadAttention(8, 2, batch_first=True), {}),
                                           [torch.randn(2, 5, 8)]),
    "multihead_attention_padding": lambda: compare(
        lambda: _MHA(nn.MultiheadAttention(8, 2, batch_first=True), {"need_weights": False}),
        [torch.randn(2, 5, 8), torch.tensor([[False] * 5, [False] * 3 + [True] * 2])]),
    "sdpa": lambda: compare(lambda: _sdpa(), [Q, Q.flip(0), Q.flip(1)], grad_inputs=(0, 1, 2)),
    "sdpa_causal": lambda: compare(lambda: _sdpa(is_causal=True), [Q, Q.flip(0), Q.flip(1)], grad_inputs=(0, 1, 2)),
    "sdpa_bool_mask": lambda: compare(lambda: _sdpa(), [Q, Q.flip(0), Q.flip(1), BOOL_MASK], grad_inputs=(0, 1, 2)),
    "sdpa_float_mask": lambda: compare(lambda: _sdpa(scale=0.5), [Q, Q.flip(0), Q.flip(1), FLOAT_MASK],
                                       grad_inputs=(0, 1, 2)),
    "sdpa_3d": lambda: compare(lambda: _sdpa(), [Q[0], Q[1], Q[0]], grad_inputs=(0, 1, 2)),
    "transformer_encoder_layer": lambda: compare(
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), [torch.randn(2, 5, 8)]),
    "transformer_decoder_layer": lambda: compare(_Decoder, [torch.randn(2, 5, 8), torch.randn(2, 4, 8)],
                                                 grad_inputs=(0, 1)),
    "cross_entropy": lambda: compare(lambda: WithParams(nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=2), 5),
                                     [LOGITS, LABELS]),
    "cross_entropy_probs": lambda: compare(lambda: WithParams(nn.CrossEntropyLoss(), 5), [LOGITS, TARGET.softmax(1)]),
    "nll": lambda: compare(lambda: WithParams(Fn(lambda x, t: F.nll_loss(x.log_softmax(1), t, reduction="sum")), 5),
                           [LOGITS, LABELS]),
    "mse": lambda: compare(lambda: WithParams(nn.MSELoss(), 5), [LOGITS, TARGET]),
    "l1": lambda: compare(lambda: WithParams(nn.L1Loss(), 5), [LOGITS, TARGET]),
    "smooth_l1": lambda: compare(lambda: WithParams(nn.SmoothL1Loss(beta=0.5), 5), [LOGITS, TARGET]),
    "huber": lambda: compare(lambda: WithParams(nn.HuberLoss(delta=0.7), 5), [LOGITS, TARGET]),
    "bce": lambda: compare(lambda: WithParams(Fn(lambda x, t: F.binary_cross_entropy(x.sigmoid(), t)), 5),
                           [LOGITS, TARGET]),
    "bce_with_logits": lambda: compare(lambda: WithParams(nn.BCEWithLogitsLoss(pos_weight=torch.full((5,), 2.0)), 5),
                                       [LOGITS, TARGET]),
    "kl_div": lambda: compare(lambda: WithParams(Fn(lambda x, t: F.kl_div(x.log_softmax(1), t, reduction="batchmean")),
                                                 5), [LOGITS, TARGET.softmax(1)]),
    "ctc": lambda: compare(lambda: Fn(_ctc), [torch.randn(8, 2, 5), torch.tensor([[1, 2, 3], [4, 1, 0]])]),
}

def _eval(m):
    with torch.no_grad():
        m.running_mean.uniform_(-1, 1)
        m.running_var.uniform_(0.5, 2)
    return m.eval()


def check_blocks():
    out = {}
    for name, run in BLOCKS.items():
        try:
            out[name] = {"ok": True, "compared": run()}
        except Exception:  # noqa: BLE001
            out[name] = {"ok": False, "error": traceback.format_exc()}
    return out

O = torch.optim
OPTIMIZERS = {
    "sgd_momentum": lambda p, **kw: O.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, **kw),
    "sgd_nesterov": lambda p, **kw: O.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, **kw),
    "adam": lambda p, **kw: O.Adam(p, lr=0.05, weight_decay=0.01, **kw),
    "adamw": lambda p, **kw: O.AdamW(p, lr=0.05, amsgrad=True, **kw),
    "rmsprop": lambda p, **kw: O.RMSprop(p, lr=0.01, momentum=0.5, centered=True, **kw),
    "adagrad": lambda p, **kw: O.Adagrad(p, lr=0.1, weight_decay=0.01, **kw),
}

def _train(make_opt, dev, clip):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to(dev)
    x, y = torch.randn(5, 6).to(dev), torch.randn(5, 3).to(dev)
    opt = make_opt(model.parameters())
    norms = []
    for _ in range(3):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        if clip is not None:
            norms.append(nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=clip))
        opt.step()
    state = [(k, t) for s in opt.state.values() for k, t in s.items() if isinstance(t, torch.Tensor)]
    return list(model.parameters()), state, norms

def _compare_optimizer(make, variant, clip=None):
    kw = {"foreach": False} if variant == "for_loop" else {variant: True}
    make_opt = lambda p: make(p, **kw)
    pc, sc, nc = _train(make_opt, "cpu", clip)
    pn, sn, nn_ = _train(make_opt, "npu", clip)
    n = sum(_close(a, b, f"parameter {i} after 3 steps") for i, (a, b) in enumerate(zip(pn, pc)))
    assert len(sc) == len(sn) and sc, "optimizer state differs in size"
    for (key, a), (_, b) in zip(sn, sc):
        # torch keeps the step count of a non-fused optimizer on the host, whatever the device
        n += _close(a, b, f"optimizer state {key}", on_npu=key != "step")
    n += sum(_close(a, b, f"clipped norm {i}") for i, (a, b) in enumerate(zip(nn_, nc)))
    return n

def check_optimizers():
    out = {}
    for name, make in OPTIMIZERS.items():
        for variant in ("for_loop", "foreach", "fused"):
            key = f"{name}-{variant}"
            try:
                out[key] = {"ok": True, "compared": _compare_optimizer(make, variant)}
            except Exception as exc:  # noqa: BLE001
                out[key] = {"ok": False, "type": type(exc).__name__, "module": type(exc).__module__,
                            "error": traceback.format_exc()}
    for clip in (False, True):
        key = f"clip_grad_norm-{'foreach' if clip else 'for_loop'}"
        try:
            out[key] = {"ok": True, "compared": _compare_optimizer(OPTIMIZERS["sgd_momentum"], "for_loop", clip)}
        except Exception:  # noqa: BLE001
            out[key] = {"ok": False, "error": traceback.format_exc()}
    return out

def check_fused_reference():
    """Which optimizers torch itself refuses to fuse (on CPU as on npu), with its message."""
    out = {}
    for name, make in OPTIMIZERS.items():
        try:
            make([torch.zeros(2, requires_grad=True)], fused=True)
            out[name] = None
        except Exception as exc:  # noqa: BLE001
            out[name] = str(exc)
    return out

def check_dropout():
    torch.manual_seed(0)
    x = torch.ones(40000, device="npu", requires_grad=True)
    y = F.dropout(x, p=0.3, training=True)
    y.sum().backward()
    kept = y.detach().cpu() != 0
    return {"device": str(y.device), "zero_fraction": 1 - kept.float().mean().item(),
            "kept_values": sorted({round(v, 5) for v in y.detach().cpu()[kept].tolist()}),
            "grad_matches_mask": bool(torch.equal(x.grad.cpu(), kept.float() / 0.7)),
            "eval_is_identity": bool(torch.equal(F.dropout(x, 0.3, training=False).detach().cpu(), x.detach().cpu()))}

def check_conv_profile():
    import torch_mspti
    from torch.profiler import profile, ProfilerActivity
    assert hasattr(torch_mspti, "use_library"), "torch-mspti profiler plugin is not importable"
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3), nn.Flatten(),
                        nn.Linear(4 * 10 * 10, 2)).npu()
    x = torch.randn(2, 3, 12, 12, device="npu")
    step = lambda: net(x).square().sum().backward()
    step()
    torch.npu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step()
        torch.npu.synchronize()
    path = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.unlink(path)
    return [{"name": e["name"], "type": e.get("args", {}).get("type")} for e in events if e.get("cat") == "kernel"]
'''

BLOCKS = [
    "conv1d",
    "conv2d",
    "conv2d_nobias",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "maxpool1d",
    "maxpool2d",
    "avgpool1d",
    "avgpool2d",
    "adaptive_avgpool2d",
    "adaptive_maxpool2d",
    "batchnorm1d_train",
    "batchnorm2d_train",
    "batchnorm2d_eval",
    "layernorm",
    "groupnorm",
    "instancenorm2d",
    "embedding",
    "embeddingbag",
    "embeddingbag_offsets",
    "rnn_tanh",
    "rnn_relu",
    "lstm",
    "lstm_state",
    "lstm_packed",
    "gru",
    "gru_seq_first",
    "lstm_cell",
    "gru_cell",
    "multihead_attention",
    "multihead_attention_padding",
    "sdpa",
    "sdpa_causal",
    "sdpa_bool_mask",
    "sdpa_float_mask",
    "sdpa_3d",
    "transformer_encoder_layer",
    "transformer_decoder_layer",
    "cross_entropy",
    "cross_entropy_probs",
    "nll",
    "mse",
    "l1",
    "smooth_l1",
    "huber",
    "bce",
    "bce_with_logits",
    "kl_div",
    "ctc",
]

OPTIMIZERS = ["sgd_momentum", "sgd_nesterov", "adam", "adamw", "rmsprop", "adagrad"]
# torch.optim implements fused=True for these only (its own refusal for the others is checked).
FUSED = {"sgd_momentum", "sgd_nesterov", "adam", "adamw", "adagrad"}


@pytest.fixture(scope="module")
def nn_results():
    require_simulator()
    return run_checks(CHECKS, {"launch_mode": "direct"})


def test_every_block_ran(nn_results):
    assert set(result(nn_results, "blocks")) == set(BLOCKS)


@pytest.mark.parametrize("block", BLOCKS)
def test_block_matches_cpu(nn_results, block):
    r = result(nn_results, "blocks")[block]
    assert r["ok"], r["error"]
    assert r["compared"] >= 2  # at least one output and one gradient


@pytest.mark.parametrize("variant", ["for_loop", "foreach", "fused"])
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_optimizer_matches_cpu(nn_results, optimizer, variant):
    r = result(nn_results, "optimizers")[f"{optimizer}-{variant}"]
    if variant == "fused" and optimizer not in FUSED:
        # torch's own refusal, the same as on CPU, not an error of the simulated device
        refusal = result(nn_results, "fused_reference")[optimizer]
        assert refusal and not r["ok"] and refusal in r["error"], r
        return
    assert r["ok"], r["error"]
    assert r["compared"] >= 6  # 4 parameters + optimizer state


@pytest.mark.parametrize("variant", ["for_loop", "foreach"])
def test_clip_grad_norm_matches_cpu(nn_results, variant):
    r = result(nn_results, "optimizers")[f"clip_grad_norm-{variant}"]
    assert r["ok"], r["error"]
    assert r["compared"] >= 4 + 3  # parameters and the 3 norms


def test_fused_support_is_torchs(nn_results):
    refusals = result(nn_results, "fused_reference")
    assert {name for name, msg in refusals.items() if msg is None} == FUSED


def test_dropout_statistics(nn_results):
    v = result(nn_results, "dropout")
    assert v["device"] == "npu:0"
    assert abs(v["zero_fraction"] - 0.3) < 0.02
    assert v["kept_values"] == [round(1 / 0.7, 5)]
    assert v["grad_matches_mask"] and v["eval_is_identity"]


def test_conv_kernels_in_profile(nn_results):
    kernels = result(nn_results, "conv_profile")
    names = [k["name"] for k in kernels]
    # Two convolutions forward; both weights get a gradient; only the second one's input needs one.
    assert names.count("Conv2D") == 2, names
    assert names.count("Conv2DBackpropFilter") == 2, names
    assert names.count("Conv2DBackpropInput") == 1, names
    conv = {k["type"] for k in kernels if k["name"].startswith("Conv2D")}
    assert conv == {"KERNEL_AICORE"}, conv
