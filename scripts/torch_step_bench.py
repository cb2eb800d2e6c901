"""The learner's train step written as a PyTorch user would write it (eager mode), timed
as `replay_bench` times Shine's: the yardstick of docs/benchmarks.md's "Train step"
section.

The same update as Shine's default [dqn]: the paper's Dueling DQN (27 -> 128 -> value
512 -> 1, advantage 512 -> A; Shine's model file names), double DQN, one-step targets
with gamma 0.99, Huber loss, gradients clipped to norm 10, RMSprop (lr 2.5e-4, alpha
0.99, eps 1e-8), the target synced every 10,000 steps; each step samples its batch
uniformly from a replay of --capacity rows held in a tensor (Shine's 57-float rows).
Autograd, torch.optim.RMSprop and clip_grad_norm_ as they come: no fusing by hand.

    .venv/bin/python scripts/torch_step_bench.py [--batches 32,128] [--threads 1] [--device cuda] [--compile]

(`. scripts/env.sh` makes .venv, the PyTorch 2.11.0 that Shine's libtorch is.)
Prints ms per step (sample + update): the median of --repeats runs of --steps steps.
--device cuda keeps the replay and the model on the GPU; --compile also times the step
under torch.compile(mode="reduce-overhead") (TorchInductor with CUDA graphs on a GPU),
the fastest a PyTorch user gets without writing kernels.
"""

import argparse
import statistics
import time
import warnings

# PyTorch's wheel warns when NumPy is missing; nothing here needs it.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # noqa: E402
from torch import nn  # noqa: E402

STATE, ACTION, REWARD, NEXT, TERMINAL, ROW = 0, 27, 28, 29, 56, 57


class DuelingDqn(nn.Module):
    def __init__(self, actions):
        super().__init__()
        self.shared = nn.Linear(27, 128)
        self.value_hidden = nn.Linear(128, 512)
        self.value = nn.Linear(512, 1)
        self.advantage_hidden = nn.Linear(128, 512)
        self.advantage = nn.Linear(512, actions)

    def forward(self, x):
        h = torch.relu(self.shared(x))
        v = self.value(torch.relu(self.value_hidden(h)))
        a = self.advantage(torch.relu(self.advantage_hidden(h)))
        return v + a - a.mean(dim=1, keepdim=True)


def replay_rows(capacity, actions, gen, device):
    rows = torch.rand(capacity, ROW, generator=gen) * 2 - 1
    rows[:, ACTION] = torch.randint(0, actions, (capacity,), generator=gen).float()
    rows[:, TERMINAL] = (torch.rand(capacity, generator=gen) < 0.01).float()
    return rows.to(device)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="32,128", help="batch sizes, comma-separated (default 32,128)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--capacity", type=int, default=1_000_000, help="rows in the replay (default 1,000,000)")
    p.add_argument("--actions", type=int, default=5, help="action count (default 5, the Untouchable set)")
    p.add_argument("--steps", type=int, default=200, help="steps per timed run (default 200)")
    p.add_argument("--warmup", type=int, default=50, help="untimed steps first (default 50)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per batch; the median is printed (default 5)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    p.add_argument("--compile", action="store_true", help='also time the step under torch.compile(mode="reduce-overhead")')
    args = p.parse_args()
    device = torch.device(args.device)
    batches = [int(b) for b in args.batches.split(",")]
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(2)
    replay = replay_rows(args.capacity, args.actions, gen, device)
    gamma, clip, sync_every = 0.99, 10.0, 10_000

    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} thread(s)"
    print(f"PyTorch {torch.__version__} on {args.device} ({where}), {args.capacity:,} rows in the replay")
    print(f"median of {args.repeats} runs of {args.steps} steps after {args.warmup} warm-up\n")
    modes = ["eager", "compiled"] if args.compile else ["eager"]
    print("| batch | mode | PyTorch (ms / step) | runs |")
    print("|---:|---|---:|---|")
    for batch, mode in [(b, m) for b in batches for m in modes]:
        torch.manual_seed(3)
        online, target = DuelingDqn(args.actions).to(device), DuelingDqn(args.actions).to(device)
        target.load_state_dict(online.state_dict())
        opt = torch.optim.RMSprop(online.parameters(), lr=2.5e-4, alpha=0.99, eps=1e-8)
        step_count = 0

        def update():
            b = replay.index_select(0, torch.randint(0, args.capacity, (batch,), device=device))
            states, next_states = b[:, STATE:ACTION], b[:, NEXT:TERMINAL]
            actions = b[:, ACTION].long().unsqueeze(1)
            with torch.no_grad():
                best = online(next_states).argmax(dim=1, keepdim=True)
                next_q = target(next_states).gather(1, best).squeeze(1)
                td_target = b[:, REWARD] + (1 - b[:, TERMINAL]) * gamma * next_q
            q = online(states).gather(1, actions).squeeze(1)
            loss = nn.functional.huber_loss(q, td_target)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(online.parameters(), clip)
            opt.step()
            return loss

        # The compiled update is the same function, traced once by TorchInductor.
        fn = torch.compile(update, mode="reduce-overhead") if mode == "compiled" else update

        def step():
            nonlocal step_count
            loss = fn()
            step_count += 1
            if step_count % sync_every == 0:
                target.load_state_dict(online.state_dict())
            return loss

        for _ in range(args.warmup):
            step()
        sync(device)
        runs = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            for _ in range(args.steps):
                step()
            sync(device)
            runs.append((time.perf_counter() - t) * 1e3 / args.steps)
        print(f"| {batch} | {mode} | {statistics.median(runs):.4f} | {', '.join(f'{r:.4f}' for r in runs)} |", flush=True)


if __name__ == "__main__":
    main()
