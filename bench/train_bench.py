#!/usr/bin/env python3
"""bench/run train: tarn-train against PyTorch (Debian's python3-torch) on the same CNN,
data, batch size (64), optimiser (Adam 1e-3) and cores, in the same run.

  samples/s: training steps only (no evaluation; the peer's batches are sliced from tensors
             already in memory), median of 3 runs of --steps steps, for tarn alone in one
             process, 1 ps + 1 worker, 1 ps + 2 workers (their sum), and the peer.
  time to 90%: wall time from the start until the test accuracy, measured after each epoch,
             first reaches 0.90, for tarn's 1 ps + 1 worker and the peer (both evaluate
             after every epoch; evaluation counts, as a user waiting for the model sees it).
             Whether 0.90 comes after epoch 3 or 4 depends on the seed (initialisation and
             shuffling) as much as on the program, so each side runs once per seed (1, 2, 3
             by default, alternating) and the medians are compared.

Prints one flat JSON object. Usage: train_bench.py TARN_TRAIN [--threads N] [--steps N]
[--epochs N] [--seeds 1,2,3]
"""
import argparse, gzip, json, os, re, statistics, subprocess, sys, time

DATA = "/usr/share/datasets/fashion-mnist"

PEER = r'''
import gzip, json, sys, time
import numpy as np
import torch
import torch.nn.functional as F

threads, steps, epochs, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
seed = int(sys.argv[5]) if len(sys.argv) > 5 else 1
torch.set_num_threads(threads)
torch.manual_seed(seed)

def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)

d = "/usr/share/datasets/fashion-mnist"
x = torch.from_numpy(idx(d + "/train-images-idx3-ubyte.gz").copy()).float().div(255).unsqueeze(1)
y = torch.from_numpy(idx(d + "/train-labels-idx1-ubyte.gz").copy()).long()
tx = torch.from_numpy(idx(d + "/t10k-images-idx3-ubyte.gz").copy()).float().div(255).unsqueeze(1)
ty = torch.from_numpy(idx(d + "/t10k-labels-idx1-ubyte.gz").copy()).long()

class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3)
        self.conv2 = torch.nn.Conv2d(32, 64, 3)
        self.fc1 = torch.nn.Linear(1600, 128)
        self.fc2 = torch.nn.Linear(128, 10)
    def forward(self, x):
        x = (x - 0.2860) / 0.3530
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))

model = Cnn()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

def step(bx, by):
    opt.zero_grad()
    loss = F.cross_entropy(model(bx), by)
    loss.backward()
    opt.step()

if mode == "speed":
    perm = torch.randperm(len(x))
    for i in range(10):  # warm-up
        b = perm[i * 64:(i + 1) * 64]
        step(x[b], y[b])
    start = time.perf_counter()
    for i in range(steps):
        b = perm[(i * 64) % 59904:(i * 64) % 59904 + 64]
        step(x[b], y[b])
    print(json.dumps({"samples_per_s": steps * 64 / (time.perf_counter() - start)}))
else:
    start = time.perf_counter()
    reached = None
    for epoch in range(1, epochs + 1):
        model.train()
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 64):
            b = perm[i:i + 64]
            step(x[b], y[b])
        model.eval()
        with torch.no_grad():
            acc = sum((model(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum().item()
                      for i in range(0, len(tx), 1000)) / len(tx)
        elapsed = time.perf_counter() - start
        print(json.dumps({"epoch": epoch, "accuracy": acc, "seconds": elapsed}), flush=True)
        if acc >= 0.90 and reached is None:
            reached = elapsed
            break
    print(json.dumps({"time_to_90": reached}))
'''


def tarn_speed(binary, threads, steps):
    out = subprocess.run([binary, "--model", "cnn", "--threads", str(threads), "--max_steps",
                          str(steps), "--train_limit", str(steps * 64)],
                         env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"\((\d+) samples/s\)", out)
    return float(m.group(1))


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tarn_cluster(binary, workers, threads, extra):
    """Runs 1 ps + `workers` workers; returns (each worker's stdout, start time)."""
    ps = "127.0.0.1:%d" % free_port()
    hosts = ",".join("127.0.0.1:%d" % (i + 1) for i in range(workers))
    common = ["--model", "cnn", "--ps_hosts", ps, "--worker_hosts", hosts] + extra
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    server = subprocess.Popen([binary, "--job_name", "ps", "--task_index", "0"] + common,
                              env=env, stdout=subprocess.DEVNULL)
    start = time.perf_counter()
    procs = [subprocess.Popen([binary, "--job_name", "worker", "--task_index", str(i),
                               "--threads", str(threads)] + common,
                              env=env, stdout=subprocess.PIPE, text=True)
             for i in range(workers)]
    return server, procs, start


def tarn_cluster_speed(binary, workers, threads, steps):
    server, procs, _ = tarn_cluster(binary, workers, threads,
                                    ["--max_steps", str(steps), "--train_limit", str(steps * 64),
                                     "--export_every_secs", "0"])
    total = 0.0
    for p in procs:
        out, _ = p.communicate()
        m = re.search(r"done: .* (\d+) samples/s", out)
        total += float(m.group(1))
    server.terminate()
    server.wait()
    return total


def tarn_cluster_time_to_90(binary, threads, epochs, seed):
    server, procs, start = tarn_cluster(binary, 1, threads,
                                        ["--epochs", str(epochs), "--export_every_secs", "0",
                                         "--seed", str(seed)])
    reached, curve = None, []
    for line in procs[0].stdout:
        m = re.search(r"step (\d+): test accuracy ([0-9.]+)", line)
        if m:
            elapsed = time.perf_counter() - start
            curve.append([int(m.group(1)), float(m.group(2)), round(elapsed, 1)])
            if float(m.group(2)) >= 0.90:
                reached = elapsed
                break
    procs[0].kill()
    procs[0].wait()
    server.terminate()
    server.wait()
    return reached, curve


def peer(threads, steps, epochs, mode, seed=1):
    out = subprocess.run(["/usr/bin/python3", "-c", PEER, str(threads), str(steps), str(epochs),
                          mode, str(seed)], env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
                         capture_output=True, text=True, check=True).stdout
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tarn_train")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seeds", default="1,2,3")
    a = ap.parse_args()
    seeds = [int(x) for x in a.seeds.split(",")]
    runs = {"alone": [], "ps1_worker1": [], "ps1_workers2": [], "python": []}
    for _ in range(3):
        runs["alone"].append(tarn_speed(a.tarn_train, a.threads, a.steps))
        runs["ps1_worker1"].append(tarn_cluster_speed(a.tarn_train, 1, a.threads, a.steps))
        runs["ps1_workers2"].append(
            tarn_cluster_speed(a.tarn_train, 2, max(1, a.threads // 2), 2 * a.steps))
        runs["python"].append(peer(a.threads, a.steps, 0, "speed")[-1]["samples_per_s"])
    med = {k: statistics.median(v) for k, v in runs.items()}
    tarn90s, tarn_curves, peer90s, peer_curves = [], {}, [], {}
    for seed in seeds:
        t90, tarn_curves[seed] = tarn_cluster_time_to_90(a.tarn_train, a.threads, a.epochs, seed)
        tarn90s.append(t90)
        peer_lines = peer(a.threads, 0, a.epochs, "accuracy", seed)
        peer90s.append(peer_lines[-1]["time_to_90"])
        peer_curves[seed] = [[l["epoch"], round(l["accuracy"], 4), round(l["seconds"], 1)]
                             for l in peer_lines if "epoch" in l]

    def median_or_none(xs):  # a run that never reached 0.90 counts as the slowest
        return statistics.median([float("inf") if x is None else x for x in xs])

    tarn90, peer90 = median_or_none(tarn90s), median_or_none(peer90s)
    tarn90 = None if tarn90 == float("inf") else tarn90
    peer90 = None if peer90 == float("inf") else peer90
    print(json.dumps({
        "model": "cnn (225,034 parameters), batch 64, Adam 1e-3",
        "threads": a.threads,
        "steps_per_speed_run": a.steps,
        "tarn_alone_samples_per_s": round(med["alone"], 1),
        "tarn_ps1_worker1_samples_per_s": round(med["ps1_worker1"], 1),
        "tarn_ps1_workers2_samples_per_s": round(med["ps1_workers2"], 1),
        "python_torch_samples_per_s": round(med["python"], 1),
        "runs_samples_per_s": {k: [round(x, 1) for x in v] for k, v in runs.items()},
        "ratio_ps1_worker1_vs_python": round(med["ps1_worker1"] / med["python"], 3),
        "ratio_alone_vs_python": round(med["alone"] / med["python"], 3),
        "tarn_ps1_worker1_time_to_90_s": None if tarn90 is None else round(tarn90, 1),
        "python_torch_time_to_90_s": None if peer90 is None else round(peer90, 1),
        "ratio_time_to_90": None if tarn90 is None or peer90 is None else round(tarn90 / peer90, 3),
        "time_to_90_seeds": seeds,
        "tarn_ps1_worker1_time_to_90_runs_s": [None if x is None else round(x, 1) for x in tarn90s],
        "python_torch_time_to_90_runs_s": [None if x is None else round(x, 1) for x in peer90s],
        "tarn_ps1_worker1_accuracy_curve_step_acc_s": {str(k): v for k, v in tarn_curves.items()},
        "python_torch_accuracy_curve_epoch_acc_s": {str(k): v for k, v in peer_curves.items()},
        "python_torch_version": subprocess.run(
            ["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
            capture_output=True, text=True).stdout.strip(),
    }, indent=2))


if __name__ == "__main__":
    main()
