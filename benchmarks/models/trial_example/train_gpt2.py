"""A Hugging Face-style training loop whose model is the library's own (no nn.Module class here):
a 2-layer GPT-2 from transformers with random weights, AdamW, a shuffled DataLoader whose last
batch is smaller, and logging. BENCHMARKS.md's trial figures come from

    compile-lens trial --steps 20 -- python train_gpt2.py

(add `--dropout 0` after train_gpt2.py to compare the losses step by step: compiled dropout draws
its own random masks).
"""

import argparse
import logging

import torch
from torch.utils.data import DataLoader, TensorDataset
from transformers import GPT2Config, GPT2LMHeadModel

logging.basicConfig(level=logging.INFO)
log = logging.getLogger("train")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dropout", type=float, default=0.1)
    args = parser.parse_args()
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=64, bos_token_id=0,
                        eos_token_id=0, resid_pdrop=args.dropout, embd_pdrop=args.dropout, attn_pdrop=args.dropout)
    model = GPT2LMHeadModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = torch.randint(0, 1000, (70, 32))  # 70 sequences: eight batches of 8, then one of 6
    loader = DataLoader(TensorDataset(data), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    for epoch in range(5):
        for step, (ids,) in enumerate(loader):
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step % 4 == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, out.loss.item())


if __name__ == "__main__":
    main()
