#!/usr/bin/python3
"""A plain PyTorch-Python training loop of the DC demo recipe's model, for speed comparisons
with `nabu train` (tools/bench/compare_train_speed): a 2-layer BLSTM of 200 units per direction
over 129 log-spectrum bins, a linear layer to 129 x 20 embeddings, the deep clustering loss on
used bins (low-rank form, L2-normalised embeddings) and Adam, on preloaded random tensors.

    tools/bench/pytorch_dc_loop.py [--batch 16] [--frames 100] [--steps 40] [--threads 2]

Prints "<seconds per update>". Needs Debian's python3-torch (apt-get install python3-torch),
which nothing else in the project uses.
"""
import argparse
import time

import torch


class DeepClustering(torch.nn.Module):
    def __init__(self, bins=129, units=200, layers=2, dims=20):
        super().__init__()
        self.blstm = torch.nn.LSTM(bins, units, num_layers=layers, batch_first=True,
                                   bidirectional=True)
        self.out = torch.nn.Linear(2 * units, bins * dims)
        self.bins, self.dims = bins, dims

    def forward(self, features):
        hidden, _ = self.blstm(features)
        return self.out(hidden)


def deep_clustering_loss(embeddings, labels, used, bins, dims):
    """Sum over utterances of ||V'V - Y'Y||_F^2 restricted to used bins (V L2-normalised)."""
    batch = embeddings.shape[0]
    v = torch.nn.functional.normalize(embeddings.reshape(batch, -1, dims), dim=-1)
    w = used.reshape(batch, -1, 1)
    v, y = v * w, labels.reshape(batch, -1, labels.shape[-1]) * w
    vtv = v.transpose(1, 2) @ v
    vty = v.transpose(1, 2) @ y
    yty = y.transpose(1, 2) @ y
    loss = vtv.pow(2).sum() - 2 * vty.pow(2).sum() + yty.pow(2).sum()
    return loss / used.reshape(batch, -1).sum(1).pow(2).sum()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--frames", type=int, default=100)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    bins, speakers, dims = 129, 2, 20
    model = DeepClustering(bins=bins, dims=dims)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    features = torch.randn(args.batch, args.frames, bins)
    labels = torch.nn.functional.one_hot(
        torch.randint(0, speakers, (args.batch, args.frames, bins)), speakers).float()
    used = (torch.rand(args.batch, args.frames, bins) > 0.3).float()

    def step():
        optimizer.zero_grad()
        loss = deep_clustering_loss(model(features), labels, used, bins, dims)
        loss.backward()
        optimizer.step()

    for _ in range(3):  # warm-up
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    print("%.4f" % ((time.perf_counter() - start) / args.steps))


if __name__ == "__main__":
    main()
