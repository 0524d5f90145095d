"""PyTorch twins of gputrain's model families (src/models/*.cpp).

Each twin has the same parameter and buffer names and shapes as the C++ model and computes the
same forward, so gputrain's weights (an export, or a checkpoint's state) load with
`twin.load_state_dict(weights, strict=True)` and give gputrain's outputs, and a twin's
state_dict can start a gputrain run. tests/python/reference_check.py uses them to check
gputrain's training step against PyTorch's.

    make_twin(family, input_shape, outputs, width=0, depth=0, heads=0, stem="auto", dropout=0.0)

takes the arguments of gputrain's ModelSpec (src/models/family.h): `input_shape` is one sample
without the batch (C,H,W / T,F / F / C,D,H,W), `outputs` the classes or regression targets, and
0 / "auto" pick the model's default as the C++ side does.

Families: mlp, cnn, resnet18, resnet34, resnet50, lstm, gru, transformer, cnn3d. The resnets
are torchvision's (from the repo's .pydeps when importable and the width is torchvision's 64),
else a copy of torchvision's module tree below; either way with gputrain's stems.
"""
import math
import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.isdir(os.path.join(ROOT, ".pydeps")) and os.path.join(ROOT, ".pydeps") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, ".pydeps"))

FAMILIES = ("mlp", "cnn", "resnet18", "resnet34", "resnet50", "lstm", "gru", "transformer", "cnn3d")


class Mlp(nn.Module):
    """src/models/mlp.cpp: flatten, fc1 -> ReLU -> fc2 -> ReLU -> fc3."""

    def __init__(self, input_shape, outputs, width=0):
        super().__init__()
        hidden = width or 512
        self.fc1 = nn.Linear(math.prod(input_shape), hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, outputs)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))


class Cnn(nn.Module):
    """src/models/cnn.cpp: features = 2 x (Conv2d 3x3 no bias, BatchNorm2d, ReLU, MaxPool2d(2)), fc1, fc2."""

    def __init__(self, input_shape, outputs, width=0):
        super().__init__()
        w = width or 32
        c, h, wd = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(True), nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1, bias=False), nn.BatchNorm2d(2 * w), nn.ReLU(True), nn.MaxPool2d(2))
        # The C++ side sizes fc1 for H/4 x W/4 (at least 1 each), whatever the pools leave.
        self.fc1 = nn.Linear(2 * w * max(h // 4, 1) * max(wd // 4, 1), 128)
        self.fc2 = nn.Linear(128, outputs)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(self.features(x).flatten(1))))


# --- a copy of torchvision's resnet module tree (torchvision/models/resnet.py, groups 1, base
# width 64), used where torchvision is absent or the width is not torchvision's 64.
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """torchvision's v1.5 bottleneck: the stride on the 3x3 conv."""
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes, width=64):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.layer4 = self._make_layer(block, width * 8, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


RESNETS = {"resnet18": (BasicBlock, [2, 2, 2, 2]), "resnet34": (BasicBlock, [3, 4, 6, 3]),
           "resnet50": (Bottleneck, [3, 4, 6, 3])}


def torchvision_models():
    """torchvision.models, or None. Its C extension may not match this torch; the resnets need none."""
    if os.environ.get("GPUTRAIN_TEST_NO_TORCHVISION"):  # to exercise the copy above
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torchvision
        return torchvision.models
    except Exception:  # ImportError, or a broken install failing in its own way
        return None


def choose_stem(input_shape):
    """--stem auto (src/models/families.cpp): the small stem up to 64 px per side, else ImageNet's."""
    small = len(input_shape) == 3 and input_shape[1] <= 64 and input_shape[2] <= 64
    return "small" if small else "imagenet"


def make_resnet(family, input_shape, outputs, width=0, stem="auto"):
    """torchvision's resnet with gputrain's stem; `source` says which module tree it is."""
    w = width or 64
    stem = choose_stem(input_shape) if stem == "auto" else stem
    if stem not in ("small", "imagenet"):
        raise ValueError(f"stem {stem!r} (expected auto, small or imagenet)")
    tv = torchvision_models() if w == 64 else None  # torchvision fixes the width at 64
    if tv is not None:
        model = getattr(tv, family)(num_classes=outputs)
        model.source = "torchvision"
    else:
        block, layers = RESNETS[family]
        model = ResNet(block, layers, outputs, w)
        model.source = "copy of torchvision's module tree"
    channels = input_shape[0]
    if stem == "small":  # gputrain's small-image stem: 3x3 stride 1, no max-pool (the CIFAR variant)
        model.conv1 = nn.Conv2d(channels, w, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    elif channels != 3:  # torchvision's stem takes RGB; gputrain's takes the data's channels
        model.conv1 = nn.Conv2d(channels, w, 7, 2, 3, bias=False)
    return model


class Recurrent(nn.Module):
    """src/models/rnn.cpp: nn.LSTM / nn.GRU `rnn` (batch first), `fc` on the top layer's last step."""

    def __init__(self, kind, input_shape, outputs, width=0, depth=0, dropout=0.0):
        super().__init__()
        hidden, layers = width or 128, depth or 2
        rnn = nn.LSTM if kind == "lstm" else nn.GRU
        # Dropout acts between layers only (torch warns when it is set on one layer).
        self.rnn = rnn(input_shape[-1], hidden, num_layers=layers, batch_first=True,
                       dropout=dropout if layers > 1 else 0.0)
        self.fc = nn.Linear(hidden, outputs)

    def forward(self, x):
        if x.dim() == 2:  # a flat sample (F) is a sequence of one step
            x = x.unsqueeze(1)
        return self.fc(self.rnn(x)[0][:, -1])


class Transformer(nn.Module):
    """src/models/transformer.cpp: CLS token + tokens -> depth x TransformerEncoderLayer -> norm -> head.

    A T x F sample: each step a token via the `embed` Linear, plus learned `pos_embedding` (CLS
    slot first). An F sample: each feature a token, x_f * feature_weight[f] + feature_bias[f].
    LibTorch's encoder layer is sequence first (T, N, d), GELU, post-norm, dim_feedforward 4d.
    """

    def __init__(self, input_shape, outputs, width=0, depth=0, heads=0, dropout=0.0):
        super().__init__()
        d, heads, depth = width or 64, heads or 4, depth or 2
        if d % heads:
            raise ValueError(f"transformer width {d} is not a multiple of heads {heads}")
        self.sequence = len(input_shape) == 2
        features = input_shape[-1]
        bound = 1.0 / math.sqrt(d)
        if self.sequence:
            self.embed = nn.Linear(features, d)
            self.pos_embedding = nn.Parameter(torch.randn(1, input_shape[0] + 1, d) * 0.02)
        else:
            self.feature_weight = nn.Parameter(torch.empty(features, d).uniform_(-bound, bound))
            self.feature_bias = nn.Parameter(torch.empty(features, d).uniform_(-bound, bound))
        self.cls_token = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=dropout, activation="gelu",
                                       batch_first=False, norm_first=False)
            for _ in range(depth))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, outputs)

    def forward(self, x):
        if self.sequence:
            tokens = self.embed(x)  # (N, T, d)
        else:
            tokens = x.flatten(1).unsqueeze(-1) * self.feature_weight + self.feature_bias
        tokens = torch.cat([self.cls_token.expand(tokens.size(0), 1, -1), tokens], 1)
        if self.sequence:
            tokens = tokens + self.pos_embedding
        h = tokens.transpose(0, 1)  # sequence first, as LibTorch's layer takes it
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h[0]))  # the CLS token's final state


class Cnn3d(nn.Module):
    """src/models/cnn3d.cpp: depth x (Conv3d 3x3x3 no bias, BatchNorm3d, ReLU) in `blocks`, mean over D,H,W, fc.

    Each block halves D (while it is at least 2) and H, W (while both are at least 16); the
    widths are w, 2w, .. 16w, then flat.
    """

    def __init__(self, input_shape, outputs, width=0, depth=0):
        super().__init__()
        w, depth = width or 16, depth or 4
        cin, d, h, wd = input_shape
        blocks = []
        for i in range(depth):
            out = w << min(i, 4)
            sd = 2 if d >= 2 else 1
            shw = 2 if h >= 16 and wd >= 16 else 1
            blocks += [nn.Conv3d(cin, out, 3, stride=(sd, shw, shw), padding=1, bias=False), nn.BatchNorm3d(out),
                       nn.ReLU(True)]
            cin = out
            d, h, wd = (d - 1) // sd + 1, (h - 1) // shw + 1, (wd - 1) // shw + 1
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, outputs)

    def forward(self, x):
        return self.fc(self.blocks(x).mean((2, 3, 4)))


# Sample ranks each family takes (the Family's `ranks`; None = any).
RANKS = {"mlp": None, "cnn": (3,), "resnet18": (3,), "resnet34": (3,), "resnet50": (3,), "lstm": (2, 1),
         "gru": (2, 1), "transformer": (2, 1), "cnn3d": (4,)}


def make_twin(family, input_shape, outputs, width=0, depth=0, heads=0, stem="auto", dropout=0.0):
    """The twin of gputrain's `--model family` for samples of `input_shape` with `outputs` outputs."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r} (expected one of {', '.join(FAMILIES)})")
    input_shape = tuple(int(d) for d in input_shape)
    if RANKS[family] and len(input_shape) not in RANKS[family]:
        raise ValueError(f"{family} takes samples of rank {RANKS[family]}, got shape {input_shape}")
    if family == "mlp":
        return Mlp(input_shape, outputs, width)
    if family == "cnn":
        if input_shape[1] < 4 or input_shape[2] < 4:
            raise ValueError("cnn needs inputs of at least 4x4 pixels")
        return Cnn(input_shape, outputs, width)
    if family in RESNETS:
        return make_resnet(family, input_shape, outputs, width, stem)
    if family in ("lstm", "gru"):
        return Recurrent(family, input_shape, outputs, width, depth, dropout)
    if family == "transformer":
        return Transformer(input_shape, outputs, width, depth, heads, dropout)
    return Cnn3d(input_shape, outputs, width, depth)
