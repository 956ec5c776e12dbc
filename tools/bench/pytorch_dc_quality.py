#!/usr/bin/python3
"""Quality at equal training time against a plain PyTorch-Python loop (issue: "the demo is
clearly ahead of a plain PyTorch loop of the same model on the same corpus"): trains the DC demo
recipe's model (2 x 200 BLSTM, 129 x 20 embeddings, deep clustering loss on used bins, Adam) in
PyTorch on the stored 100-frame training segments of the generated corpus for a given number of
seconds, and writes the weights under nabu's parameter names, so that `nabu test` separates and
scores the test set exactly as for a nabu-trained model:

    tools/bench/pytorch_dc_quality.py --seconds 493 --out exp/pytorch_dc/full/model/model.pt
    # with exp/pytorch_dc a copy of a toy_DC_2spk experiment's recipe files (see README)
    build/nabu test --expdir exp/pytorch_dc

Needs Debian's python3-torch and python3-h5py (installed by hand; nothing else uses them).
"""
import argparse
import os
import sys
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from pytorch_dc_loop import DeepClustering, deep_clustering_loss  # noqa: E402  the same model


def read_store(path):
    with h5py.File(path, "r") as f:
        names = [n.decode() if isinstance(n, bytes) else n for n in f["names"][:]]
        return names, f["data"][:], f["offsets"][:], f["lengths"][:]


def nabu_state(model):
    """The weights under the names nabu's dblstm/linear models use (one LSTM per layer)."""
    state = {}
    for key, value in model.blstm.state_dict().items():
        kind, layer = key.rsplit("_l", 1)          # weight_ih, "0" or "0_reverse"
        index, _, reverse = layer.partition("_")
        state["main.layer%s.%s_l0%s" % (index, kind, "_" + reverse if reverse else "")] = value
    state["outlayer.weights"] = model.out.weight.detach().t().contiguous()
    state["outlayer.biases"] = model.out.bias.detach().clone()
    return {k: v.detach().clone() for k, v in state.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stores", default="data/stores/toy2spk")
    p.add_argument("--seconds", type=float, required=True, help="training time (the loop only)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.RandomState(args.seed)
    names, features, offsets, lengths = read_store(args.stores + "/features/tr/100/store.h5")
    target_names, targets, _, _ = read_store(args.stores + "/targets/tr/100/store.h5")
    used_names, used, _, _ = read_store(args.stores + "/usedbins/tr/100/store.h5")
    assert names == target_names == used_names, "stores list other examples"
    assert (lengths == 100).all(), "expected 100-frame segments"
    count, bins, dims = len(names), features.shape[1], 20
    features = torch.from_numpy(features).reshape(count, 100, bins)
    targets = torch.from_numpy(targets.astype(np.float32)).reshape(count, 100 * bins, -1)  # [N, T*F, S]
    used = torch.from_numpy(used.astype(np.float32)).reshape(count, 100, bins)
    model = DeepClustering(bins=bins, dims=dims)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    start, updates, epoch, losses = time.time(), 0, 0, []
    while time.time() - start < args.seconds:
        order = rng.permutation(count)
        for first in range(0, count - args.batch + 1, args.batch):
            index = torch.from_numpy(order[first:first + args.batch])
            loss = deep_clustering_loss(model(features[index]), targets[index], used[index], bins,
                                        dims)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            updates += 1
            losses.append(loss.item())
            if updates % 100 == 0:
                print("update %d (epoch %d): loss %.4f, %.0f s" %
                      (updates, epoch, np.mean(losses[-100:]), time.time() - start), flush=True)
            if time.time() - start >= args.seconds:
                break
        epoch += 1
    print("trained %d updates (%d examples) in %.0f s" %
          (updates, updates * args.batch, time.time() - start))
    torch.save(nabu_state(model), args.out)


if __name__ == "__main__":
    main()
