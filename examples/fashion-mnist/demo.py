#!/usr/bin/python3
"""The Fashion-MNIST assembly, end to end, as a new user sees it.

Starts `tarn server` in the background, launches examples/fashion-mnist/assembly.json (2 ps,
2 workers, 2 serving replicas), shows live progress (instances, the chief's loss and
accuracy, versions exported and served), runs a client against the serving replicas for the
whole run (it must see no error, and accuracy rising with each version), then sends the
whole 10,000-image test set through TF Serving's REST API, prints the accuracy and a few
images with their predicted labels, and stops cleanly (destroy, then the server). With
--ui-check DIR it also watches the run in the dashboard (web/test/ui_fmnist.mjs, in headless
Chromium): the training curves, the version timeline and the replicas switching versions.

Runs as root (tarn server starts containers). Standard library only: it runs on Debian's
/usr/bin/python3 and talks to 127.0.0.0/8 only. Exit status: 0 when the served model reaches
--min-accuracy and the client saw no error; 1 otherwise; 2 for bad usage.
"""
import argparse
import gzip
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = "/usr/share/datasets/fashion-mnist"
USER = "demo"
NAME = "fmnist"
MODEL = "fmnist"


def log(msg=""):
    print(msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_idx(path):
    data = gzip.open(path).read()
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    return dims, data[4 + 4 * len(dims):]


def http_json(host, port, method, path, body=None, timeout=30, token=None):
    """(status, parsed JSON or None). Raises OSError for connection failures."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        conn.request(method, path, payload, headers)
        r = conn.getresponse()
        text = r.read()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, None
    finally:
        conn.close()


class Tarn:
    """tarn server in the background, and its REST API."""

    def __init__(self, binary, workdir, config):
        self.binary = binary
        self.port = free_port()
        self.state = os.path.join(workdir, "state")
        self.log_path = os.path.join(workdir, "server.log")
        self.socket = os.path.join(workdir, "tarn.sock")
        self.token = None
        self.args = [binary, "server", "--listen", f"127.0.0.1:{self.port}", "--state-dir",
                     self.state, "--dns", f"127.0.0.1:{free_port()}", "--config", config,
                     "--socket", self.socket]
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.args, stdout=open(self.log_path, "a"),
                                     stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                if http_json("127.0.0.1", self.port, "GET", "/healthz")[0] == 200:
                    if self.token is None:
                        self.token = self.make_token()
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("tarn server did not start:\n" + open(self.log_path).read())

    def cli(self, *args):
        """The CLI over the server's Unix socket; as root, $TARN_USER means --as."""
        env = dict(os.environ, TARN_SOCKET=self.socket, TARN_USER=USER)
        env.pop("TARN_ADDR", None)
        return subprocess.run([self.binary, *args], env=env, capture_output=True, text=True)

    def make_token(self):
        """A bearer token of the demo's tenant for the REST calls over TCP, made over the socket."""
        r = self.cli("token", "create", "--name", f"demo-{os.getpid()}", "--ttl", "1d")
        if r.returncode != 0 or not r.stdout.startswith("tarn_"):
            raise RuntimeError("tarn token create failed: " + r.stderr)
        return r.stdout.strip()

    def get(self, path, **params):
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        status, body = http_json("127.0.0.1", self.port, "GET", path + query, token=self.token)
        return body if status == 200 else None

    def status(self):
        return self.get(f"/app/v1/services/{NAME}")

    def kill_and_restart(self):
        """kill -9 of tarn server, then the same command again: it adopts what runs."""
        self.proc.kill()
        self.proc.wait()
        self.start()

    def log_tail(self, instance, size=8192, stream="stdout"):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", f"/tarn/v1/services/{NAME}/instances/{instance}/logs?"
                         + urllib.parse.urlencode({"tail": size, "stream": stream}),
                         headers={"Authorization": "Bearer " + self.token})
            r = conn.getresponse()
            return r.read().decode(errors="replace") if r.status == 200 else ""
        finally:
            conn.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def instances(status, component):
    for c in (status or {}).get("components", []):
        if c.get("name") == component:
            return c.get("containers", [])
    return []


def ready(status, component):
    for c in (status or {}).get("components", []):
        if c.get("name") == component:
            return c.get("ready_containers", 0), c.get("number_of_containers", 0)
    return 0, 0


def http_port(instance):
    """The port a serving replica listens on: its "http" port as tarn status shows it (the
    declared 8501 locally; a number tarn assigned on Slurm, where replicas share a node)."""
    return instance.get("ports", {}).get("http", 8501)


def served_versions(status):
    """Per serving replica: the newest AVAILABLE version (None when not serving)."""
    out = []
    for i in instances(status, "serving"):
        version = None
        if i.get("ip"):
            try:
                code, body = http_json(i["ip"], http_port(i), "GET", f"/v1/models/{MODEL}",
                                       timeout=2)
                if code == 200:
                    avail = [int(v["version"]) for v in body["model_version_status"]
                             if v["state"] == "AVAILABLE"]
                    version = max(avail) if avail else None
            except (OSError, ValueError, KeyError):
                pass
        out.append(version)
    return out


class Client(threading.Thread):
    """Asks the serving replicas about test images for the whole run, through KServe v2
    (its answers name the version that served them). A connection refused or reset before
    any answer is retried once on the other replica, as a load balancer would; anything else
    that is not a 200 is an error."""

    def __init__(self, images, labels, addresses):
        super().__init__(daemon=True)
        self.images, self.labels = images, labels
        self.addresses = addresses  # a list the main loop keeps current
        self.stop = threading.Event()
        self.requests = 0
        self.retries = 0
        self.errors = []
        self.per_version = {}  # version -> [correct, total]

    def ask(self, address, first, n):
        pixels = self.images[first * 784:(first + n) * 784]
        body = {"inputs": [{"name": "x", "shape": [n, 1, 28, 28], "datatype": "UINT8",
                            "data": list(pixels)}]}
        return http_json(address[0], address[1], "POST", f"/v2/models/{MODEL}/infer", body)

    def run(self):
        first, batch, turn = 0, 50, 0
        while not self.stop.is_set():
            addresses = list(self.addresses)
            if not addresses:
                time.sleep(0.2)
                continue
            turn += 1
            answer = None
            for attempt in range(2):
                address = addresses[(turn + attempt) % len(addresses)]
                try:
                    answer = self.ask(address, first, batch)
                    break
                except (ConnectionRefusedError, ConnectionResetError) as e:
                    self.retries += 1
                    answer = ("refused", str(e))
                except OSError as e:
                    answer = ("oserror", str(e))
                    break
            self.requests += 1
            if not isinstance(answer[0], int) or answer[0] != 200:
                self.errors.append(f"{answer[0]}: {str(answer[1])[:200]}")
                time.sleep(0.2)
                continue
            out = answer[1]["outputs"][0]
            version = int(answer[1]["model_version"])
            classes = out["shape"][1]
            data = out["data"]
            tally = self.per_version.setdefault(version, [0, 0])
            for k in range(batch):
                row = data[k * classes:(k + 1) * classes]
                tally[0] += row.index(max(row)) == self.labels[first + k]
                tally[1] += 1
            first = (first + batch) % 2000
            time.sleep(0.05)


def workload_pids(instance, shared_dir):
    """The workload processes (tarn-train, tarn-serve) of one of this run's instances, found
    by the environment tarn gives each instance. The assembly's shared directory is under
    this run's state directory, so another demo on the machine never matches."""
    want = [f"TARN_SHARED_DIR={shared_dir}".encode(), f"TARN_INSTANCE={instance}".encode()]
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/comm").read().strip() not in ("tarn-train", "tarn-serve"):
                continue
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if all(w in env for w in want):
            pids.append(int(pid))
    return pids


def restarts(status, instance):
    for c in (status or {}).get("components", []):
        for i in c.get("containers", []):
            if i.get("component_instance_name") == instance:
                return i.get("restarts", 0), i.get("state", "")
    return 0, ""


class Faults:
    """kill -9, one at a time, of the serving replica serving-0, the ps ps-1, the chief
    worker-0 and tarn server itself; each next one once the previous has come back."""

    def __init__(self, tarn):
        self.tarn = tarn
        self.plan = ["serving-0", "ps-1", "worker-0", "tarn server"]
        self.killed = []  # (what, restarts before)
        self.waiting = None
        self.chief_checkpoint = None  # the chief's last checkpoint step before its kill

    def step(self, status, serving_ok, checkpointed):
        if self.waiting is not None:
            what, before = self.waiting
            if what == "tarn server":
                self.waiting = None
                return
            count, state = restarts(status, what)
            back = count > before and state in ("READY", "RUNNING_BUT_UNREADY")
            if what == "serving-0":
                back = back and serving_ok
            if not back:
                return
            log(f"   {what} is back (restarts {count}, {state})")
            self.waiting = None
        if not self.plan or not serving_ok or not checkpointed:
            return
        what = self.plan.pop(0)
        if what == "tarn server":
            log("   kill -9 tarn server, then start it again with the same state directory")
            self.tarn.kill_and_restart()
            self.killed.append((what, 0))
            self.waiting = (what, 0)
            return
        if what == "worker-0":
            steps = re.findall(r"checkpoint of step (\d+)", self.tarn.log_tail("worker-0", 1 << 20))
            self.chief_checkpoint = int(steps[-1]) if steps else None
        pids = workload_pids(what, status["shared_dir"])
        before = restarts(status, what)[0]
        log(f"   kill -9 {what} (pid {','.join(map(str, pids)) or 'not found'})")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        self.killed.append((what, before))
        self.waiting = (what, before)

    def done(self):
        return not self.plan and self.waiting is None


SHADES = " .:-=+*#%@"


def ascii_image(pixels):
    rows = []
    for r in range(0, 28, 2):
        rows.append("".join(SHADES[min(9, max(pixels[r * 28 + c], pixels[(r + 1) * 28 + c]) * 10 // 256)]
                            for c in range(28)))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tarn", default=os.path.join(ROOT, "build/release/bin/tarn"))
    p.add_argument("--assembly", default=os.path.join(HERE, "assembly.json"))
    p.add_argument("--config", default=os.path.join(HERE, "one-small-machine.json"),
                   help="tarn server's config (the node's vcores and memory)")
    p.add_argument("--epochs", type=int, default=0,
                   help="override the assembly's --epochs (CI-sized runs use 1); its "
                        "--lr_decay_steps scale with them, so the learning rate ends where "
                        "the full run's does")
    p.add_argument("--export-every-secs", type=int, default=0,
                   help="override the assembly's --export_every_secs (short runs export more "
                        "often so that the replicas see more than one version)")
    p.add_argument("--min-accuracy", type=float, default=0.92)
    p.add_argument("--timeout", type=float, default=1800, help="seconds for the whole run")
    p.add_argument("--faults", action="store_true",
                   help="kill -9 a serving replica, a ps, the chief and tarn server during the "
                        "run; everything must come back and the client must see no error")
    p.add_argument("--ui-check", metavar="DIR",
                   help="watch the run in the dashboard in headless Chromium "
                        "(web/test/ui_fmnist.mjs, screenshots to DIR): the training curves "
                        "gain points, versions reach the timeline and every replica switches "
                        "to a newer one; the run fails if a check does")
    args = p.parse_args()
    if os.geteuid() != 0:
        log("demo: needs root (tarn server starts containers in namespaces and cgroups)")
        return 2
    if not os.access(args.tarn, os.X_OK):
        log(f"demo: {args.tarn} is not an executable (run scripts/build)")
        return 2

    workdir = tempfile.mkdtemp(prefix="tarn-demo-")
    os.chmod(workdir, 0o711)
    doc = json.load(open(args.assembly))
    for c in doc["components"]:
        line = c["launch_command"]
        if args.epochs:
            base = re.search(r"--epochs (\d+)", line)
            if base:
                base = int(base.group(1))
                line = re.sub(r"--epochs \d+", f"--epochs {args.epochs}", line)
                line = re.sub(r"--lr_decay_steps (\d+)",
                              lambda m: f"--lr_decay_steps {int(m.group(1)) * args.epochs // base}",
                              line)
        if args.export_every_secs:
            line = re.sub(r"--export_every_secs \d+",
                          f"--export_every_secs {args.export_every_secs}", line)
        c["launch_command"] = line
    assembly = os.path.join(workdir, "assembly.json")
    json.dump(doc, open(assembly, "w"), indent=2)
    epochs = re.search(r"--epochs (\d+)", instances_command(doc, "worker")).group(1)

    dims, images = read_idx(f"{DATA}/t10k-images-idx3-ubyte.gz")
    _, labels = read_idx(f"{DATA}/t10k-labels-idx1-ubyte.gz")
    names = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
             "Sneaker", "Bag", "Ankle boot"]

    log(f"== tarn server (state in {workdir})")
    tarn = Tarn(args.tarn, workdir, args.config)
    client = None
    ui = None
    ok = False
    start = time.time()
    try:
        log(f"== tarn launch {os.path.relpath(args.assembly, ROOT)} "
            f"(ps x2, worker x2, serving x2; {epochs} epoch(s))")
        r = tarn.cli("launch", assembly)
        log((r.stdout + r.stderr).strip())
        if r.returncode != 0:
            return 1
        if args.ui_check:
            replicas = next(c["number_of_containers"] for c in doc["components"]
                            if c["name"] == "serving")
            ui = UiCheck(tarn, replicas, args.ui_check)
        addresses = []
        client = Client(list(images), list(labels), addresses)
        faults = Faults(tarn) if args.faults else None
        last_line, last_time, chief_done, final = "", 0.0, False, None
        status = None
        while True:
            elapsed = time.time() - start
            if elapsed > args.timeout:
                log(f"demo: not done after {args.timeout:.0f} s")
                return 1
            status = tarn.status()
            if status is None:
                time.sleep(1)
                continue
            if status.get("state") == "FAILED":
                log(f"demo: the assembly FAILED: {status.get('diagnostics')}")
                return 1
            serving = served_versions(status)
            # The client starts once every replica serves a version; replicas are added as
            # addresses only then, as a readiness-gated load balancer does.
            addresses[:] = [(i["ip"], http_port(i))
                            for i, v in zip(instances(status, "serving"), serving)
                            if v is not None and i.get("ip")]
            if len(addresses) == 2 and not client.is_alive() and not client.stop.is_set():
                client.start()
            chief = next(iter(instances(status, "worker")), {})
            chief_done = chief.get("state") == "SUCCEEDED"
            progress = progress_line(tarn.log_tail("worker-0"))
            shared = status.get("shared_dir", "")
            exported = exported_versions(os.path.join(shared, "models", MODEL))
            line = (f"[{elapsed:4.0f}s] ps {'%d/%d' % ready(status, 'ps')}, "
                    f"worker {'%d/%d' % ready(status, 'worker')}"
                    f"{' (chief done)' if chief_done else ''}, "
                    f"serving {'%d/%d' % ready(status, 'serving')}")
            if progress:
                line += (f" | step {progress.get('step', 0)} loss {progress.get('loss', 0):.3f}"
                         + (f" acc {progress['accuracy']:.4f}" if "accuracy" in progress else ""))
            line += f" | exported {fmt_versions(exported)} | served {fmt_served(serving)}"
            # A line when something other than the time changed, else every 10 s.
            key = line.split("] ", 1)[1] + str(len(client.errors))
            if client.is_alive():
                line += f" | client {client.requests} req, {len(client.errors)} errors"
            if key != last_line or elapsed - last_time >= 10:
                log(line)
                last_line, last_time = key, elapsed
            if faults is not None and not chief_done:
                checkpointed = "checkpoint of step" in tarn.log_tail("worker-0", 65536)
                faults.step(status, len(addresses) == 2, checkpointed)
            if faults is not None and not faults.done() and chief_done:
                log("demo: training finished before every fault was injected (use more epochs)")
                return 1
            if chief_done and exported and all(v == max(exported) for v in serving) and serving:
                final = max(exported)
                break
            time.sleep(2)
        train_seconds = time.time() - start
        time.sleep(1)  # a few more client requests on the final version
        client.stop.set()
        client.join(30)

        meta = json.load(open(os.path.join(status["shared_dir"], "models", MODEL, str(final),
                                           "meta.json")))
        log(f"== the whole test set ({dims[0]} images) through TF Serving's REST API "
            f"(POST /v1/models/{MODEL}:predict, 200 images a request)")
        serving_ip, serving_port = addresses[0]
        correct, shown, t0 = 0, [], time.time()
        for first in range(0, dims[0], 200):
            n = min(200, dims[0] - first)
            batch = [[[images[(first + k) * 784 + r * 28 + c] / 255.0 for c in range(28)]
                      for r in range(28)] for k in range(n)]
            code, body = http_json(serving_ip, serving_port, "POST", f"/v1/models/{MODEL}:predict",
                                   {"instances": batch, "top_k": 1}, timeout=120)
            if code != 200:
                log(f"demo: predict answered {code}: {body}")
                return 1
            for k, top in enumerate(body["top_k"]):
                label = labels[first + k]
                correct += top[0]["class"] == label
                if first + k in (0, 1, 2, 3, 12):
                    shown.append((first + k, top[0], label))
        accuracy = correct / dims[0]
        log(f"served version {final}: {correct}/{dims[0]} correct = {accuracy:.4f} "
            f"({dims[0] / (time.time() - t0):.0f} images/s); tarn-train measured "
            f"{meta.get('accuracy', 0):.4f} on export")
        log("")
        pictures = [ascii_image(images[i * 784:(i + 1) * 784]) for i, _, _ in shown]
        for row in range(14):
            log("   ".join(pic[row] for pic in pictures))
        log("   ".join(f"{('is: ' + top['label'])[:28]:<28}" for _, top, _ in shown))
        log("   ".join(f"{('p=%.2f, truth: %s' % (top['probability'], names[t]))[:28]:<28}"
                       for _, top, t in shown))
        log("")
        rising = sorted(client.per_version.items())
        log("== summary")
        log(f"training and serving came up and finished in {train_seconds:.0f} s; versions "
            f"exported: {fmt_versions(exported_versions(os.path.join(status['shared_dir'], 'models', MODEL)))}")
        log("client during the run: " + f"{client.requests} requests, {len(client.errors)} errors, "
            f"{client.retries} retried on the other replica; accuracy per served version: "
            + ", ".join(f"v{v} {c / t:.3f} ({t} images)" for v, (c, t) in rising))
        for e in client.errors[:5]:
            log(f"  client error: {e}")
        ok = accuracy >= args.min_accuracy and not client.errors
        if ui is not None:
            ok = ui.finish(max(60.0, args.timeout - (time.time() - start))) and ok
        if faults is not None:
            ok = check_faults(tarn, faults) and ok
        log(f"{'PASS' if ok else 'FAIL'}: served accuracy {accuracy:.4f} "
            f"(needs >= {args.min_accuracy}), client errors {len(client.errors)}")
        return 0 if ok else 1
    finally:
        if client is not None:
            client.stop.set()
        if ui is not None:
            ui.kill()
        log("== clean stop: tarn destroy, then the server")
        r = tarn.cli("destroy", NAME)
        log((r.stdout + r.stderr).strip())
        tarn.stop()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"(state and logs kept in {workdir})")


class UiCheck:
    """web/test/ui_fmnist.mjs in the background, watching the assembly's page in the
    dashboard; its lines are logged as "ui: ...". It ends by itself when its checks are done
    (or have failed)."""

    def __init__(self, tarn, replicas, out):
        url = f"http://127.0.0.1:{tarn.port}"
        self.proc = subprocess.Popen(
            ["node", os.path.join(ROOT, "web", "test", "ui_fmnist.mjs"), url, tarn.token, NAME,
             str(replicas), out],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            log("ui: " + line.rstrip())

    def finish(self, timeout):
        """Waits for the checks to end; whether all held."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"ui: FAILED: the dashboard's checks did not end within {timeout:.0f} s")
            self.kill()
            return False
        self.reader.join(10)
        log(f"ui: {'PASS' if code == 0 else 'FAIL'}: the dashboard's checks "
            f"({'all held' if code == 0 else f'exit {code}'})")
        return code == 0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def check_faults(tarn, faults):
    """After the faults: each killed instance restarted once and no other instance did, every
    instance runs at most one workload process, and the chief resumed from its checkpoint."""
    ok = True
    status = tarn.status()
    killed = {what for what, _ in faults.killed}
    for c in status.get("components", []):
        for i in c.get("containers", []):
            name = i["component_instance_name"]
            want = 1 if name in killed else 0
            pids = workload_pids(name, status["shared_dir"])
            good = i.get("restarts", 0) == want and len(pids) <= 1
            log(f"   {name}: restarts {i.get('restarts', 0)} (expected {want}), "
                f"{len(pids)} process(es), {i.get('state')}{'' if good else '  <- WRONG'}")
            ok = ok and good
    count = sum(len(c.get("containers", [])) for c in status.get("components", []))
    if count != 6:
        log(f"   {count} instances, expected 6  <- WRONG")
        ok = False
    out = tarn.log_tail("worker-0", 1 << 20)
    m = re.search(r"resuming from the checkpoint of step (\d+)", out)
    # The first global step the restarted chief reports: a progress line, an evaluation or,
    # when it finishes within one --log_every_secs, its last line.
    first = m and re.search(r'"step": (\d+)|step (\d+): test accuracy|global step (\d+)',
                            out[m.end():])
    first = first and int(next(g for g in first.groups() if g))
    if (not m or first is None or int(m.group(1)) != faults.chief_checkpoint
            or first < int(m.group(1))):
        log(f"   the restarted chief did not resume from its last checkpoint  <- WRONG "
            f"(last checkpoint before the kill: step {faults.chief_checkpoint}; "
            f"restored: {m.group(0) if m else 'none'}; first step reported: {first})")
        ok = False
    else:
        log(f"   the chief's last checkpoint before its kill was step {faults.chief_checkpoint}; "
            f"restarted, it restored that step and the first step it reports is {first}")
    return ok


def instances_command(doc, component):
    return next(c["launch_command"] for c in doc["components"] if c["name"] == component)


def progress_line(text):
    """The last JSON progress line of a tarn-train log, parsed; None if none."""
    for line in reversed(text.splitlines()):
        if line.startswith("{") and '"step"' in line:
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def exported_versions(base):
    try:
        return sorted(int(d) for d in os.listdir(base) if d.isdigit())
    except OSError:
        return []


def fmt_versions(versions):
    return "none" if not versions else ",".join(f"v{v}" for v in versions)


def fmt_served(serving):
    return ",".join("-" if v is None else f"v{v}" for v in serving) or "-"


if __name__ == "__main__":
    sys.exit(main())
