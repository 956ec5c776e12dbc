#!/usr/bin/python3
"""A plain PyTorch-Python training loop of the toy Conv-TasNet recipe's model, for speed
comparisons with `nabu train` (tools/bench/compare_train_speed --model convtasnet): the
recipes/SS/ConvTasNet/toy_ConvTasNet_2spk sizes (L 16, N 128, B 64, H 128, Sc 64, P 3, X 6, R 2,
gLN, ReLU masks, 2 speakers), permutation-invariant SI-SNR and Adam with gradient-norm clipping,
on preloaded random waveforms of one batch.

    tools/bench/pytorch_convtasnet_loop.py [--batch 8] [--samples 8000] [--steps 20] [--threads 2]
                                           [--device cpu|cuda]

Prints "<seconds per update>". Needs Debian's python3-torch (apt-get install python3-torch),
which nothing else in the project uses.
"""
import argparse
import itertools
import time

import torch


class GlobalLayerNorm(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.gain = torch.nn.Parameter(torch.ones(1, channels, 1))
        self.bias = torch.nn.Parameter(torch.zeros(1, channels, 1))

    def forward(self, x):
        mean = x.mean(dim=(1, 2), keepdim=True)
        variance = (x - mean).pow(2).mean(dim=(1, 2), keepdim=True)
        return (x - mean) / torch.sqrt(variance + 1e-8) * self.gain + self.bias


class Block(torch.nn.Module):
    def __init__(self, bottleneck, hidden, skip, kernel, dilation, last):
        super().__init__()
        self.expand = torch.nn.Conv1d(bottleneck, hidden, 1)
        self.prelu1, self.norm1 = torch.nn.PReLU(), GlobalLayerNorm(hidden)
        self.depthwise = torch.nn.Conv1d(hidden, hidden, kernel, dilation=dilation,
                                         padding=(kernel - 1) * dilation // 2, groups=hidden)
        self.prelu2, self.norm2 = torch.nn.PReLU(), GlobalLayerNorm(hidden)
        self.residual = None if last else torch.nn.Conv1d(hidden, bottleneck, 1)
        self.skip = torch.nn.Conv1d(hidden, skip, 1)

    def forward(self, x):
        h = self.norm1(self.prelu1(self.expand(x)))
        h = self.norm2(self.prelu2(self.depthwise(h)))
        residual = x if self.residual is None else x + self.residual(h)
        return residual, self.skip(h)


class ConvTasNet(torch.nn.Module):
    def __init__(self, speakers=2, kernel=16, filters=128, bottleneck=64, hidden=128, skip=64,
                 conv_kernel=3, blocks=6, repeats=2):
        super().__init__()
        self.speakers, self.filters = speakers, filters
        self.encoder = torch.nn.Conv1d(1, filters, kernel, stride=kernel // 2, bias=False)
        self.decoder = torch.nn.ConvTranspose1d(filters, 1, kernel, stride=kernel // 2,
                                                bias=False)
        self.norm = GlobalLayerNorm(filters)
        self.bottleneck = torch.nn.Conv1d(filters, bottleneck, 1)
        count = blocks * repeats
        self.blocks = torch.nn.ModuleList(
            Block(bottleneck, hidden, skip, conv_kernel, 2 ** (i % blocks), i + 1 == count)
            for i in range(count))
        self.prelu = torch.nn.PReLU()
        self.mask = torch.nn.Conv1d(skip, speakers * filters, 1)

    def forward(self, waveform):  # [B, N] -> [B, N, S]
        frames = torch.relu(self.encoder(waveform.unsqueeze(1)))
        x = self.bottleneck(self.norm(frames))
        skips = 0
        for block in self.blocks:
            x, skip = block(x)
            skips = skips + skip
        masks = torch.relu(self.mask(self.prelu(skips)))
        masks = masks.reshape(masks.shape[0], self.speakers, self.filters, -1)
        masked = (masks * frames.unsqueeze(1)).reshape(-1, self.filters, frames.shape[-1])
        signals = self.decoder(masked).reshape(waveform.shape[0], self.speakers, -1)
        return signals[..., :waveform.shape[1]].transpose(1, 2)


def pit_si_snr(estimates, sources, epsilon=1e-8):
    """Mean negative SI-SNR (dB) under the best permutation, estimates/sources [B, N, S]."""
    estimates = estimates - estimates.mean(1, keepdim=True)
    sources = sources - sources.mean(1, keepdim=True)
    dot = estimates.transpose(1, 2) @ sources                       # [B, S_est, S_src]
    energy = sources.pow(2).sum(1, keepdim=True)                    # [B, 1, S]
    alpha = dot / (energy + epsilon)
    target = alpha.pow(2) * energy
    error = (estimates.pow(2).sum(1).unsqueeze(2) - 2 * alpha * dot + target).clamp_min(0)
    si_snr = 10 * torch.log10(target / (error + epsilon) + epsilon)
    speakers = sources.shape[2]
    costs = torch.stack([sum(-si_snr[:, p[j], j] for j in range(speakers))
                         for p in itertools.permutations(range(speakers))], dim=1)
    return costs.min(1).values.sum() / (sources.shape[0] * speakers)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--samples", type=int, default=8000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    args = p.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    model = ConvTasNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    sources = torch.randn(args.batch, args.samples, 2).to(device)
    mixture = sources.sum(2)

    def step():
        optimizer.zero_grad()
        loss = pit_si_snr(model(mixture), sources)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()

    def finish():  # a GPU runs ahead of Python: time what it has done, not what was queued
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):  # warm-up
        step()
    finish()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    finish()
    print("%.4f" % ((time.perf_counter() - start) / args.steps))


if __name__ == "__main__":
    main()
