#!/usr/bin/env python3
# bench/dns_bench.sh's check: asks every name of a hosts file ("IP<TAB>NAME" lines) for its
# A record over UDP on 127.0.0.1:PORT (5 tries of 1 s each) and requires NOERROR with
# exactly that address. Prints the size in bytes of the first answer.
#
# usage: bench/dns_check.py HOSTS_FILE PORT LABEL
import random, socket, struct, sys
hosts, port, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pairs = [l.split() for l in open(hosts) if l.strip()]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1.0)
def ask(name):
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    q += struct.pack(">HH", 1, 1)
    for _ in range(5):
        s.sendto(q, ("127.0.0.1", port))
        try:
            while True:
                r, _ = s.recvfrom(4096)
                if len(r) >= 12 and struct.unpack(">H", r[:2])[0] == qid:
                    return r
        except socket.timeout:
            continue
    raise SystemExit(f"{label}: no answer for {name} on port {port}")
def skip_name(r, o):
    while True:
        n = r[o]
        if n == 0:
            return o + 1
        if n & 0xC0 == 0xC0:
            return o + 2
        o += 1 + n
size = None
for ip, name in pairs:
    r = ask(name)
    size = size or len(r)
    flags, qd, an = struct.unpack(">HHH", r[2:8])
    if flags & 0xF != 0:
        raise SystemExit(f"{label}: {name} A: rcode {flags & 0xF}")
    o = 12
    for _ in range(qd):
        o = skip_name(r, o) + 4
    got = []
    for _ in range(an):
        o = skip_name(r, o)
        t, c, ttl, ln = struct.unpack(">HHIH", r[o:o + 10])
        o += 10
        if t == 1 and ln == 4:
            got.append(socket.inet_ntoa(r[o:o + 4]))
        o += ln
    if got != [ip]:
        raise SystemExit(f"{label}: {name} A answered {got}, expected [{ip}]")
print(size)
