#!/usr/bin/env python3
"""Writes what the original Nabu-MSSS would have left of a small BLSTM + linear model (its
deep-clustering and PIT recipes' `main` dblstm and `outlayer` linear), with TensorFlow itself:

  OUT/model/network.ckpt-*   a TensorFlow (v1, Saver) checkpoint with the original's variable
                             names (main/layer<l>/bidirectional_rnn/{fw,bw}/
                             layer_norm_basic_lstm_cell/{kernel,bias}, outlayer/fully_connected/
                             {weights,biases}), Adam slots beside them, the trainer's gradient
                             accumulators and global_step, as the original's checkpoints hold;
  OUT/reference.h5           input [B, T, D] of sequence lengths `lengths`, and `output`: the
                             model's forward pass computed by TensorFlow's LSTM kernel (BlockLSTM,
                             the gates i, j, f, o and forget bias 1.0 of the original's cell),
                             each direction as the original's bidirectional_dynamic_rnn runs it:
                             the backward one on each sequence reversed within its length, frames
                             past a length zero.

  make_tf_checkpoint.py OUT --units 6 --layers 2 --inputs 5 --outputs 4

Run by TfCheckpoint.ConvertedModelsComputeWhatTensorFlowComputes (tests/unit/test_convert_tf.cpp)
with the test venv's python (tests/requirements.txt holds tensorflow-cpu and h5py)."""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
CELL = "bidirectional_rnn/%s/layer_norm_basic_lstm_cell/"


def lstm_direction(x, lengths, kernel, bias, units, reverse):
    """[B, T, D] -> [B, T, H] through TensorFlow's LSTM kernel, as dynamic_rnn with
    sequence_length (reversed within each length for the backward direction)."""
    if reverse:
        x = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
    batch = tf.shape(x)[0]
    zeros = tf.zeros([batch, units])
    peephole = tf.zeros([units])
    outputs = tf.raw_ops.BlockLSTM(
        seq_len_max=tf.cast(tf.shape(x)[1], tf.int64), x=tf.transpose(x, [1, 0, 2]),
        cs_prev=zeros, h_prev=zeros, w=kernel, wci=peephole, wcf=peephole, wco=peephole, b=bias,
        forget_bias=1.0, cell_clip=-1.0, use_peephole=False)[6]
    outputs = tf.transpose(outputs, [1, 0, 2])
    if reverse:
        outputs = tf.reverse_sequence(outputs, lengths, seq_axis=1, batch_axis=0)
    mask = tf.sequence_mask(lengths, tf.shape(x)[1], dtype=tf.float32)
    return outputs * mask[:, :, None]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--units", type=int, default=6)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--inputs", type=int, default=5)
    parser.add_argument("--outputs", type=int, default=4)
    args = parser.parse_args()
    random = np.random.RandomState(7)
    lengths = np.array([9, 6, 1], dtype=np.int32)
    x_value = random.randn(len(lengths), lengths.max(), args.inputs).astype(np.float32)
    tf1.disable_eager_execution()
    graph = tf.Graph()
    with graph.as_default():
        def variable(name, shape, scale=0.5):
            return tf1.get_variable(name, initializer=(scale * random.randn(*shape))
                                    .astype(np.float32))
        x = tf.constant(x_value)
        length_tensor = tf.constant(lengths)
        layer_input, size = x, args.inputs
        trained = []
        for layer in range(args.layers):
            directions = []
            for direction in ("fw", "bw"):
                scope = "main/layer%d/" % layer + CELL % direction
                kernel = variable(scope + "kernel", [size + args.units, 4 * args.units])
                bias = variable(scope + "bias", [4 * args.units])
                trained += [kernel, bias]
                directions.append(lstm_direction(layer_input, length_tensor, kernel, bias,
                                                 args.units, direction == "bw"))
            layer_input, size = tf.concat(directions, 2), 2 * args.units
        weights = variable("outlayer/fully_connected/weights", [size, args.outputs])
        biases = variable("outlayer/fully_connected/biases", [args.outputs])
        trained += [weights, biases]
        output = tf.tensordot(layer_input, weights, axes=1) + biases
        # What else the original's checkpoints hold, which the conversion must leave out.
        for parameter in trained:
            name = parameter.op.name
            variable(name + "/Adam", parameter.shape.as_list())
            variable(name + "/Adam_1", parameter.shape.as_list())
            variable("train/task_2spk/gradients/" + name, parameter.shape.as_list())
        tf1.get_variable("global_step", initializer=np.int32(1200))
        saver = tf1.train.Saver()
        os.makedirs(os.path.join(args.out, "model"), exist_ok=True)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            output_value = session.run(output)
            saver.save(session, os.path.join(args.out, "model", "network.ckpt"), global_step=1200)
    with h5py.File(os.path.join(args.out, "reference.h5"), "w") as store:
        store.create_dataset("input", data=x_value)
        store.create_dataset("lengths", data=lengths.astype(np.float32))
        store.create_dataset("output", data=output_value)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
