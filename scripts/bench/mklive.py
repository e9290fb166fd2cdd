#!/usr/bin/env python3
"""Creates sequences <prefix>1..<prefix>N on a seqd (POST /v1/sequences, step
1000) and touches each once (GET .../next) so each is live in that instance.
Used by scripts/bench-http.sh; standard library only.

    mklive.py HOST:PORT N [PREFIX] [WORKERS]

Prints one line: "created=C existed=E touched=T seconds=S". Exits non-zero on
any other answer.
"""
import http.client
import json
import sys
import threading
import time


def main():
    hostport, n = sys.argv[1], int(sys.argv[2])
    prefix = sys.argv[3] if len(sys.argv) > 3 else "live-"
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    host, port = hostport.rsplit(":", 1)
    counts = {"created": 0, "existed": 0, "touched": 0}
    errors = []
    lock = threading.Lock()

    def work(k):
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        created = existed = touched = 0
        try:
            for i in range(k + 1, n + 1, workers):
                name = f"{prefix}{i}"
                body = json.dumps({"name": name, "step": 1000})
                conn.request("POST", "/v1/sequences", body, {"content-type": "application/json"})
                r = conn.getresponse()
                r.read()
                if r.status == 201:
                    created += 1
                elif r.status == 409:
                    existed += 1
                else:
                    raise RuntimeError(f"create {name}: HTTP {r.status}")
                conn.request("GET", f"/v1/sequences/{name}/next", headers={"accept": "text/plain"})
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise RuntimeError(f"next {name}: HTTP {r.status}")
                touched += 1
        except Exception as e:  # reported below
            with lock:
                errors.append(str(e))
        finally:
            conn.close()
            with lock:
                counts["created"] += created
                counts["existed"] += existed
                counts["touched"] += touched

    start = time.monotonic()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - start
    print(f"created={counts['created']} existed={counts['existed']} touched={counts['touched']} seconds={secs:.1f}")
    if errors:
        print("errors: " + "; ".join(errors[:5]), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
