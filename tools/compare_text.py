"""compare_pytorch.py --workloads bert: the data, the program and the PyTorch loop.

The model is transformers' BertForSequenceClassification (4 layers, width 256, 4 heads,
intermediate 1024, BERT's vocabulary of 30,522, 3 labels, its default dropout 0.1), random
weights from seed 0. The texts are 2,048 of exactly 128 random token ids (no padding, so both
sides compute the same), labels in 0..2. gputrain trains the module exported by
tools/export_model.py --hf on the .npz tools/prepare_text.py's format holds; PyTorch trains the
module itself, the data in memory, fused AdamW with the same two parameter groups.
"""
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".pydeps-text"))
TEXTS, LENGTH, CLASSES = 2048, 128, 3
SHAPE = dict(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
             max_position_embeddings=512, num_labels=CLASSES)


def prepare(folder):
    """Writes folder/{bert/, bert.pt2, train.npz, test.npz}; returns gputrain's flags for them."""
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(0)
    BertForSequenceClassification(BertConfig(**SHAPE)).save_pretrained(os.path.join(folder, "bert"))
    rng = np.random.default_rng(0)
    for split, n in (("train", TEXTS), ("test", 256)):
        np.savez(os.path.join(folder, split + ".npz"),
                 input_ids=rng.integers(0, SHAPE["vocab_size"], (n, LENGTH), dtype=np.int32),
                 lengths=np.full(n, LENGTH, dtype=np.int32), labels=rng.integers(0, CLASSES, n, dtype=np.int64))
    program = os.path.join(folder, "bert.pt2")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, ".pydeps-text"))
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_model.py"), "--hf", os.path.join(folder, "bert"),
                    "--task", "classification", "--out", program], check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return ["--model", program, "--train_file", os.path.join(folder, "train.npz"),
            "--test_file", os.path.join(folder, "test.npz")]


class BertLoop:
    """The same module in PyTorch, timed as compare_pytorch's PyTorchLoop is."""

    def __init__(self, folder, wl, sw, device, compiled):
        from transformers import BertForSequenceClassification
        model = BertForSequenceClassification.from_pretrained(os.path.join(folder, "bert")).to(device).train()
        data = np.load(os.path.join(folder, "train.npz"))
        self.ids = torch.from_numpy(data["input_ids"].astype(np.int64)).to(device)
        self.mask = torch.ones_like(self.ids)
        self.y = torch.from_numpy(data["labels"]).to(device)
        params = list(model.parameters())
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wl["weight_decay"]},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        self.opt = torch.optim.AdamW(groups, lr=wl["lr"], betas=(wl["beta1"], wl["beta2"]), fused=True)
        self.batch, self.device = sw["batch_size"], device
        self.amp = sw["use_amp"]
        self.amp_dtype = torch.bfloat16 if sw["amp_dtype"] == "bf16" else torch.float16
        self.model = torch.compile(model) if compiled else model
        self.at = 0
        self.loss_sum = torch.zeros((), device=device)

    def step(self):
        if self.at + self.batch > len(self.y):
            self.at = 0
        s = slice(self.at, self.at + self.batch)
        self.at += self.batch
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            loss = F.cross_entropy(self.model(input_ids=self.ids[s], attention_mask=self.mask[s]).logits, self.y[s])
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.loss_sum += loss.detach()

    def time(self, warmup, steps):
        for _ in range(warmup):
            self.step()
        t0 = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.loss_sum.item()
        return self.batch * steps / (time.perf_counter() - t0)
