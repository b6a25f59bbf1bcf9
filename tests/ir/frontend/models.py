"""Test models for the ONNX importer (helpers, not tests), written in plain PyTorch and
exported with the TorchScript exporter (``dynamo=False``, no constant folding, so the
shape arithmetic PyTorch records stays in the graph for the importer to fold):

- ``resnet18(path)``: a torchvision-style ResNet-18 (conv-bn-relu stem, max pool, four
  stages of two basic blocks with residual adds, global average pool, fc);
- ``mobilenet_v2(path)``: MobileNetV2 (inverted residual blocks with depthwise 3x3
  convolutions and ReLU6, which exports as Clip), ``width_mult`` scaling the channels;
- ``bert_layer(path)``: one BERT-base encoder layer (multi-head self-attention from Q/K/V
  linears, softmax of scaled dot products, output projection, residual + LayerNorm, GELU
  feed-forward, residual + LayerNorm), batch 1.

``*_torch(...)`` give the PyTorch module (eval mode) and an example input, for comparing
with PyTorch itself (the benchmarks). Each function builds its model with a fixed seed
(weights random; batch-norm statistics random too, neither zeros nor ones, so that
importing them is tested), exports it to ``path`` and returns ``path``. torch is imported
only when a model is built.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

OPSET = 17


def _export(model: Any, example: Any, path: str | Path, input_names: list[str],
            output_names: list[str], dynamic_axes: dict | None = None) -> Path:
    import torch

    path = Path(path)
    model.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's
        torch.onnx.export(model, (example,), str(path), dynamo=False,
                          do_constant_folding=False, opset_version=OPSET,
                          input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic_axes)
    return path


def _randomize_batch_norms(model: Any, example_shape: tuple[int, ...], seed: int) -> None:
    """Give every BatchNorm2d random, realistic statistics: the batch statistics of one
    random input (so activations stay in a sane range), then random scale and shift."""
    import torch
    from torch import nn

    gen = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.momentum = 1.0  # running stats := this batch's
    model.train()
    with torch.no_grad():
        model(torch.randn(example_shape, generator=gen))
        for bn in bns:
            bn.weight.copy_(torch.rand(bn.num_features, generator=gen) + 0.5)
            bn.bias.copy_(torch.randn(bn.num_features, generator=gen) * 0.1)
            bn.running_var.mul_(torch.rand(bn.num_features, generator=gen) * 0.5 + 0.75)
            bn.momentum = 0.1
    model.eval()


# ----------------------------------------------------------------------------- ResNet-18


def _resnet18_module() -> Any:
    from torch import nn

    def conv_bn(cin: int, cout: int, k: int, stride: int, pad: int) -> list:
        return [nn.Conv2d(cin, cout, k, stride, pad, bias=False), nn.BatchNorm2d(cout)]

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.body = nn.Sequential(*conv_bn(cin, cout, 3, stride, 1), nn.ReLU(),
                                      *conv_bn(cout, cout, 3, 1, 1))
            self.down = (nn.Sequential(*conv_bn(cin, cout, 1, stride, 0))
                         if stride != 1 or cin != cout else nn.Identity())
            self.relu = nn.ReLU()

        def forward(self, x: Any) -> Any:
            return self.relu(self.body(x) + self.down(x))

    class ResNet18(nn.Module):
        def __init__(self, classes: int = 1000):
            super().__init__()
            self.stem = nn.Sequential(*conv_bn(3, 64, 7, 2, 3), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, classes)

        def forward(self, x: Any) -> Any:
            x = self.pool(self.blocks(self.stem(x)))
            return self.fc(x.flatten(1))

    model = ResNet18()
    for m in model.modules():  # torchvision's initialisation
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    return model


def resnet18_torch(batch: int = 1, size: int = 224) -> tuple[Any, Any]:
    """ResNet-18 as a PyTorch module in eval mode, and an example input."""
    import torch

    torch.manual_seed(0)
    model = _resnet18_module()
    _randomize_batch_norms(model, (max(batch, 2), 3, size, size), seed=1)
    example = torch.randn((batch, 3, size, size), generator=torch.Generator().manual_seed(2))
    return model.eval(), example


def resnet18(path: str | Path, batch: int = 1, size: int = 224) -> Path:
    """ResNet-18 for ``batch`` x 3 x ``size`` x ``size`` images, exported to ``path``;
    input ``data``, output ``logits`` (batch x 1000)."""
    return _export(*resnet18_torch(batch, size), path, ["data"], ["logits"])


# ---------------------------------------------------------------------------- MobileNetV2


def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision's channel rounding: to a multiple of ``divisor``, at least 90% of it."""
    out = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * value else out


def _mobilenet_v2_module(width_mult: float, classes: int) -> Any:
    from torch import nn

    def conv_bn_relu6(cin: int, cout: int, k: int, stride: int, groups: int = 1) -> Any:
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups,
                                       bias=False), nn.BatchNorm2d(cout), nn.ReLU6())

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int):
            super().__init__()
            hidden = cin * expand
            layers = [conv_bn_relu6(cin, hidden, 1, 1)] if expand != 1 else []
            layers += [conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),  # depthwise
                       nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            return x + self.body(x) if self.residual else self.body(x)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            cin = _divisible(32 * width_mult)
            last = _divisible(1280 * max(1.0, width_mult))
            layers = [conv_bn_relu6(3, cin, 3, 2)]
            for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                               (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
                cout = _divisible(c * width_mult)
                for i in range(n):
                    layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                    cin = cout
            layers.append(conv_bn_relu6(cin, last, 1, 1))
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

        def forward(self, x: Any) -> Any:
            return self.classifier(self.pool(self.features(x)).flatten(1))

    model = MobileNetV2()
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
    return model


def mobilenet_v2_torch(width_mult: float = 1.0, size: int = 224, batch: int = 1
                       ) -> tuple[Any, Any]:
    """MobileNetV2 as a PyTorch module in eval mode, and an example input."""
    import torch

    torch.manual_seed(0)
    model = _mobilenet_v2_module(width_mult, 1000)
    _randomize_batch_norms(model, (max(batch, 2), 3, size, size), seed=1)
    example = torch.randn((batch, 3, size, size), generator=torch.Generator().manual_seed(2))
    return model.eval(), example


def mobilenet_v2(path: str | Path, width_mult: float = 1.0, size: int = 224,
                 batch: int = 1) -> Path:
    """MobileNetV2 (``width_mult`` scales the channels, as torchvision's) for ``batch`` x 3
    x ``size`` x ``size`` images, exported to ``path``; input ``data``, output
    ``logits``."""
    return _export(*mobilenet_v2_torch(width_mult, size, batch), path, ["data"], ["logits"])


# ---------------------------------------------------------------------------- BERT layer


def _bert_layer_module(hidden: int, heads: int) -> Any:
    import torch
    from torch import nn

    class BertLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = heads
            self.scale = 1.0 / math.sqrt(hidden // heads)
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.attn_out = nn.Linear(hidden, hidden)
            self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.ffn_in = nn.Linear(hidden, 4 * hidden)
            self.ffn_out = nn.Linear(4 * hidden, hidden)
            self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)

        def split_heads(self, x: Any) -> Any:
            b, s, _ = x.shape  # recorded as Shape -> Gather: folded by the importer
            return x.view(b, s, self.heads, -1).transpose(1, 2)

        def forward(self, x: Any) -> Any:
            b, s, h = x.shape
            q, k, v = (self.split_heads(f(x)) for f in (self.query, self.key, self.value))
            scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
            context = torch.matmul(torch.softmax(scores, dim=-1), v)
            context = context.transpose(1, 2).reshape(b, s, h)
            x = self.attn_norm(x + self.attn_out(context))
            ffn = self.ffn_out(nn.functional.gelu(self.ffn_in(x)))
            return self.ffn_norm(x + ffn)

    model = BertLayer()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # BERT's initialisation, and LayerNorm parameters off 1 / 0
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * 0.02)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.02)
            elif isinstance(m, nn.LayerNorm):
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
    return model


def bert_layer_torch(seq: int = 128, hidden: int = 768, heads: int = 12
                     ) -> tuple[Any, Any]:
    """One BERT encoder layer as a PyTorch module in eval mode, and an example input."""
    import torch

    if hidden % heads:
        raise ValueError(f"hidden={hidden} is not divisible by heads={heads}")
    torch.manual_seed(0)
    model = _bert_layer_module(hidden, heads)
    example = torch.randn((1, seq, hidden), generator=torch.Generator().manual_seed(2))
    return model.eval(), example


def bert_layer(path: str | Path, seq: int = 128, hidden: int = 768, heads: int = 12,
               dynamic_seq: bool = True) -> Path:
    """One BERT encoder layer on a (1, ``seq``, ``hidden``) input, exported to ``path``;
    input ``hidden_states``, output ``output``. With ``dynamic_seq`` the sequence axis is
    exported as the symbolic ``seq``, so PyTorch records its ``Shape -> Gather -> Concat ->
    Reshape`` arithmetic (``from_onnx(..., shape=...)`` makes it static); without, the
    exporter writes those shapes as constants."""
    dynamic = {"hidden_states": {1: "seq"}, "output": {1: "seq"}} if dynamic_seq else None
    return _export(*bert_layer_torch(seq, hidden, heads), path, ["hidden_states"], ["output"],
                   dynamic)


__all__ = ["OPSET", "bert_layer", "bert_layer_torch", "mobilenet_v2", "mobilenet_v2_torch",
           "resnet18", "resnet18_torch"]
